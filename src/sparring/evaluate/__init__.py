"""Evaluation on held-out scenarios and utterances: agent metrics per opponent, single-turn routing."""
