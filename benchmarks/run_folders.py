"""Run folders the benchmarks read and make: ``--run LABEL=DIR`` arguments, a project copy for one seed and profile,
and the `sparring` command that runs in such a copy (shared by coevolution_acceptance, simulator_fidelity and
simulator_sft_endings)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stagekit.project import copy_project


class BadRun(Exception):
    """A run folder or file that is missing or unreadable; the message names it."""


def parse_runs(parser: argparse.ArgumentParser, runs: Sequence[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for item in runs:
        label, sep, folder = item.partition("=")
        if not sep or not label or not folder:
            parser.error(f"--run {item!r}: expected LABEL=DIR, e.g. seed0=/path/to/run")
        if label in out:
            parser.error(f"--run {label}: given twice")
        out[label] = Path(folder)
    return out


def prepare_copy(src: Path, dst: Path, seed: int, profile: str) -> Path:
    """``src`` copied to ``dst`` (:func:`stagekit.project.copy_project`), its params set to ``seed`` and
    ``profile``; relative data paths (``../shared/...``) made absolute, since the copy lives elsewhere."""

    def absolute(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (str((src / v).resolve()) if k == "path" and isinstance(v, str) and v else absolute(v))
                for k, v in node.items()
            }
        return node

    def edit(raw: dict[str, Any]) -> None:
        raw["seed"], raw["profile"], raw["ingest"] = seed, profile, absolute(raw["ingest"])

    return copy_project(src, dst, edit)


def copy_command(root: Path) -> tuple[list[str], dict[str, str]]:
    """The `sparring` command and the environment that run it against the project copy at ``root`` (its own
    Dagster home, its params.yaml's profile, its own code: the venv's editable install points at the original's
    src/, which may be edited while the copy runs)."""
    path = os.pathsep.join([str(root / "src"), str(root), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster"), "PYTHONPATH": path}
    env.pop("SPARRING_PROFILE", None)
    (root / ".dagster").mkdir(exist_ok=True)
    return [str(Path(sys.executable).parent / "sparring")], env


def copy_stage_outputs(src: Path, dst: Path, folders: Sequence[str], stages: Sequence[str]) -> None:
    """Finished stages' output ``folders`` and the ``stages``' reports (reports/NAME.json, its headline) copied from
    the run ``src`` into the project copy ``dst``."""
    for rel in folders:
        shutil.copytree(src / rel, dst / rel)
    for name in stages:
        for rel in (f"reports/{name}.json", f"reports/headline/{name}.json"):
            if (src / rel).is_file():
                (dst / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src / rel, dst / rel)
