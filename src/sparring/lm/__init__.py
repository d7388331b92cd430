"""Language-model plumbing: the chat format, tokenizers, models from config or pretrained (+LoRA), checkpoints,
the KV cache and decode loop, and the LM policy that plays a turn; no behaviour of agents or customers."""
