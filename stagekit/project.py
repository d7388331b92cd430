"""The project around the pipeline: a copy of it to run elsewhere (tests, per-seed benchmarks: its sources and
params, without what the pipeline generates), and its DVC side (the profile DVC records, `dvc commit` after a
run, the upstream outputs a stage reads, from dvc.yaml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


# DVC sets this in the environment of every stage command it runs (dvc/env.py).
DVC_STAGE_ENV = "DVC_STAGE"


def file_profile(root: Path) -> str:
    """The profile params.yaml names (`profile:`): the value DVC's `profile` params dependency records."""
    raw = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8")) or {}
    return str(raw.get("profile", "default")) if isinstance(raw, dict) else "default"


def dvc_profile_conflict(root: Path, chosen: str | None, via: str) -> str | None:
    """Under `dvc repro`, the one-line reason to refuse a profile chosen by ``via`` (--profile or
    $SPARRING_PROFILE) that is not params.yaml's: dvc.lock would record the file's profile beside outputs made with
    another, and a later `dvc status` would call them up to date. None outside DVC or when they agree."""
    if not os.environ.get(DVC_STAGE_ENV) or not chosen:
        return None
    in_file = file_profile(root)
    if chosen == in_file:
        return None
    return (
        f"{via}={chosen}, but DVC tracks params.yaml's `profile: {in_file}` (dvc.lock would record {in_file} for "
        f"outputs made with {chosen}): set `profile: {chosen}` in params.yaml, or run `dvc exp run -S profile={chosen}`"
        " (DVC removed this stage's outputs before running it: `dvc checkout` restores them)"
    )


def is_dvc_repo(root: Path) -> bool:
    """A DVC project DVC can work in: a .dvc folder, and git around it (or DVC configured to run without)."""
    if not (root / ".dvc").is_dir():
        return False
    config = root / ".dvc" / "config"
    no_scm = config.is_file() and "no_scm = true" in config.read_text(encoding="utf-8").replace("True", "true")
    return no_scm or any((folder / ".git").exists() for folder in (root, *root.parents))


def dvc_commit(root: Path) -> tuple[bool, str]:
    """`dvc commit --force` in ``root``: record every stage's current deps, params and outs in dvc.lock (and the
    outs in DVC's cache), so the next `dvc repro` knows they are up to date. Returns (ok, DVC's last line)."""
    dvc = shutil.which("dvc") or str(Path(sys.executable).with_name("dvc"))
    env = {k: v for k, v in os.environ.items() if k not in ("SPARRING_PROFILE", DVC_STAGE_ENV)}
    try:
        done = subprocess.run(
            [dvc, "commit", "--force", "--quiet"], cwd=root, env=env, capture_output=True, text=True, timeout=1800
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return done.returncode == 0, lines[-1] if lines else ""


def declared_stages(root: Path) -> dict[str, Any]:
    """dvc.yaml's stages ({} without one): generated from the Stage declarations and checked against them by a
    test, it tells a stage's upstream outputs without importing any stage's code."""
    path = root / "dvc.yaml"
    if not path.is_file():
        return {}
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("stages", {}) or {}


def missing_upstream(root: Path, name: str) -> str | None:
    """A one-line explanation if an output that stage ``name`` reads from an upstream stage is absent, else None."""
    stages = declared_stages(root)
    producer = {out: s for s, body in stages.items() for out in body.get("outs", []) if isinstance(out, str)}
    for dep in stages.get(name, {}).get("deps", []):
        if dep in producer and not (root / dep).exists():
            up = producer[dep]
            return f"stage {name} needs {dep} from stage {up}: run `sparring stage {up}` (or `sparring run`) first"
    return None
