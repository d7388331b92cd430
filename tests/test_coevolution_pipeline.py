"""Co-evolution in the pipeline (quick profile): one stage per cycle, reports/metrics.json as METRICS.md shows,
per-cycle MLflow runs, and resuming: a run killed mid-cycle leaves no half-written cycle, and the rerun reuses
the finished cycles and ends with the same metrics as an uninterrupted run."""

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
import yaml
from dagster import AssetCheckKey, AssetKey, DagsterInstance
from mlflow import MlflowClient
from typer.testing import CliRunner

from assets.coevolution import cycle_stages
from pipelines.cli import app
from pipelines.definitions import STAGES
from sparring.params import PROFILES, load_params
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import absolute, fingerprint, is_finished, portable
from sparring.world.scenarios import load_scenarios
from stagekit.graph_shape import N_CYCLES
from stagekit.progress import upstream_closure
from stagekit.project import copy_project as copy_into
from stagekit.stages import render_dvc_yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
QUICK_CYCLES = load_params(ROOT / "params.yaml", "quick").coevolution.max_cycles
CHECKS = (
    ("ingest", "ingest_splits_are_sound"),
    ("agent_sft", "da0_beats_tfidf"),
    ("simulator_sft", "simulator_is_faithful"),
    ("evaluate", "final_no_worse_than_da0"),
    ("evaluate", "no_unauthorized_actions"),
)
EPISODE_KEYS = ("strict_pass", "routing_acc", "lookup_first", "pass", "intent_acc", "unauthorized_actions")


def copy_project(dst: Path) -> Path:
    return copy_into(ROOT, dst / "project", lambda raw: raw.update(profile="quick"))


def env_for(root: Path) -> dict:
    return {"SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster"), "SPARRING_PROFILE": None}


def invoke(root: Path, *args: str):
    result = CliRunner().invoke(app, list(args), env=env_for(root))
    assert result.exit_code == 0, result.output
    return result


def comparable(value):
    """A report without timings: what must be equal between two runs with the same seed."""
    if isinstance(value, dict):
        return {
            k: comparable(v)
            for k, v in value.items()
            if k not in ("wall_seconds", "critical_path") and not k.endswith(("_seconds", "tokens_per_s"))
        }
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, float):  # embedding-based fidelity and the judge's faithfulness differ at 1e-7 between runs
        return Near(value)
    return value


class Near(float):
    """A float equal to any float within 1e-5 (rounding both sides to 6 places split 0.7247965 on a boundary)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and abs(float(self) - other) <= 1e-5

    def __ne__(self, other: object) -> bool:  # float's own __ne__ would not ask __eq__
        return not self == other

    __hash__ = float.__hash__


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(f.relative_to(folder).as_posix().encode() + f.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """`sparring run` on the quick profile, start to end, in a copy of the project."""
    root = copy_project(tmp_path_factory.mktemp("coev-a"))
    result = invoke(root, "run", "--profile", "quick")
    return root, result.output


def test_one_stage_per_cycle_then_evaluate():
    assert N_CYCLES == max(load_params(ROOT / "params.yaml", p).coevolution.max_cycles for p in PROFILES)
    by_name = {s.name: s for s in STAGES}
    names = [s.name for s in STAGES]
    cycles = [f"cycle_{k}" for k in range(1, N_CYCLES + 1)]
    tail = names[names.index("cycle_1") :]  # in pipeline order, after the SFT stages; peer RL between
    assert tail[:N_CYCLES] == cycles and tail[-2:] == ["evaluate", "report"] and set(tail[N_CYCLES:-2]) <= {"peer_rl"}
    first = {"agent_rl", "simulator_sft", "judge_models", "scenarios"}  # DA1 starts the cycles
    plays_rl = any(load_params(ROOT / "params.yaml", p).coevolution.simulator == "rl" for p in PROFILES)
    assert set(by_name["cycle_1"].upstream) == first | ({"simulator_rl"} if plays_rl else set())
    for k in range(2, N_CYCLES + 1):
        assert by_name[f"cycle_{k}"].upstream == (f"cycle_{k - 1}",)
        assert by_name[f"cycle_{k}"].outs == (f"models/cycles/cycle_{k}",)
    assert by_name["evaluate"].upstream[0] == f"cycle_{N_CYCLES}"
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert {"reports/metrics.json": {"cache": False}} in dvc["evaluate"]["outs"]  # full file; headline is the metric
    assert all("coevolution" in dvc[c]["params"] for c in cycles)


def params_playing(tmp_path: Path, simulators: dict[str, str]) -> Path:
    """params.yaml with each profile in ``simulators`` set to play that simulator; every other profile plays sft."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    section = raw["coevolution"]
    section["simulator"] = simulators.get("default", "sft")
    for name in PROFILES:
        if name != "default":
            section.setdefault("profiles", {}).setdefault(name, {})["simulator"] = simulators.get(name, "sft")
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def test_cycle_1_waits_for_simulator_rl_only_when_a_profile_plays_it(tmp_path):
    """Off the cycles' path when no profile plays it, still upstream of evaluate (its report reaches metrics.json);
    on it, in Dagster's graph and in dvc.yaml, as soon as any one profile does."""
    graph = {s.name: s.upstream for s in STAGES}
    assert "simulator_rl" in graph["evaluate"] and "simulator_rl" in upstream_closure(graph, "report")
    sft = cycle_stages(params_playing(tmp_path, {}))
    assert "simulator_rl" not in sft[0].upstream and len(sft) == N_CYCLES
    rl = cycle_stages(params_playing(tmp_path, {"scale": "rl"}))
    assert "simulator_rl" in rl[0].upstream and all(s.upstream == (f"cycle_{k}",) for k, s in enumerate(rl[1:], 1))
    stages = [s for s in STAGES if not s.name.startswith("cycle_")] + rl
    graph = {s.name: s.upstream for s in stages}
    assert "simulator_rl" in upstream_closure(graph, "cycle_1")  # Dagster orders it first
    dvc = yaml.safe_load(render_dvc_yaml(stages))["stages"]
    assert "models/simulator_rl" in dvc["cycle_1"]["deps"]  # and so does DVC


