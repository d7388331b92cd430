"""The banking world: intent taxonomy, accounts, tools, scenarios and the outcome check."""
