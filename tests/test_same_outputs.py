"""benchmarks/same_outputs.py: two runs' outputs compared file by file, timings aside."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.same_outputs import main


def _run(root: Path, accuracy: float, seconds: float, weights: bytes = b"w") -> Path:
    (root / "reports" / "timings").mkdir(parents=True)
    (root / "models" / "agent").mkdir(parents=True)
    report = {"metrics": {"acc": accuracy, "train_seconds": seconds}, "phases": {"train": seconds}}
    (root / "reports" / "agent.json").write_text(json.dumps(report))
    (root / "reports" / "timings" / "agent.json").write_text(json.dumps({"wall": seconds, "x": seconds}))
    (root / "reports" / "report.md").write_text(f"| agent | {seconds:.3f} |\n")
    (root / "models" / "agent" / "model.safetensors").write_bytes(weights)
    return root


def test_runs_that_differ_only_in_times_are_the_same_and_a_metric_or_a_weight_is_not(tmp_path, capsys):
    a = _run(tmp_path / "a", 0.5, 1.0)
    assert main([str(a), str(_run(tmp_path / "b", 0.5, 2.5))]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"files": 3, "same": 3, "differ": 0, "only_one": 0}
    assert main([str(a), str(_run(tmp_path / "c", 0.51, 1.0))]) == 1
    assert "differs: reports/agent.json\n    .metrics.acc: 0.5 != 0.51" in capsys.readouterr().out
    assert main([str(a), str(_run(tmp_path / "d", 0.5, 1.0, b"v"))]) == 1
    assert "differs: models/agent/model.safetensors" in capsys.readouterr().out
    (tmp_path / "d" / "models" / "agent" / "extra.json").write_text("{}")
    main([str(a), str(tmp_path / "d")])
    assert "only in the second: models/agent/extra.json" in capsys.readouterr().out


def test_a_folder_that_is_not_a_run_is_refused(tmp_path, capsys):
    assert main([str(tmp_path), str(tmp_path)]) == 2
    assert "not a run's folder" in capsys.readouterr().err
