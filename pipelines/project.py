"""A copy of the project to run the pipeline elsewhere (tests, per-seed benchmarks): its sources and params,
without what the pipeline generates."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

# Top-level folders and files the pipeline (or the environment) creates; .dvc keeps its config, not its cache.
GENERATED = {".venv", ".git", "data", "models", "reports", "mlruns", ".dagster", "scratch", "dvc.lock"}
_DVC_GENERATED = {"cache", "tmp"}


def copy_project(src: Path, dst: Path, edit_params: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """``src`` copied to ``dst`` (replacing it) without generated folders or caches; ``edit_params`` changes the
    copy's params.yaml in place (as a plain dict). Returns ``dst``."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        skip = {n for n in names if n in GENERATED} if here == src else set()
        skip |= {n for n in names if n in _DVC_GENERATED} if here == src / ".dvc" else set()
        return skip | {n for n in names if n in ("__pycache__", ".pytest_cache") or n.endswith(".egg-info")}

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=ignore)
    if edit_params is not None:
        path = dst / "params.yaml"
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        edit_params(raw)
        path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return dst