def test_fingerprint_follows_params_and_input_bytes_and_paths_stay_portable(tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "w.bin").write_bytes(b"weights")
    (inputs / "__pycache__").mkdir()
    base = fingerprint({"seed": 0}, {"x": inputs})
    (inputs / "__pycache__" / "m.pyc").write_bytes(b"cache")  # byte-code caches come and go: ignored
    assert fingerprint({"seed": 0}, {"x": inputs}) == base
    assert fingerprint({"seed": 1}, {"x": inputs})["fingerprint"] != base["fingerprint"]
    (inputs / "w.bin").write_bytes(b"weightz")
    assert fingerprint({"seed": 0}, {"x": inputs})["fingerprint"] != base["fingerprint"]

    folder = tmp_path / "cycle_1"
    folder.mkdir()
    (folder / "inputs.json").write_text(json.dumps(base))
    assert not is_finished(folder, base)  # no state.json/metrics.json: not a finished cycle
    (folder / "state.json").write_text("{}")
    (folder / "metrics.json").write_text("{}")
    assert is_finished(folder, base) and not is_finished(folder, fingerprint({"seed": 1}, {"x": inputs}))

    state = CycleState("models/agent_sft", "models/simulator_sft", ["models/cycles/cycle_1/adversary"])
    live = absolute(state, tmp_path)
    assert live.agent_dir == str(tmp_path.resolve() / "models" / "agent_sft")
    tmp, final = tmp_path / "models" / "cycles" / ".cycle_2.tmp-1", tmp_path / "models" / "cycles" / "cycle_2"
    moved = portable(replace(live, agent_dir=str(tmp / "agent")), tmp_path, tmp, final)
    assert moved.agent_dir == "models/cycles/cycle_2/agent" and moved.adversary_dirs == state.adversary_dirs


