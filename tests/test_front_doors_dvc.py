"""DVC on a profile: dvc.lock records the profile that ran, a profile DVC would not record is refused under
`dvc repro` (the lock keeps telling the truth), and switching params.yaml's `profile:` makes the stage stale.
After a finished run, files tools write beside the code (bytecode, caches, swap files) leave every stage up to
date (.dvcignore), while a real code change still makes its stages stale."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from stagekit.project import copy_project

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
import benchmarks.run_folders as acceptance  # noqa: E402  (copy_command: `sparring` and the environment for a project copy)


def dvc(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("SPARRING_ROOT", "SPARRING_PROFILE")}
    base.update(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", DAGSTER_HOME=str(root / ".dagster"), **env)
    return subprocess.run([str(BIN / "dvc"), *args], cwd=root, env=base, capture_output=True, text=True, timeout=600)


def locked_profile(root: Path, stage: str) -> str:
    return yaml.safe_load((root / "dvc.lock").read_text())["stages"][stage]["params"]["params.yaml"]["profile"]


def stale(root: Path) -> dict[str, list]:
    """`dvc status`: the stages DVC would rerun, each with what changed ({} when every stage is up to date)."""
    status = dvc(root, "status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    return json.loads(status.stdout or "{}")


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


def test_bytecode_and_tool_caches_leave_a_finished_run_up_to_date_and_a_code_change_does_not(tmp_path):
    """Issue 48: stages depend on whole folders (src/sparring/world, ...) and run without writing bytecode, so the
    first ordinary import after `sparring run` wrote __pycache__/ there and `dvc status` called nearly every stage
    stale, with no code changed."""
    root = copy_project(ROOT, tmp_path / "project", lambda raw: raw.update(profile="quick"))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)  # a DVC project: the run records what it made
    cli, env = acceptance.copy_command(root)
    run = subprocess.run([*cli, "run"], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]

    # An ordinary import (no -B) of the copy's own code writes bytecode inside the folders the stages depend on.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root / "src"), env.get("PYTHONPATH")) if p)
    code = "import sparring.world.scenarios, sparring.train.coevolution; print(sparring.world.scenarios.__file__)"
    imported = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    world = root / "src" / "sparring" / "world"
    assert Path(imported.stdout.strip()) == world / "scenarios.py"  # the copy's code, not the checkout's
    assert list((world / "__pycache__").glob("scenarios.*.pyc"))  # the bytecode the issue saw
    # ... and what other tools leave there: a test run's and a linter's caches, an editor's swap and backup files
    (root / "src" / "sparring" / "agents" / ".pytest_cache").mkdir()
    (root / "src" / "sparring" / "agents" / ".pytest_cache" / "README.md").write_text("pytest cache\n")
    (root / "src" / "sparring" / "judge" / ".ruff_cache").mkdir()
    (root / "src" / "sparring" / "judge" / ".ruff_cache" / "CACHEDIR.TAG").write_text("ruff\n")
    (world / ".scenarios.py.swp").write_bytes(b"vim swap")
    (world / "scenarios.py~").write_text("backup\n")
    assert stale(root) == {}, "no code changed, yet DVC would rerun these stages"

    # A real change to a file under src/sparring/world makes exactly the stages that depend on it stale (most of
    # that folder every stage reaches, through sparring.catalog's loaders; outcome.py only the stages that play).
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    changed_file = "src/sparring/world/outcome.py"
    depend = {
        n for n, s in stages.items() if any(changed_file == d or changed_file.startswith(f"{d}/") for d in s["deps"])
    }
    assert {"simulator_sft", "cycle_1", "evaluate"} <= depend and "ingest" not in depend  # the test tests something
    path, original = root / changed_file, (root / changed_file).read_text()
    path.write_text(original + "\nCHANGED_BY_THE_TEST = True\n")
    changed = stale(root)
    assert set(changed) == depend, changed
    for name, entries in changed.items():
        deps = {k: v for e in entries for k, v in e.get("changed deps", {}).items()}
        assert deps and all(v == "modified" and f"{changed_file}/".startswith(f"{k}/") for k, v in deps.items()), name

    # Issue 62: train/lm_head.py, which every GRPO update imports (and SFT's trainer, inside a function), was missing
    # from the hand-kept deps of simulator_rl, peer_rl and peer_members; computed from imports, it reruns them all.
    path.write_text(original)
    assert stale(root) == {}
    lm_head = "src/sparring/train/lm_head.py"
    depend = {n for n, s in stages.items() if any(lm_head == d or lm_head.startswith(f"{d}/") for d in s["deps"])}
    grpo = {"simulator_rl", "agent_rl", "peer_rl", "peer_members", *(n for n in stages if n.startswith("cycle_"))}
    assert grpo <= depend and not {"ingest", "scenarios", "judge_models", "report"} & depend
    (root / lm_head).write_text((root / lm_head).read_text() + "\nCHANGED_BY_THE_TEST = True\n")
    assert set(stale(root)) == depend


def test_a_rerun_the_recovery_advice_and_a_venv_not_on_path_leave_dvc_up_to_date(tmp_path):
    """Issue 61 item 2. The project's venv linked in as .venv and not on PATH (`.venv/bin/dvc repro` without
    activating it): every stage failed with exit 127 after DVC had deleted its outputs. `sparring stage ingest` run
    again on the same inputs made `scenarios` stale, its report's wall time having changed. And the README's advice
    after a stage failed under `dvc repro` must bring back every output, uncached reports included."""
    root = copy_project(ROOT, tmp_path / "project", lambda raw: raw.update(profile="quick"))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / ".venv").symlink_to(BIN.parent, target_is_directory=True)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p or ".").resolve() != BIN.resolve())
    env = {k: v for k, v in os.environ.items() if k not in ("SPARRING_ROOT", "SPARRING_PROFILE", "VIRTUAL_ENV")}
    env.update(PATH=path, DAGSTER_HOME=str(root / ".dagster"))
    bare = subprocess.run(
        [str(BIN / "dvc"), "repro", "scenarios"], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert bare.returncode == 0, bare.stdout + bare.stderr
    outputs = ("reports/scenarios.json", "reports/headline/scenarios.json", "reports/ingest.json")
    made = {**digest(root / "data" / "scenarios"), **{p: (root / p).read_text() for p in outputs}}
    assert "wall_seconds" not in (root / "reports" / "ingest.json").read_text()  # the time is kept beside it
    assert json.loads((root / "reports" / "timings" / "ingest.json").read_text())["wall_seconds"] > 0

    def up_to_date() -> dict:
        status = dvc(root, "status", "--json", "--with-deps", "scenarios")
        assert status.returncode == 0, status.stdout + status.stderr
        return json.loads(status.stdout or "{}")

    assert up_to_date() == {}
    cli, run_env = acceptance.copy_command(root)
    again = subprocess.run([*cli, "stage", "ingest"], cwd=root, env=run_env, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert up_to_date() == {}, "the same inputs, yet DVC would rerun what ingest feeds"

    # A stage that fails under `dvc repro` (here refused: another profile than params.yaml's) after DVC removed it.
    refused = dvc(root, "repro", "-f", "--single-item", "scenarios", SPARRING_PROFILE="default")
    assert refused.returncode != 0 and not (root / "reports" / "scenarios.json").exists()
    advice = "`dvc repro <stage>` restores them all"
    assert advice in " ".join((ROOT / "README.md").read_text().split())  # what this test runs is what it says
    restored = dvc(root, "repro", "scenarios")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert {**digest(root / "data" / "scenarios"), **{p: (root / p).read_text() for p in outputs}} == made
    assert up_to_date() == {}
