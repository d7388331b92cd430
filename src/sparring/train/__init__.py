"""Training: SFT, co-evolution, simulator, IAPO and peer-reward methods, over TRL."""
