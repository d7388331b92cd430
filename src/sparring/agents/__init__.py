"""The agent and customer policies: chat format, tool-call syntax and tokenizer."""