def test_quick_run_writes_metrics_json_mlflow_and_dagster(uninterrupted):
    root, output = uninterrupted
    doc = json.loads((root / "reports" / "metrics.json").read_text())
    assert doc["profile"] == "quick" and doc["seed"] == 0
    n = load_params(root / "params.yaml", "quick").evaluate.eval_scenarios
    assert doc["n_heldout"] == n
    ran = [f"cycle_{k}" for k in range(1, QUICK_CYCLES + 1)]
    members = load_params(root / "params.yaml", "quick").peer_rl.members
    # the adapted agent plays as peer_final (quick's peer_rl trained it); the peer routers: their routing, in `peer`
    assert set(doc["agents"]) == {"da0", "da1", "final", "peer_final", *ran}
    assert doc["draws"] == load_params(root / "params.yaml", "quick").evaluate.draws
    assert set(doc["gains"]) == {"da1-da0", "final-da0", "final-da1", "peer_final-final"}  # [mean, low, high]
    for pair in doc["gains"].values():
        assert set(pair) == {"ref", "advpool", "coop", "camo"} and all(
            low <= mean <= high for mean, low, high in pair.values()
        )
    assert set(doc["peer"]["members"]) == set(members) and {"kappa", "c", "w"} <= set(doc["peer"])
    for m in doc["peer"]["members"].values():
        assert 0.0 <= m["before"] <= 1.0 and 0.0 <= m["after"] <= 1.0 and m["collapsed"] in (True, False)
    peer_report = json.loads((root / "reports" / "peer_rl.json").read_text())
    peer = peer_report["per_utterance"]  # each member's accuracies recompute from its votes
    # measured on labelled rows held out of the unlabeled pool (measure_from: pool), not on the test split
    test_ids = pl.read_parquet(root / "data" / "ingest" / "test.parquet")["id"].to_list()
    measured = load_params(root / "params.yaml", "quick").peer_rl.measure
    assert len(peer["ids"]) == len(set(peer["ids"])) == measured == len(peer["intents"]) and None not in peer["intents"]
    assert all(i.startswith("x-") for i in peer["ids"]) and not set(peer["ids"]) & set(test_ids)
    for name, m in doc["peer"]["members"].items():
        for when in ("before", "after"):
            right = [v == g for v, g in zip(peer["votes"][name][when], peer["intents"], strict=True)]
            assert sum(right) / len(right) == pytest.approx(m[when]), (name, when)
    for name, metrics in doc["agents"].items():
        for opponent in ("coop", "camo", "ref", "advpool"):
            k = 1 if opponent == "coop" else doc["draws"]  # coop is greedy: one draw; the sampled ones K
            assert metrics[f"n_episodes_{opponent}"] == n * k and metrics[f"draws_{opponent}"] == k, name
            for key in EPISODE_KEYS:
                assert f"{key}_{opponent}" in metrics, (name, key, opponent)
        for key in ("strict_pass_advpool", "routing_acc_coop", "adv_success_advpool", "adv_faithfulness_advpool"):
            assert 0.0 <= metrics[key] <= 1.0
    cycles = doc["cycles"]
    assert [c["cycle"] for c in cycles] == list(range(1, QUICK_CYCLES + 1))
    assert doc["w_da_trajectory"] == [c["w_da"] for c in cycles]
    assert doc["adv_success_trajectory"] == [c["arena_adv_success"] for c in cycles]
    assert doc["trained_history"] == [c["trained"] for c in cycles]
    episodes = json.loads((root / "reports" / "evaluate.json").read_text())["episodes"]
    for name in ("da0", "final", "expert"):  # per-episode outcomes beside the figures, for paired comparisons
        for opponent in ("coop", "camo", "ref", "advpool"):
            flags = episodes["strict_pass"][name][opponent]
            figures = doc["ceiling"] if name == "expert" else doc["agents"][name]
            played = n * figures[f"draws_{opponent}"]  # every scenario once per draw (the expert: its first draws)
            assert len(episodes["scenario_ids"][opponent]) == len(episodes["draws"][opponent]) >= len(flags) == played
            assert name == "expert" or len(flags) == len(episodes["scenario_ids"][opponent])
            assert flags.count("1") / played == pytest.approx(figures[f"strict_pass_{opponent}"])
    assert doc["stop_reason"] == "max_cycles" and cycles[-1]["stop_reason"] == "max_cycles"
    for c in cycles:
        assert c["trained"] in ("agent", "adversary") and 0.0 <= c["w_da"] <= 1.0
        assert "strict_pass_advpool" in c and "adv_realism" in c
    trained = [c["trained"] for c in cycles]
    assert doc["adversary_generations"] == trained.count("adversary")
    for simulator in ("sft", "rl"):  # TRACER's two stages, measured on the same held-out sessions
        assert {"outcome_f1", "discriminator_auc", "trajectory_distance", "false_negative_rate"} <= set(
            doc["simulator"][simulator]
        )
    ceiling = doc["simulator"]["ceiling"]  # the best ending fidelity reachable on the same sessions
    assert 0.0 <= ceiling["outcome_f1"] <= 1.0 and 0.0 <= ceiling["sim_rate_escalated"] <= 1.0
    timed = json.loads((root / "reports" / "timings" / "evaluate.json").read_text())["timings"]["metrics_json"]
    run = json.loads((root / "reports" / "timings" / "run.json").read_text())  # the run's timing, in one place
    assert {"ingest", "agent_sft", "cycle_1", "cycle_2", "evaluate", "report"} <= set(run["stage_wall_seconds"])
    assert run["critical_path"]["stages"][-1] == "report" and run["wall_seconds"] > run["critical_path"]["seconds"]
    assert "stage_wall_seconds" not in doc and "critical_path" not in doc  # report depends on metrics.json
    assert "stage_wall_seconds" not in timed and "critical_path" not in timed  # evaluate no longer times the run
    rl_phases = json.loads((root / "reports" / "timings" / "agent_rl.json").read_text())["phases"]
    assert {"self_training_sampling", "self_training_sft", "grpo_rollouts", "grpo_updates_and_validation"} <= set(
        rl_phases
    )  # main_job_profile splits agent_rl
    assert all(c["grpo_tokens_per_s"] > 0 for c in timed["cycles"]) and "grpo_tokens_per_s" not in cycles[0]
    assert "held-out agents" in output and "co-evolution" in output

    # Cycles past the quick budget record that co-evolution stopped, copy the state, and train nothing.
    last = root / "models" / "cycles" / f"cycle_{QUICK_CYCLES}"
    for k in range(QUICK_CYCLES + 1, N_CYCLES + 1):
        folder = root / "models" / "cycles" / f"cycle_{k}"
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["stopped"] is True and metrics["trained"] == "none"
        assert not (folder / "agent").exists() and not (folder / "adversary").exists()
        assert (folder / "state.json").read_text() == (last / "state.json").read_text()
    state = json.loads((last / "state.json").read_text())
    for path in [state["agent_dir"], *state["adversary_dirs"]]:  # relative to the project, and there
        assert not Path(path).is_absolute() and (root / path / "config.json").is_file()

    db = sqlite3.connect(root / "mlruns" / "mlflow.db")
    runs = dict(db.execute("select run_uuid, name from runs").fetchall())
    parents = dict(db.execute("select run_uuid, value from tags where key = 'mlflow.parentRunId'").fetchall())
    assert {f"cycle_{k}" for k in range(1, N_CYCLES + 1)} | {"evaluate"} <= {runs[r] for r in parents}
    cycle_1 = next(r for r in parents if runs[r] == "cycle_1")
    logged = dict(db.execute("select key, value from metrics where run_uuid = ?", (cycle_1,)).fetchall())
    assert logged["w_da"] == cycles[0]["w_da"] and "strict_pass_advpool" in logged and "adv_faithfulness" in logged
    trajectory = db.execute(
        "select step, value from metrics where run_uuid = ? and key = 'coevolution.w_da' order by step",
        (parents[cycle_1],),
    ).fetchall()
    assert trajectory == [(c["cycle"], c["w_da"]) for c in cycles]
    for name, member in peer_report["members"].items():  # every step row of each member's child run, logged in batches
        child = next(r for r in parents if runs[r] == f"peer_rl.{name}")
        steps = db.execute("select step from metrics where run_uuid = ? and key = 'reward'", (child,)).fetchall()
        assert sorted(s for (s,) in steps) == [row["step"] for row in member["steps"]], name
    curves = {
        "adv_success": [(c["cycle"], c["arena_adv_success"]) for c in cycles],
        "agent_trained": [(c["cycle"], float(c["trained"] == "agent")) for c in cycles],
    }
    for key, expected in curves.items():
        curve = db.execute(
            "select step, value from metrics where run_uuid = ? and key = ? order by step",
            (parents[cycle_1], f"coevolution.{key}"),
        ).fetchall()
        assert curve == expected, key
    artifacts = list((root / "mlruns" / "artifacts").glob(f"{cycle_1}/artifacts/checkpoint/{trained[0]}/*"))
    assert any(p.name == "model.safetensors" for p in artifacts)
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    logged = {m.name: m for m in client.search_logged_models([client.get_run(cycle_1).info.experiment_id])}
    expected = {"agent_sft", "agent_rl", "simulator_sft", "simulator_rl", f"cycle_1-{trained[0]}"}
    expected |= {f"peer_rl-{m}" for m in members}
    assert expected <= set(logged), sorted(logged)  # every checkpoint is a logged model, not only loose files
    model = logged[f"cycle_1-{trained[0]}"]
    assert model.source_run_id == cycle_1 and str(model.status).endswith("READY")
    assert model.tags["sparring.format"] == "full-safetensors"
    assert "model.safetensors" in {a.path for a in client.list_logged_model_artifacts(model.model_id)}

    with DagsterInstance.from_config(str(root / ".dagster")) as instance:
        event = instance.get_latest_materialization_event(AssetKey("cycle_1"))
        assert event.asset_materialization.metadata["w_da"].value == cycles[0]["w_da"]
        assert event.asset_materialization.metadata["trained"].value == trained[0]


