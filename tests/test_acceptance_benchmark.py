"""benchmarks/coevolution_acceptance.py: the co-evolution criteria it checks, and the per-seed project copies."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("acceptance", ROOT / "benchmarks" / "coevolution_acceptance.py")
acceptance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(acceptance)


def report(sp_da0: float, sp_final: float, routing_da0: float, routing_final: float) -> dict:
    return {
        "agents": {
            "da0": {"strict_pass_advpool": sp_da0, "routing_acc_coop": routing_da0},
            "final": {"strict_pass_advpool": sp_final, "routing_acc_coop": routing_final},
        },
        "w_da_trajectory": [0.2, 0.5, 0.62],
        "adversary_generations": 1,
    }


def gym(success_before: float, success_after: float, faithfulness_after: float) -> dict:
    return {
        "adv_success_simulator": success_before,
        "adv_success_first_adversary": success_after,
        "adv_faithfulness_first_adversary": faithfulness_after,
    }


def test_every_criterion_holds_on_a_run_that_meets_them():
    c = acceptance.criteria(report(0.2, 0.45, 0.97, 1.0), gym(0.1, 0.3, 0.85), 590.0)
    assert c["advpool_gain"] == 2.25 and c["routing_error_coop_change"] < 0
    assert c["pass_advpool_gain"] and c["pass_routing_coop"] and c["pass_first_gym"] and c["pass_wall"]


def test_each_criterion_fails_on_its_own():
    assert not acceptance.criteria(report(0.2, 0.39, 1.0, 1.0), gym(0.1, 0.3, 0.9), 100)["pass_advpool_gain"]
    assert not acceptance.criteria(report(0.0, 0.0, 1.0, 1.0), gym(0.1, 0.3, 0.9), 100)["pass_advpool_gain"]
    # A routing error that merely did not rise is not "stays 0".
    assert not acceptance.criteria(report(0.2, 0.5, 0.9, 0.95), gym(0.1, 0.3, 0.9), 100)["pass_routing_coop"]
    assert not acceptance.criteria(report(0.2, 0.5, 1, 1), gym(0.3, 0.3, 0.9), 100)["pass_first_gym"]  # no rise
    assert not acceptance.criteria(report(0.2, 0.5, 1, 1), gym(0.1, 0.6, 0.5), 100)["pass_first_gym"]  # unfaithful
    assert not acceptance.criteria(report(0.2, 0.5, 1, 1), {}, 100)["pass_first_gym"]  # the adversary never trained
    assert not acceptance.criteria(report(0.2, 0.5, 1, 1), gym(0.1, 0.3, 0.9), 601)["pass_wall"]


def test_a_seed_copy_holds_the_sources_its_seed_and_absolute_data_paths(tmp_path):
    root = acceptance.prepare_copy(ROOT, tmp_path / "seed_7", 7, "quick")
    raw = yaml.safe_load((root / "params.yaml").read_text())
    assert raw["seed"] == 7 and raw["profile"] == "quick"
    b77 = raw["ingest"]["profiles"]["banking77"]["utterances"]["path"]
    assert Path(b77).is_absolute() and Path(b77) == (ROOT / "../shared/data/banking77/train.csv").resolve()
    assert (root / "src" / "sparring" / "rollout.py").is_file() and not (root / ".venv").exists()
    assert (root / ".dvc" / "config").is_file() and not (root / ".dvc" / "cache").exists()  # config, not cache
    assert acceptance.finished(root, "quick", 7) is None  # nothing ran yet
    (root / "reports").mkdir()
    (root / "reports" / "metrics.json").write_text(json.dumps({"profile": "quick", "seed": 7}))
    assert acceptance.finished(root, "quick", 7) == {"profile": "quick", "seed": 7}
    assert acceptance.finished(root, "default", 7) is None and acceptance.finished(root, "quick", 1) is None


def test_pipeline_seconds_is_the_last_runs_wall_time_from_dagster(tmp_path):
    import time

    import pytest
    from dagster import DagsterInstance, job, op

    @op
    def nap() -> None:
        time.sleep(0.3)

    @job
    def pipeline():
        nap()

    (tmp_path / ".dagster").mkdir()
    with pytest.raises(SystemExit, match="no finished pipeline run"):
        acceptance.pipeline_seconds(tmp_path)
    with DagsterInstance.from_config(str(tmp_path / ".dagster")) as instance:
        t = time.perf_counter()
        assert pipeline.execute_in_process(instance=instance).success
        elapsed = time.perf_counter() - t
    assert 0.3 <= acceptance.pipeline_seconds(tmp_path) <= elapsed + 0.05
