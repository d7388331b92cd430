"""The automated judge: trained intent oracle and realism discriminator, and the rewards built on them."""
