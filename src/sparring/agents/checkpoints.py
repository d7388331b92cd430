"""Checkpoints every trained policy is saved as: `save_pretrained` safetensors with the tokenizer and its
chat template, loadable by anyone with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparring.atomic import replace_dir


def save_checkpoint(model: Any, tokenizer: Any, out_dir: Path) -> None:
    """Save model + tokenizer into `out_dir`, replacing it atomically. LoRA adapters are merged first, so the
    folder loads with plain transformers (no peft needed to use it)."""
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()

    def write(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)

    replace_dir(out_dir, write)


def load_checkpoint(folder: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
