"""LoRA checkpoints that stay adapters: the adapter, the rows sparring added to the base's vocabulary, and the base's
name, never a merged copy of the base.

A folder written by :func:`save_adapter` holds

- ``adapter_config.json`` + ``adapter_model.safetensors``: peft's ``save_pretrained`` of the active adapter, without
  the embedding matrices (peft would otherwise save the whole resized embedding and LM head, ~230 MB for SmolLM2);
- ``sparring-added-rows.safetensors``: the embedding rows of the tokens sparring added to the base's vocabulary
  (``input``; ``output`` too when the LM head is not tied to the embedding), as they were when saved;
- the tokenizer, ``generation_config.json`` and ``sparring-checkpoint.json`` (:data:`MARKER`): the base as the
  params named it (an alias such as ``smollm2-135m-instruct``, a folder or a hub id), its vocabulary size, the
  dtype, and the config fields that differ from the base's (token ids, ``sparring_tokenizer``, the system prompt).

:func:`load_adapter` rebuilds the same model: the base (safetensors only), its embeddings grown to the saved
vocabulary and the saved rows copied in, the config fields set, then the adapter attached *trainable* (and the added
rows: :mod:`~sparring.lm.added_rows`), so the next SFT or GRPO keeps training them and not the full weights.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from sparring.hf_door import config_keys_set_by_loading
from sparring.lm.added_rows import base_weight, train_added_rows
from sparring.lm.models import is_peft, torch_dtype
from sparring.lm.weights import CheckpointError, check_weights

MARKER = "sparring-checkpoint.json"  # its presence makes a folder an adapter checkpoint
ROWS_FILE = "sparring-added-rows.safetensors"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
FORMAT = "lora-adapter"
# Config fields that are not carried over from the saved model: set by loading the base / growing its embeddings
# (and config_keys_set_by_loading's private ones).
_NOT_OVERRIDDEN = frozenset(
    {
        "transformers_version",
        "architectures",
        "vocab_size",
        "dtype",
        "torch_dtype",
        "tie_word_embeddings",
    }
)


def is_adapter_model(model: Any) -> bool:
    """True for a peft model whose base can be named and loaded again (a pretrained base, not one built from a
    config: such a base exists nowhere but in the model itself)."""
    return is_peft(model) and bool(model.peft_config[model.active_adapter].base_model_name_or_path)


def _text_vocab(config: Any) -> int:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(text.vocab_size)


def adapter_metadata(model: Any) -> dict[str, Any]:
    """What :data:`MARKER` records about ``model`` (a peft model with a pretrained base)."""
    from transformers import AutoConfig

    base_path = model.peft_config[model.active_adapter].base_model_name_or_path
    source = getattr(model.config, "sparring_tokenizer", None) or {}
    base_config = AutoConfig.from_pretrained(base_path)
    reference = base_config.to_dict()
    missing = object()
    kept = _NOT_OVERRIDDEN | config_keys_set_by_loading()
    overrides = {k: v for k, v in model.config.to_dict().items() if k not in kept and reference.get(k, missing) != v}
    return {
        "format": FORMAT,
        "base": source.get("base") or base_path,  # as the params named it: an alias stays an alias
        "base_vocab_size": _text_vocab(base_config),
        "vocab_size": int(base_weight(model.get_input_embeddings()).shape[0]),
        "dtype": str(model.dtype).removeprefix("torch."),
        "adapter": model.active_adapter,
        "config": overrides,
    }


def save_adapter(model: Any, tokenizer: Any, folder: Path) -> None:
    """Write ``model``'s active adapter, its added embedding rows, tokenizer and :data:`MARKER` into ``folder``."""
    from safetensors.torch import save_file

    meta = adapter_metadata(model)
    if meta["adapter"] != "default":  # peft writes any other adapter into a subfolder of its name
        raise ValueError(f"only the 'default' adapter is saved as a checkpoint; the active one is {meta['adapter']!r}")
    model.save_pretrained(folder, safe_serialization=True, selected_adapters=["default"], save_embedding_layers=False)
    start = meta["base_vocab_size"]
    inp = base_weight(model.get_input_embeddings())
    out = base_weight(model.get_output_embeddings())
    rows = {"input": inp[start:]}
    if out.data_ptr() != inp.data_ptr():
        rows["output"] = out[start:]
    if inp.shape[0] > start:
        save_file({k: v.detach().cpu().contiguous().clone() for k, v in rows.items()}, str(folder / ROWS_FILE))
    model.generation_config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / MARKER).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_metadata(folder: Path) -> dict[str, Any]:
    """:data:`MARKER` of an adapter checkpoint, or :class:`CheckpointError` naming the file."""
    path = Path(folder) / MARKER
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{path}: not valid JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not meta.get("base"):
        raise CheckpointError(f"{path}: not a sparring adapter checkpoint (format {FORMAT!r} naming its base)")
    return meta


def check_adapter(folder: Path) -> None:
    """Refuse an adapter folder without its marker, adapter config or adapter weights (pickles are refused by
    :func:`~sparring.lm.checkpoints.check_checkpoint` first)."""
    read_metadata(folder)
    for name in ADAPTER_FILES:
        if not (folder / name).is_file():
            raise CheckpointError(f"{folder}: the adapter checkpoint has no {name}")
    try:
        json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{folder / 'adapter_config.json'}: not valid JSON") from None


def _grow_embeddings(model: Any, meta: dict[str, Any], folder: Path) -> None:
    """Grow the base's embeddings to the saved vocabulary and copy the saved added rows in."""
    from safetensors.torch import load_file

    rows = model.get_input_embeddings().num_embeddings
    if rows != meta["base_vocab_size"]:
        raise CheckpointError(
            f"{folder}: the adapter was trained on a base with {meta['base_vocab_size']} embedding rows; "
            f"{meta['base']} has {rows}"
        )
    size = int(meta["vocab_size"])
    if size <= rows:
        return
    with torch.random.fork_rng(devices=[]):  # the new rows are overwritten: leave the global RNG as it was
        model.resize_token_embeddings(size, mean_resizing=False)
    saved = load_file(str(folder / ROWS_FILE))
    with torch.no_grad():
        model.get_input_embeddings().weight[rows:] = saved["input"]
        if "output" in saved:
            model.get_output_embeddings().weight[rows:] = saved["output"]


def load_adapter(folder: Path) -> Any:
    """The model of an adapter checkpoint (after :func:`check_adapter`): its base, grown and configured as when
    saved, with the adapter and the added rows trainable; in eval mode."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, GenerationConfig

    from sparring.lm.pretrained import resolve_model_path

    folder = Path(folder)
    meta = read_metadata(folder)
    base_path = resolve_model_path(meta["base"])
    if Path(base_path).is_dir():
        check_weights(Path(base_path))  # the base too is read from safetensors only
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch_dtype(meta["dtype"]), use_safetensors=True)
    _grow_embeddings(base, meta, folder)
    for key, value in meta.get("config", {}).items():
        setattr(base.config, key, value)
    base.generation_config = GenerationConfig.from_pretrained(folder)
    model = PeftModel.from_pretrained(base, folder, is_trainable=True)
    train_added_rows(model, int(meta["base_vocab_size"]))
    model.eval()
    return model
