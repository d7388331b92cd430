"""DVC on a profile: dvc.lock records the profile that ran, a profile DVC would not record is refused under
`dvc repro` (the lock keeps telling the truth), and switching params.yaml's `profile:` makes the stage stale."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import yaml

from pipelines.project import copy_project

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def dvc(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("SPARRING_ROOT", "SPARRING_PROFILE")}
    base.update(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", DAGSTER_HOME=str(root / ".dagster"), **env)
    return subprocess.run([str(BIN / "dvc"), *args], cwd=root, env=base, capture_output=True, text=True, timeout=600)


def locked_profile(root: Path, stage: str) -> str:
    return yaml.safe_load((root / "dvc.lock").read_text())["stages"][stage]["params"]["params.yaml"]["profile"]


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_dvc_lock_records_the_profile_that_ran_and_never_another(tmp_path):
    root = copy_project(ROOT, tmp_path / "project", lambda raw: raw.update(profile="quick"))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    assert "analytics = false" in (root / ".dvc" / "config").read_text()  # offline

    first = dvc(root, "repro", "ingest")
    assert first.returncode == 0, first.stdout + first.stderr
    assert locked_profile(root, "ingest") == "quick"
    assert yaml.safe_load((root / "reports" / "ingest.json").read_text())["profile"] == "quick"  # what ran
    made, lock = digest(root / "data" / "ingest"), (root / "dvc.lock").read_text()

    # SPARRING_PROFILE is not what DVC tracks: asking for another profile under `dvc repro` is refused.
    refused = dvc(root, "repro", "-f", "ingest", SPARRING_PROFILE="default")
    assert refused.returncode != 0
    said = " ".join((refused.stdout + refused.stderr).split())
    assert "SPARRING_PROFILE=default, but DVC tracks params.yaml's `profile: quick`" in said, said
    assert "Traceback" not in said
    assert (root / "dvc.lock").read_text() == lock  # the lock still tells what made the outputs
    restored = dvc(root, "checkout", "ingest")  # DVC removed them before running the stage; its cache has them
    assert restored.returncode == 0 and digest(root / "data" / "ingest") == made, restored.stderr

    # The profile named in params.yaml is a params dependency of every stage: switching it makes them stale.
    raw = yaml.safe_load((root / "params.yaml").read_text())
    raw["profile"] = "default"
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    status = dvc(root, "status", "ingest")
    assert status.returncode == 0 and "modified:" in status.stdout and "profile" in status.stdout, status.stdout
