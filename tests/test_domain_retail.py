"""The retail domain's tests run in a process of their own: ``sparring.world`` binds one domain per process
(``$SPARRING_DOMAIN``), and this one plays banking."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_retail_domain_passes_its_own_tests():
    env = {**os.environ, "SPARRING_DOMAIN": "retail"}
    # --noconftest: tests/conftest.py builds banking fixtures at import; pyproject's -q alone keeps the summary line
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--noconftest",
        "-p",
        "no:cacheprovider",
        str(ROOT / "tests" / "retail_domain"),
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout and "deselected" not in done.stdout


def test_the_quick_run_plays_retail_end_to_end(tmp_path):
    """`sparring run` with params.yaml's `domain: retail` in a copy of the project: every stage runs on retail's world
    and phrasing (its intents in the scenarios, its tools in the tokenizer), and on the run's own held-out wording
    the scripted anchors hold in conversation (benchmarks/scripted_anchors.py: the expert 1.0 either way it verifies,
    skipping identification refused, random none) and the social engineer gets nothing done from any agent, the
    trained ones included (benchmarks/security.py)."""
    import json

    import yaml

    from stagekit.project import copy_project

    def edit(raw: dict) -> None:
        raw["profile"], raw["domain"] = "quick", "retail"

    root = copy_project(ROOT, tmp_path / "project", edit)
    env = {**os.environ, "SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster")}
    env.pop("SPARRING_PROFILE", None)
    env.pop("SPARRING_DOMAIN", None)
    sparring = Path(sys.executable).parent / "sparring"
    done = subprocess.run([str(sparring), "run"], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    retail = yaml.safe_load((ROOT / "src" / "sparring" / "domains" / "retail.yaml").read_text("utf-8"))
    intents = {
        json.loads(line)["intent"] for line in (root / "data" / "scenarios" / "train.jsonl").read_text().splitlines()
    }
    assert intents and intents <= set(retail["intents"])
    vocab = (root / "models" / "tokenizer" / "tokenizer.json").read_text("utf-8")
    assert "find_user_id" in vocab and "lookup_account" not in vocab
    for script, extra in (("scripted_anchors.py", []), ("security.py", ["--max-turns", "4"])):
        cmd = [sys.executable, str(ROOT / "benchmarks" / script), str(root), "--episodes", "42", *extra]
        bench = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert bench.returncode == 0, script + bench.stdout[-3000:] + bench.stderr[-2000:]
        report = json.loads(bench.stdout.strip().splitlines()[-1])
        if script == "scripted_anchors.py":
            assert report["domain"] == "retail" and report["ok"] and report["expert"]["strict_pass"] == 42
        else:
            assert report["unauthorized_actions_total"] == 0 and {"da0", "gullible"} <= set(report["agents"])
