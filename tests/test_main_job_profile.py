"""benchmarks/main_job_profile.py builds its profile from a finished run's report files (no pipeline run here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparring.timing import Phases

ROOT = Path(__file__).resolve().parents[1]
import benchmarks.main_job_profile as mjp  # noqa: E402


def _plant(root: Path) -> None:
    reports = root / "reports"
    reports.mkdir(parents=True)
    phases = Phases()
    phases.add("intent.tokenize", 0.5, tokens=1000)
    phases.add("intent", 4.0, tokens=10_000)
    phases.add("expert_episodes", 1.0, episodes=20)
    stages = {
        "ingest": {"wall_seconds": 2.0},
        "agent_sft": {"wall_seconds": 6.0, "phases": phases.as_dict()},
        "evaluate": {"wall_seconds": 2.0, "phases": {"episodes": {"seconds": 1.5, "episodes": 30}}},
    }
    (reports / "timings").mkdir()
    for name, body in stages.items():  # the times beside the report DVC tracks, as the pipeline writes them
        (reports / f"{name}.json").write_text(json.dumps({"stage": name, "profile": "quick", "metrics": {}}))
        (reports / "timings" / f"{name}.json").write_text(json.dumps({"stage": name, "profile": "quick", **body}))
    (reports / "metrics.json").write_text(json.dumps({"profile": "quick", "wall_seconds": {"ingest": 2.0}}))


def test_profile_from_planted_reports(tmp_path: Path) -> None:
    _plant(tmp_path)
    profile = mjp.build_profile(tmp_path)
    stages = profile["stages"]
    assert set(stages) == {"ingest", "agent_sft", "evaluate"}  # metrics.json is no stage report
    assert sum(s["share"] for s in stages.values()) == pytest.approx(1.0)
    assert stages["agent_sft"]["share"] == pytest.approx(0.6)
    intent = stages["agent_sft"]["phases"]["intent"]
    assert intent["per_s"] == pytest.approx(intent["tokens"] / intent["seconds"]) == pytest.approx(2500.0)
    assert stages["agent_sft"]["other_seconds"] == pytest.approx(0.5)
    assert stages["evaluate"]["phases"]["episodes"]["per_s"] == pytest.approx(20.0)
    assert stages["ingest"]["phases"] == {} and profile["profile"] == "quick"
    for stage in stages.values():
        assert sum(p["seconds"] for p in stage["phases"].values()) <= stage["wall_seconds"]
