"""Checkpoints every trained policy is saved as: `save_pretrained` safetensors with the tokenizer and its
chat template, loadable by anyone with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparring.agents.models import ModelSpec
from sparring.atomic import replace_dir
from sparring.params import SFT, Model
from sparring.train.sft import SFTSettings


def model_spec(m: Model, seed: int = 0) -> ModelSpec:
    """params.yaml's `model` section as the library's ModelSpec (pretrained names resolve offline aliases)."""
    name = m.name_or_path
    if name:
        from sparring.agents.pretrained import resolve_model_path

        name = resolve_model_path(name)
    return ModelSpec(
        arch=m.arch,
        hidden_size=m.hidden_size,
        num_layers=m.num_layers,
        num_heads=m.num_heads,
        num_kv_heads=m.num_kv_heads,
        intermediate_size=m.intermediate_size,
        max_position_embeddings=m.max_position_embeddings,
        name_or_path=name,
        lora=m.lora,
        seed=seed,
    )


def sft_settings(cfg: SFT, seed: int) -> SFTSettings:
    """An SFT section of params.yaml (agent_sft, simulator_sft) as the trainer's settings."""
    return SFTSettings(
        epochs=cfg.epochs,
        learning_rate=cfg.learning_rate,
        batch_size=cfg.batch_size,
        warmup_steps=cfg.warmup_steps,
        adam_beta2=cfg.adam_beta2,
        weight_decay=cfg.weight_decay,
        max_length=cfg.max_length,
        seed=seed,
    )


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
