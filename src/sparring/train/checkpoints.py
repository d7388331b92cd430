"""Checkpoints every trained policy is saved as: `save_pretrained` safetensors with the tokenizer and its
chat template, loadable by anyone with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained`."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from sparring.agents.models import ModelSpec
from sparring.atomic import replace_dir
from sparring.params import SFT, Model
from sparring.train.sft import SFTSettings

T = TypeVar("T")


def settings_from(cls: type[T], section: BaseModel, **overrides: Any) -> T:
    """A settings dataclass from a params.yaml section: every field the two share by name, then ``overrides``.

    One mapping for every section (model, SFT, GRPO, co-evolution), so a field added to both sides needs no
    copy line; the section's extra fields (demos, eval_scenarios, ...) are the pipeline's, not the trainer's."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    shared = {name: getattr(section, name) for name in type(section).model_fields if name in names}
    return cls(**{**shared, **overrides})


def model_spec(m: Model, seed: int = 0) -> ModelSpec:
    """params.yaml's `model` section as the library's ModelSpec (pretrained names resolve offline aliases)."""
    name = m.name_or_path
    if name:
        from sparring.agents.pretrained import resolve_model_path

        name = resolve_model_path(name)
    return settings_from(ModelSpec, m, name_or_path=name, seed=seed)


def sft_settings(cfg: SFT, seed: int) -> SFTSettings:
    """An SFT section of params.yaml (agent_sft, simulator_sft) as the trainer's settings."""
    return settings_from(SFTSettings, cfg, seed=seed)


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
