"""Checkpoints every trained policy is saved as: `save_pretrained` safetensors with the tokenizer and its
chat template, loadable by anyone with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained`.
A LoRA model on a pretrained base stays an adapter: its folder holds the adapter, the embedding rows sparring
added, and the base's name (:mod:`sparring.lm.adapters`); loading it attaches the adapter, trainable, to the base.

Only safetensors are ever loaded: a folder holding a pickle (``.bin``, ``.pt``, ``.pkl``, ...), whose loading can
run arbitrary code, is refused, and so is a truncated or corrupt weights file, each by a :class:`CheckpointError`
naming the file, before transformers reads anything.
"""

from __future__ import annotations

import filecmp
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparring.atomic import replace_dir, write_results
from sparring.lm.weights import CheckpointError, check_weights


def save_checkpoint(model: Any, tokenizer: Any, out_dir: Path, results: Mapping[str, dict] | None = None) -> None:
    """Save model + tokenizer into `out_dir`, replacing it atomically. A LoRA model on a pretrained base is saved
    as its adapter (no merge: :func:`~sparring.lm.adapters.save_adapter`); a full model as itself. A LoRA model
    on a base built from a config (which exists nowhere else) is merged, as no base could be named. ``results``
    (file name -> JSON object: what the stage measured of this model and a later stage reads) are written beside
    the weights in the same replacement, so the folder's manifest names them (:func:`~sparring.atomic.write_results`:
    floats rounded, so a rerun writes the same bytes)."""
    from sparring.lm.adapters import is_adapter_model, save_adapter

    def save_results(folder: Path) -> None:
        for name, obj in (results or {}).items():
            write_results(obj, folder / name)

    if is_adapter_model(model):
        replace_dir(out_dir, lambda folder: (save_adapter(model, tokenizer, folder), save_results(folder)))
        return
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()

    def write(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        save_results(folder)

    replace_dir(out_dir, write)


def check_checkpoint(folder: Path) -> None:
    """Refuse (:class:`CheckpointError`) a folder that is not a whole safetensors checkpoint with its tokenizer: a
    full model (``config.json``) or a LoRA adapter (``sparring-checkpoint.json`` naming its base)."""
    from sparring.lm.adapters import MARKER, check_adapter

    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a model checkpoint (no such folder); train one with `sparring run`")
    adapter = (folder / MARKER).is_file()
    if not adapter and not (folder / "config.json").is_file():
        inside = [p for p in folder.iterdir() if (p / "config.json").is_file() or (p / MARKER).is_file()]
        inside.sort(key=lambda p: (p.name != "agent", p.name))  # a cycle's agent first: what chat and route want
        hint = f"the checkpoints in it: {', '.join(map(str, inside))}" if inside else "train one with `sparring run`"
        raise CheckpointError(f"{folder}: not a model checkpoint (no config.json); {hint}")
    check_weights(folder)
    if adapter:
        check_adapter(folder)
    else:
        try:
            json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise CheckpointError(f"{folder / 'config.json'}: not valid JSON") from None
    if not (folder / "tokenizer_config.json").is_file():
        raise CheckpointError(f"{folder}: the checkpoint has no tokenizer (tokenizer_config.json)")


def load_checkpoint(folder: Path) -> tuple[Any, Any]:
    """A checkpoint's model and tokenizer, after :func:`check_checkpoint`; safetensors only. An adapter checkpoint
    loads as its base + the adapter, trainable (a peft model), giving the outputs it had when saved."""
    check_checkpoint(folder)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sparring.lm.adapters import MARKER, load_adapter

    try:
        if (Path(folder) / MARKER).is_file():
            model = load_adapter(Path(folder))
        else:
            model = AutoModelForCausalLM.from_pretrained(folder, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except CheckpointError:
        raise
    except Exception as exc:  # transformers raises many types for a bad folder; name the folder, keep the cause
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"{folder}: cannot load the checkpoint: {first}") from exc
    return model, tokenizer


def same_checkpoint(a: Path, b: Path) -> bool:
    """Whether folders ``a`` and ``b`` hold the same files byte for byte (their hidden manifests aside): a frozen
    member saved again is the checkpoint it was loaded from."""
    if not (Path(a).is_dir() and Path(b).is_dir()):
        return False
    names = [sorted(f.name for f in Path(d).iterdir() if f.is_file() and not f.name.startswith(".")) for d in (a, b)]
    return names[0] == names[1] and all(filecmp.cmp(Path(a) / n, Path(b) / n, shallow=False) for n in names[0])
