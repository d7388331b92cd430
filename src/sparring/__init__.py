"""sparring: support agents and adversarial customers trained against each other in a simulated banking world."""

import os

# transformers 5 kernelizes every from_pretrained model with hub kernels, fetched at load time on CUDA; sparring
# runs offline, and a lent GPU failed at its first model.train() without this (docs/results.md, 2026-12-04).
os.environ.setdefault("USE_HUB_KERNELS", "NO")
