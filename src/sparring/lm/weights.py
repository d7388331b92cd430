"""The weights files a checkpoint may hold: whole safetensors files only.

A folder holding a pickle (``.bin``, ``.pt``, ``.pkl``, ...), whose loading can run arbitrary code, is refused, and so
is a truncated or corrupt weights file, each by a :class:`CheckpointError` naming the file, before transformers reads
anything. Full checkpoints (:mod:`sparring.lm.checkpoints`) and adapters (:mod:`sparring.lm.adapters`) are
both checked here.
"""

from __future__ import annotations

import json
from pathlib import Path

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")

_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit on the JSON header


class CheckpointError(ValueError):
    """A folder that is not a loadable sparring checkpoint; the message names the folder or file at fault."""


def check_safetensors(path: Path) -> None:
    """Raise :class:`CheckpointError` unless ``path`` is a whole safetensors file: an 8-byte header length, a JSON
    header, and exactly the tensor bytes that header describes (a truncated copy has fewer)."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 2 or n > min(_MAX_HEADER, size - 8):
            raise CheckpointError(f"{path}: not a whole safetensors file (truncated or corrupt: {size} bytes)")
        try:
            header = json.loads(f.read(n))
            ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            raise CheckpointError(f"{path}: corrupt safetensors header") from None
    expected = 8 + n + max(ends, default=0)
    if expected != size:
        raise CheckpointError(
            f"{path}: truncated or corrupt: its header describes {expected} bytes, the file holds {size}"
        )


def check_weights(folder: Path) -> None:
    """Refuse (:class:`CheckpointError`) a folder holding a pickle, or without whole safetensors weights."""
    pickles = sorted(p for p in folder.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES)
    if pickles:
        raise CheckpointError(
            f"{pickles[0]}: a pickle file; sparring loads only safetensors (loading a pickle can run code), "
            "so this checkpoint is refused"
        )
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        raise CheckpointError(f"{folder}: the checkpoint has no weights (*.safetensors)")
    for path in weights:
        check_safetensors(path)
