"""Writes that never leave a half-written output where a good one stood: write beside, then rename."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_json(obj: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def replace_dir(out_dir: Path, fill: Callable[[Path], None]) -> None:
    """Let `fill` write a whole folder into a sibling temp folder, then swap it in for `out_dir`.

    If `fill` raises, `out_dir` is untouched. Readers see the old folder or the new one, never a mix. What an
    earlier attempt killed mid-write left beside `out_dir` (its `.tmp-<pid>` / `.old-<pid>`) is removed first."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
    for stale in [*out_dir.parent.glob(f".{out_dir.name}.tmp-*"), *out_dir.parent.glob(f".{out_dir.name}.old-*")]:
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
        if out_dir.exists():
            out_dir.rename(old)
        tmp.rename(out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def write_csv(frame: Any, path: Path) -> None:
    """A polars DataFrame as CSV, written beside the target then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    frame.write_csv(tmp)
    os.replace(tmp, path)