def test_the_acceptance_benchmark_reads_a_finished_quick_run(uninterrupted):
    """benchmarks/coevolution_acceptance.py on a real run's files: every figure read, a JSON last line, exit 0
    (the quick models pass nothing, so the verdicts do not matter here)."""
    root, _ = uninterrupted
    script = ROOT / "benchmarks" / "coevolution_acceptance.py"
    done = subprocess.run(
        [sys.executable, str(script), "--run", f"seed0={root}", "--profile", "quick"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    figures = doc["seeds"]["seed0"]
    assert figures["n_paired"] == load_params(root / "params.yaml", "quick").evaluate.eval_scenarios
    low, high = figures["final_minus_da0_advpool_ci"]
    assert low <= figures["final_minus_da0_advpool"] <= high
    assert set(doc["criteria"]) == {"expert_ceiling", "pool_half_gap", "coop_routing_camo", "both_sides_trained",
                                    "first_gym", "da1_gain", "final_gain", "coop_camo_held"}  # fmt: skip
    assert (
        figures["gain_da1-da0_advpool"][1] <= figures["gain_da1-da0_advpool"][0] <= figures["gain_da1-da0_advpool"][2]
    )


def test_the_learning_curve_benchmark_runs_its_arms_on_a_quick_run(uninterrupted, tmp_path):
    """benchmarks/agent_learning_curve.py from the quick run's warm start, on gym scenarios no demo played: a GRPO arm
    with two updates per batch and the RFT arm, each kept every step and played on the same held-out scenarios as
    the start; per-step signals, the paired interval and the plot (the quick models pass nothing: the figures'
    shape is under test)."""
    root, _ = uninterrupted
    script = ROOT / "benchmarks" / "agent_learning_curve.py"
    png, outcomes = tmp_path / "curves.png", tmp_path / "arms.json"
    args = ["--profile", "quick", "--steps", "2", "--every", "1", "--eval-scenarios", "3", "--plot", str(png)]
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            str(root),
            *args,
            "--arm",
            "mu2:num_iterations=2,epsilon_high=0.3",
            "--rft",
            "--fresh-gym",
            "5",
            "--reward",
            "false_report=1.0",
            "--arms-json",
            str(outcomes),
        ],  # fmt: skip
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(doc["arms"]) == {"mu2", "rft"} and doc["eval_scenarios"] == 3
    assert doc["gym"] == {"scenarios": 5, "fresh": True, "file": ""} and doc["reward"]["false_report"] == 1.0
    for name, arm in doc["arms"].items():
        assert arm["steps"] == [0, 1, 2], name
        assert len(arm["strict_pass_advpool"]) == len(arm["strict_pass_coop"]) == 3
        assert arm["strict_pass_advpool"][0] == doc["start"]["strict_pass_advpool"]
        low, high = arm["gain_ci"]
        assert low <= arm["strict_pass_advpool"][-1] - arm["strict_pass_advpool"][0] <= high
        assert [row["step"] for row in arm["train"]] == [1, 2]
    signals = doc["arms"]["mu2"]["train"][0]
    assert {"reward_mean", "reward_std", "frac_zero_std_groups", "adv_abs_mean", "entropy"} <= set(signals)
    assert doc["arms"]["mu2"]["update_tokens_per_s"] > 0 and png.stat().st_size > 0
    # every checkpoint's per-scenario outcomes, and what the influence graph held on its episodes
    saved = json.loads(outcomes.read_text())
    ids = saved["scenario_ids"]
    assert len(ids) == 3 and set(saved["arms"]) == {"mu2", "rft"}
    for name, arm in saved["arms"].items():
        assert set(arm["checkpoints"]) == {"1", "2"}, name
        for played in [saved["start"], *arm["checkpoints"].values()]:
            for opponent in ("advpool", "coop"):
                assert [row[0] for row in played[opponent]] == ids
                assert all(row[2] in (0, 1) and (row[3] == "") == (row[2] == 1) for row in played[opponent])
    for arm in doc["arms"].values():
        assert len(arm["graph"]) == 3 and arm["graph"][0]["graph_advpool"] == doc["start"]["graph_advpool"]
        assert isinstance(arm["collapsed"], dict)
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = subprocess.run([sys.executable, str(script), str(empty)], capture_output=True, text=True)
    assert bad.returncode != 0 and "params.yaml" in bad.stderr and "Traceback" not in bad.stderr
    bad = subprocess.run([sys.executable, script, root, *args, "--reward", "nope=1"], capture_output=True, text=True)
    assert bad.returncode != 0 and "nope" in bad.stderr and "Traceback" not in bad.stderr
    shutil.copy(root / "params.yaml", empty / "params.yaml")
    bad = subprocess.run([sys.executable, str(script), str(empty), *args[:2]], capture_output=True, text=True)
    assert bad.returncode != 0 and "agent_sft" in bad.stderr and "Traceback" not in bad.stderr


def test_the_learning_curve_benchmark_pairs_another_warm_start_with_the_start(uninterrupted, tmp_path):
    """``--steps 0 --also-start``: no arm trains; another agent plays the start's held-out episodes beside it, paired.
    The start's own checkpoint under another name plays them alike, so its gain and interval are exactly zero; a
    folder without a checkpoint is refused by name."""
    root, _ = uninterrupted
    script = ROOT / "benchmarks" / "agent_learning_curve.py"
    args = [str(root), "--profile", "quick", "--steps", "0", "--eval-scenarios", "4"]
    done = subprocess.run(
        [sys.executable, str(script), *args, "--also-start", f"again={root / 'models' / 'agent_sft'}"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["arms"] == {} and set(doc["also_start"]) == {"again"}
    again = doc["also_start"]["again"]
    # the same episodes: every figure equal (turns, routing, failure kinds), not only the (quick-model) zeros
    assert {k: v for k, v in again.items() if not k.startswith("gain_")} == doc["start"]
    for suffix in ("advpool", "coop"):
        assert again[f"gain_{suffix}_ci"] == [0.0, 0.0]
    bad = subprocess.run(
        [sys.executable, str(script), *args, "--also-start", f"none={tmp_path}"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and str(tmp_path) in bad.stderr and "Traceback" not in bad.stderr


def test_the_scenarios_stage_writes_the_agent_gyms_unplayed_openings(uninterrupted):
    """data/scenarios/gym.jsonl (``coevolution.agent_gym: unplayed``): n_gym scenarios, none opening as a training
    scenario does and none from the held-out set."""
    root, _ = uninterrupted
    folder = root / "data" / "scenarios"
    gym, train, held = (load_scenarios(folder / f"{name}.jsonl") for name in ("gym", "train", "heldout"))
    assert len(gym) == load_params(root / "params.yaml", "quick").scenarios.n_gym > 0
    assert not {s.utterance.strip() for s in gym} & {s.utterance.strip() for s in train}
    assert not {s.utterance_id for s in gym} & {s.utterance_id for s in held}


def test_validation_and_arena_sets_come_from_the_validation_split_and_meet_no_other_set(uninterrupted):
    root, _ = uninterrupted
    folder, cfg = root / "data" / "scenarios", load_params(root / "params.yaml", "quick").scenarios
    sets = {
        name: load_scenarios(folder / f"{name}.jsonl") for name in ("train", "heldout", "gym", "validation", "arena")
    }
    assert (len(sets["validation"]), len(sets["arena"])) == (cfg.n_validation, cfg.n_arena)
    for name in ("validation", "arena"):
        others = {u for other, items in sets.items() if other != name for u in (s.utterance_id for s in items)}
        assert not {s.utterance_id for s in sets[name]} & others, name


def test_agent_rl_chooses_da1_on_validation_scenarios_and_plays_no_held_out_one(uninterrupted, tmp_path, monkeypatch):
    """The stage again, in a copy of the finished quick run, with every episode's world recorded: it plays the gym
    and the validation set, never a held-out scenario (only `evaluate` reads those)."""
    import sparring.rollout

    source, _ = uninterrupted
    root = tmp_path / "run"
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(".dagster", "mlruns", ".venv"))
    played: list[str] = []
    real = sparring.rollout.build_world
    monkeypatch.setattr(sparring.rollout, "build_world", lambda sc: played.append(sc.scenario_id) or real(sc))
    invoke(root, "stage", "agent_rl")
    folder = root / "data" / "scenarios"
    ids = {name: {s.scenario_id for s in load_scenarios(folder / f"{name}.jsonl")} for name in ("heldout", "gym")}
    validation = {s.scenario_id for s in load_scenarios(folder / "validation.jsonl")}
    assert played and not set(played) & ids["heldout"]
    assert set(played) & validation and set(played) & ids["gym"]
    report = json.loads((root / "reports" / "agent_rl.json").read_text())
    curve = json.loads((root / "models" / "agent_rl" / "curve.json").read_text())
    assert curve["chosen_step"] == report["chosen_step"] >= 1 and [r["step"] for r in report["curve"]][0] == 0
    assert not (root / "scratch" / "agent_rl").exists()  # the trainer's checkpoints go once DA1 is in place


def test_quick_run_trains_the_simulator_with_tracer_rewards_and_measures_both(uninterrupted, tmp_path):
    """TRACER stage 2 end to end on quick: GRPO moved the simulator's weights, each step's reward parts are logged,
    both simulators were measured on the same held-out sessions (each session recorded), and the fidelity
    benchmark reads the run, redraws both simulators and writes the per-session file."""
    from safetensors.torch import load_file

    root, _ = uninterrupted
    report = json.loads((root / "reports" / "simulator_rl.json").read_text())
    steps = load_params(root / "params.yaml", "quick").simulator_rl.grpo.max_steps
    assert [row["step"] for row in report["train_history"]] == list(range(1, steps + 1))
    for row in report["train_history"]:
        assert 0.0 <= row["outcome_match"] <= 1.0 and -1.0 <= row["trajectory_similarity"] <= 1.0
        assert row["ended_resolved"] + row["ended_escalated"] + row["ended_abandoned"] == pytest.approx(1.0)
    for side in ("sft", "rl"):
        assert report[side]["n_replayed"] == report["sft"]["n_replayed"] > 0
        assert 0.0 <= report[side]["agent_strict_pass"] <= 1.0
        sessions = report["sessions"][side]  # per replayed session, the same ones for both simulators
        assert len(sessions) == report[side]["n_replayed"] and not any("text" in k for k in sessions[0])
        assert [r["session_id"] for r in sessions] == [r["session_id"] for r in report["sessions"]["sft"]]
    sft, rl = (load_file(root / "models" / name / "model.safetensors") for name in ("simulator_sft", "simulator_rl"))
    assert sft.keys() == rl.keys() and any(not sft[k].equal(rl[k]) for k in sft)
    script = ROOT / "benchmarks" / "simulator_fidelity.py"
    out = tmp_path / "fidelity.json"
    done = subprocess.run(
        [sys.executable, str(script), "--run", f"seed0={root}", "--profile", "quick", "--redraws", "2", "--out", out],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    for side in ("sft", "rl"):
        assert doc[side]["outcome_f1"] == report[side]["outcome_f1"]
        redrawn = doc["redrawn"]["seed0"]  # two more sampling seeds per simulator, their mean the figure
        draws = [d["outcome_f1"] for d in redrawn[f"{side}_draws"]]
        assert len(draws) == 2 and redrawn[side]["outcome_f1"] == pytest.approx(sum(draws) / 2)
    assert doc["seeds"]["seed0"]["rl_better_on"] in (0, 1, 2, 3)
    assert json.loads(out.read_text())["sessions"]["seed0"] == report["sessions"]  # what docs/runs/ commits


def _summary_table(markdown: str) -> dict[str, dict[str, str]]:
    """The report's summary table as {agent: {header: cell}}."""
    lines = markdown.split("## Summary", 1)[1].strip().split("\n\n", 1)[0].splitlines()  # the table alone
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:] if line.startswith("|")]
    return {row[0]: dict(zip(header, row, strict=True)) for row in rows}


def test_quick_run_reports_ceiling_cross_play_strategies_and_a_report_that_matches(uninterrupted):
    from sparring.evaluate.report import SUMMARY_COLUMNS, fmt, pass_hat_key

    root, output = uninterrupted
    doc = json.loads((root / "reports" / "metrics.json").read_text())
    n = doc["n_heldout"]
    expert_draws = load_params(root / "params.yaml", "quick").evaluate.expert_draws  # the ceiling: its first draws
    assert doc["ceiling"]["n_episodes_advpool"] == n * expert_draws and "strict_pass_advpool" in doc["ceiling"]
    generations = doc["adversary_generations"]
    cp = doc["cross_play"]
    pipeline_agents = sorted(doc["agents"])
    assert pipeline_agents and sorted(cp["agents"][:-1]) == pipeline_agents and cp["agents"][-1] == "expert"
    assert cp["opponents"] == ["coop", "camo", *(f"adv_{g}" for g in range(generations + 1))]  # adv_0: the simulator
    cells = zip(sum(cp["strict_pass"], []), sum(cp["ci_low"], []), sum(cp["ci_high"], []), strict=True)
    assert all(lo <= v <= hi for v, lo, hi in cells)
    i = cp["agents"].index("final")
    assert cp["n"][i][0] == n  # the coop cell is the coop figure: every held-out scenario, one (greedy) draw
    assert cp["strict_pass"][i][0] == doc["agents"]["final"]["strict_pass_coop"]
    for metrics in [*doc["agents"].values(), doc["ceiling"]]:
        fails = sum(v for k, v in metrics.items() if k.startswith("failure_") and k.endswith("_advpool"))
        assert abs(fails - (1 - metrics["strict_pass_advpool"])) < 1e-9  # one kind per failed episode
        assert "strict_pass_ref" in metrics  # pass^k needs two draws: the agents', not the ceiling's first one
        assert metrics is doc["ceiling"] or {"pass_hat_1_ref", "pass_hat_2_advpool"} <= set(metrics)
        assert len(metrics["strict_pass_advpool_by_generation"]) == generations + 1  # the simulator's share too
    assert doc["strategies"] and all(len(s["share_by_cycle"]) == generations for s in doc["strategies"])

    table = _summary_table((root / "reports" / "report.md").read_text())
    assert set(table) == {"expert (ceiling)", *doc["agents"]}
    for agent, row in table.items():
        values = doc["ceiling"] if agent == "expert (ceiling)" else doc["agents"][agent]
        for header, key in SUMMARY_COLUMNS:
            key = pass_hat_key(values, "_advpool") if key == "pass_hat_k_advpool" else key
            assert row[header] == fmt(values.get(key)), (agent, header)
    page = (root / "reports" / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 5 and "src='figures/" not in page  # self-contained
    assert {p.name for p in (root / "reports" / "figures").glob("*.png")} >= {"cross_play.png", "w_da.png"}
    assert "report: reports/report.html" in output

    db = sqlite3.connect(root / "mlruns" / "mlflow.db")
    runs = dict(db.execute("select run_uuid, name from runs").fetchall())
    parents = dict(db.execute("select run_uuid, value from tags where key = 'mlflow.parentRunId'").fetchall())
    evaluate = next(r for r in parents if runs[r] == "evaluate")
    logged = dict(db.execute("select key, value from metrics where run_uuid = ?", (evaluate,)).fetchall())
    assert fmt(logged["final.strict_pass_coop"]) == table["final"]["PASS coop"]
    assert fmt(logged["da0.strict_pass_advpool"]) == table["da0"]["PASS pool"]
    parent = parents[evaluate]
    assert (root / "mlruns" / "artifacts" / parent / "artifacts" / "report" / "report.html").is_file()
    with DagsterInstance.from_config(str(root / ".dagster")) as instance:
        event = instance.get_latest_materialization_event(AssetKey("report"))
        assert "data:image/png;base64," in event.asset_materialization.metadata["report"].value
        keys = [AssetCheckKey(AssetKey(a), n) for a, n in CHECKS]
        ran = instance.event_log_storage.get_latest_asset_check_execution_by_key(keys)
        assert set(ran) == set(keys)  # every guard ran in the main job


def test_crash_mid_cycle_then_rerun_resumes_and_equals_uninterrupted(uninterrupted, tmp_path):
    a = uninterrupted[0]
    b = copy_project(tmp_path)
    for part in ("data", "models"):  # the upstream stages' outputs, not the cycles
        shutil.copytree(a / part, b / part, ignore=shutil.ignore_patterns("cycles"))
    invoke(b, "stage", "cycle_1")
    cycles = b / "models" / "cycles"
    assert json.loads((b / "reports" / "cycle_1.json").read_text())["resumed"] is False

    # cycle_2 in its own process, killed with SIGKILL while it writes its temporary folder.
    env = {**os.environ, **{k: v for k, v in env_for(b).items() if v}, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SPARRING_PROFILE", None)
    proc = subprocess.Popen([str(BIN / "sparring"), "stage", "cycle_2"], cwd=b, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not list(cycles.glob(".cycle_2.tmp-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "cycle_2 finished before it could be killed"
    assert list(cycles.glob(".cycle_2.tmp-*")) and not (cycles / "cycle_2").exists()  # nothing half-written

    result = invoke(b, "run", "--profile", "quick")  # every stage rematerializes; cycle_1 is reused
    reports = {k: json.loads((b / "reports" / f"cycle_{k}.json").read_text()) for k in (1, 2)}
    assert reports[1]["resumed"] is True and reports[2]["resumed"] is False, result.output
    assert not list(cycles.glob(".*"))  # the killed attempt's leftovers are gone
    for k in range(1, N_CYCLES + 1):
        assert (cycles / f"cycle_{k}" / "state.json").read_text() == (
            a / "models" / "cycles" / f"cycle_{k}" / "state.json"
        ).read_text()
        for side in ("agent", "adversary"):
            if (a / "models" / "cycles" / f"cycle_{k}" / side).exists():
                assert digest(cycles / f"cycle_{k}" / side) == digest(a / "models" / "cycles" / f"cycle_{k}" / side)
    resumed, straight = (json.loads((r / "reports" / "metrics.json").read_text()) for r in (b, a))
    assert comparable(resumed) == comparable(straight)


def test_evaluation_dealt_to_two_processes_equals_one_process(uninterrupted):
    """evaluate's players split across spawned workers give the single process's figures, cross-play and the
    adversaries' episodes in the same order (strategy discovery reads them)."""
    from functools import partial

    from sparring.agents.scripted import ExpertAgent
    from sparring.catalog import load_judge
    from sparring.evaluate.heldout import evaluate_heldout
    from sparring.evaluate.parallel import evaluate_heldout_parallel
    from sparring.world.scenarios import load_scenarios

    root, _ = uninterrupted
    p = load_params(root / "params.yaml", "quick")
    state = CycleState.load(root / "models" / "cycles" / f"cycle_{QUICK_CYCLES}")
    agents = {"da0": root / "models/agent_sft", "da1": root / "models/agent_rl", "final": root / state.agent_dir}
    judge = partial(load_judge, root / "models" / "judge", p.judge, p.coevolution.agent_grpo.max_turns)
    args = (agents, root / state.simulator_dir, [root / d for d in state.adversary_dirs])
    scenarios = load_scenarios(root / "data" / "scenarios" / "heldout.jsonl")[:4]
    kw = {"seed": p.seed, "expert": ExpertAgent(), "draws": [0, 1]}
    one = evaluate_heldout(*args, scenarios, judge(), p.coevolution, **kw)
    two = evaluate_heldout_parallel(*args, scenarios, judge, p.coevolution, workers=2, **kw)
    assert len(two.worker_phases) == 2 and next(iter(two.phases)) == "play_2_processes"
    assert comparable(two.agents) == comparable(one.agents) and list(two.agents) == list(agents)
    assert comparable(two.ceiling) == comparable(one.ceiling) and two.ceiling
    assert two.cross_play == one.cross_play and two.episodes == one.episodes
    transcript = {g: [e.scenario.scenario_id for e in eps] for g, eps in one.adversary_episodes.items()}
    assert transcript == {g: [e.scenario.scenario_id for e in eps] for g, eps in two.adversary_episodes.items()}


def test_players_are_dealt_in_contiguous_groups_of_near_equal_cost():
    from sparring.evaluate.parallel import deal

    agents = {"da0": "m/a", "cycle_1": "m/a", "da1": "m/c", "final": "m/b", "cycle_2": "m/b"}
    groups = deal(agents, with_expert=True, workers=2)
    assert [list(g) for g in groups] == [["da0", "cycle_1", "da1"], ["final", "cycle_2"]]  # + the expert: 2 | 2
    assert len(deal(agents, with_expert=False, workers=8)) == 3  # one group per distinct folder at most
    assert deal({"da0": "m/a"}, with_expert=True, workers=2) == [{"da0": "m/a"}, {}]  # the expert alone
    assert deal(agents, with_expert=True, workers=1) == [agents]
