"""Issue 61 item 2: a stage's timings live beside its report (reports/timings/<stage>.json), not in it, so the files
DVC tracks as the next stages' dependencies are the same after a rerun on the same inputs; MLflow still logs them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from stagekit.progress import previous_seconds
from stagekit.stages import Stage, StageOutput, _write_reports
from stagekit.timings import read_timings, split_timings, wall_seconds

ROOT = Path(__file__).resolve().parents[1]


def test_split_timings_takes_every_time_at_any_depth_and_keeps_the_rest():
    report = {
        "metrics": {"strict_pass": 0.5, "train_seconds": 3.2, "train_tokens_per_s": 900.0, "oracle_fit_s": 0.4},
        "phases": {"intent": {"seconds": 1.0, "tokens": 10}},
        "curve": [{"step": 1, "validation": 0.2, "seconds": 5.0}, {"step": 2, "validation": 0.3}],
        "members": {"qwen": {"before": 0.1, "steps": [{"loss": 1.0}]}},
        "critical_path": {"stages": ["ingest"], "seconds": 1.0},
    }
    kept, timed = split_timings(report)
    assert kept == {
        "metrics": {"strict_pass": 0.5},
        "curve": [{"step": 1, "validation": 0.2}, {"step": 2, "validation": 0.3}],
        "members": {"qwen": {"before": 0.1, "steps": [{"loss": 1.0}]}},
    }
    assert timed == {
        "metrics": {"train_seconds": 3.2, "train_tokens_per_s": 900.0, "oracle_fit_s": 0.4},
        "phases": {"intent": {"seconds": 1.0, "tokens": 10}},
        "curve": [{"seconds": 5.0}, {}],  # the same layout: entry k's time is entry k's
        "critical_path": {"stages": ["ingest"], "seconds": 1.0},
    }
    assert split_timings({"a": [1, 2], "b": "x"}) == ({"a": [1, 2], "b": "x"}, None)


def _write(root: Path, seconds: float, phase: float) -> None:
    stage = Stage(name="tokenizer", description="", params=(), deps=(), outs=(), upstream=("ingest",))
    params = SimpleNamespace(profile="quick", seed=0)
    output = StageOutput(
        metrics={"vocab_size": 800, "train_seconds": seconds / 2}, report={"phases": {"train": {"seconds": phase}}}
    )
    _write_reports(stage, root, params, output, SimpleNamespace(logged_curves=[]), seconds)


def test_a_rerun_with_other_times_writes_the_same_report_and_its_times_beside_it(tmp_path):
    _write(tmp_path, 4.0, 3.0)
    report = (tmp_path / "reports" / "tokenizer.json").read_bytes()
    headline = (tmp_path / "reports" / "headline" / "tokenizer.json").read_bytes()
    _write(tmp_path, 9.5, 8.0)  # the same stage on the same inputs, slower this time
    assert (tmp_path / "reports" / "tokenizer.json").read_bytes() == report  # what DVC hashes did not change
    assert (tmp_path / "reports" / "headline" / "tokenizer.json").read_bytes() == headline
    assert json.loads(report) == {
        "stage": "tokenizer", "profile": "quick", "seed": 0, "upstream": ["ingest"], "metrics": {"vocab_size": 800}
    }  # fmt: skip
    timings = read_timings(tmp_path, "tokenizer", "quick")
    assert timings == {
        "stage": "tokenizer", "profile": "quick", "seed": 0, "upstream": ["ingest"], "wall_seconds": 9.5,
        "metrics": {"train_seconds": 4.75}, "phases": {"train": {"seconds": 8.0}},
    }  # fmt: skip
    assert previous_seconds(tmp_path, "tokenizer", "quick") == 9.5  # the heartbeat's and the estimate's source
    assert wall_seconds(tmp_path, "tokenizer", "default") is None  # another profile's time says nothing


def test_no_stage_declares_the_timings_as_a_dependency_or_an_output():
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    paths = [p if isinstance(p, str) else next(iter(p)) for s in stages.values() for p in (*s["deps"], *s["outs"])]
    assert not [p for p in paths if p.startswith("reports/timings")]
    assert all(f"reports/{name}.json" in [*map(str, paths)] for name in stages)  # the reports themselves are


def test_the_run_summary_shows_the_cycles_rates_kept_beside_metrics_json(tmp_path, capsys):
    from pipelines.summary import agents_summary

    (tmp_path / "reports" / "timings").mkdir(parents=True)
    row = {"strict_pass_coop": 0.5, "strict_pass_camo": 0.5, "strict_pass_advpool": 0.5}
    cycles = [{"cycle": 1, "trained": "agent", "w_da": 0.25, "arena_adv_success": 0.5}]
    doc = {"profile": "quick", "n_heldout": 4, "stop_reason": "max_cycles", "cycles": cycles, "agents": {"da0": row}}
    (tmp_path / "reports" / "metrics.json").write_text(json.dumps(doc))
    timings = {"stage": "evaluate", "profile": "quick", "wall_seconds": 3.0}
    timings["timings"] = {"metrics_json": {"cycles": [{"grpo_tokens_per_s": 1234.4}]}}
    (tmp_path / "reports" / "timings" / "evaluate.json").write_text(json.dumps(timings))
    agents_summary(tmp_path)
    assert "1234" in capsys.readouterr().out
