"""The pipeline frame: dvc.yaml and the Dagster graph agree, and both run the same stage to the same files,
tracked in MLflow and in the project's Dagster instance."""

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterInstance
from typer.testing import CliRunner

from pipelines.cli import app
from pipelines.definitions import STAGES, defs
from sparring.progress import INTERVAL_ENV
from stagekit.project import copy_project
from stagekit.stages import STAGE_COMMAND, render_dvc_yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's bin: sparring and dvc live there


def test_dvc_yaml_is_generated_from_the_stage_declarations():
    assert (ROOT / "dvc.yaml").read_text() == render_dvc_yaml(STAGES), "run `sparring dvc-yaml --write`"


def test_dvc_and_dagster_have_the_same_stages_and_upstreams():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    # outs are the cached folders (strings) and the small report files ({path: {cache: false}})
    paths = {name: [o if isinstance(o, str) else next(iter(o)) for o in s["outs"]] for name, s in stages.items()}
    producer = {out: name for name, outs in paths.items() for out in outs}
    dvc_graph = {name: sorted({producer[d] for d in s["deps"] if d in producer}) for name, s in stages.items()}
    asset_graph = defs.resolve_asset_graph()
    dagster_graph = {
        key.to_user_string(): sorted(p.to_user_string() for p in asset_graph.get(key).parent_keys)
        for key in asset_graph.get_all_asset_keys()
    }
    assert dvc_graph == dagster_graph
    assert all(s["cmd"] == f"{STAGE_COMMAND} {name}" for name, s in stages.items())
    for name, s in stages.items():  # every declared dep exists, so DVC never tracks a path that isn't there
        assert all((ROOT / d).exists() for d in s["deps"] if d not in producer), name


def project_copy(tmp_path: Path, **ingest_overrides) -> Path:
    def edit(raw: dict) -> None:
        raw["profile"] = "quick"
        raw["ingest"].update(ingest_overrides)

    return copy_project(ROOT, tmp_path / "project", edit)


def hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.parquet"))}


@pytest.fixture(scope="module")
def dagster_run(tmp_path_factory):
    """`sparring run` on the quick profile in a copy of the project, in its own process and with two stages at a
    time, as the default profile runs (Dagster's multiprocess executor)."""

    def edit(raw: dict) -> None:
        raw["profile"] = "quick"
        raw["runtime"]["profiles"]["quick"]["parallel_stages"] = 2

    root = copy_project(ROOT, tmp_path_factory.mktemp("dagster") / "project", edit)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)  # a DVC project: the run tells DVC what it made
    env = {**os.environ, "SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster")}
    env["PATH"] = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    env[INTERVAL_ENV] = "0"  # every progress update shown: quick's stages are shorter than the default interval
    env.pop("SPARRING_PROFILE", None)
    result = subprocess.run(
        [str(BIN / "sparring"), "run"], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return root, result.stdout + result.stderr


def test_run_trains_the_simulator_beside_the_agent(dagster_run):
    """With parallel_stages 2, agent_sft (which needs nothing of simulator_sft) runs while simulator_sft does."""
    root = dagster_run[0]
    with DagsterInstance.from_config(str(root / ".dagster")) as instance:
        run = instance.get_runs(limit=1)[0]
        spans: dict[str, list[float]] = {}
        for record in instance.all_logs(run.run_id):
            event = record.dagster_event
            if event is not None and event.step_key in ("simulator_sft", "agent_sft"):
                if event.event_type_value in ("STEP_START", "STEP_SUCCESS"):
                    spans.setdefault(event.step_key, []).append(record.timestamp)
    (sim_start, sim_end), (agent_start, agent_end) = spans["simulator_sft"], spans["agent_sft"]
    assert sim_start < agent_end and agent_start < sim_end, spans  # the two steps overlap in time


def test_run_writes_splits_report_mlflow_runs_and_dagster_history(dagster_run):
    root, output = dagster_run
    assert set(hashes(root / "data" / "ingest")) == {
        f"{p}{s}.parquet" for p in ("", "dialogues_") for s in ("train", "validation", "test")
    }
    assert "rows_train" in output  # the printed summary
    report = yaml.safe_load((root / "reports" / "ingest.json").read_text())
    assert report["profile"] == "quick" and report["metrics"]["n_intents"] == 77
    assert sum(report["label_counts"]["test"].values()) == report["metrics"]["rows_test"] > 0

    db = sqlite3.connect(root / "mlruns" / "mlflow.db")
    runs = dict(db.execute("select run_uuid, name from runs").fetchall())
    parents = dict(db.execute("select run_uuid, value from tags where key = 'mlflow.parentRunId'").fetchall())
    members = {r for (r,) in db.execute("select run_uuid from tags where key = 'sparring.member'").fetchall()}
    assert members and all(parents[m] in parents for m in members)  # peer_rl's members nest under its run
    parents = {r: p for r, p in parents.items() if r not in members}
    assert sorted(runs[r] for r in parents) == sorted(s.name for s in STAGES)  # one nested run per stage
    assert len(set(parents.values())) == 1  # under one parent run for the whole pipeline execution
    child = next(r for r in parents if runs[r] == "ingest")
    assert runs[parents[child]].startswith("pipeline-quick-")
    metrics = dict(db.execute("select key, value from metrics where run_uuid = ?", (child,)).fetchall())
    assert metrics["rows_train"] == report["metrics"]["rows_train"]
    params = dict(db.execute("select key, value from params where run_uuid = ?", (child,)).fetchall())
    assert params["ingest.utterances.source"] == "synthetic" and params["profile"] == "quick"

    with DagsterInstance.from_config(str(root / ".dagster")) as instance:  # history persists in DAGSTER_HOME
        event = instance.get_latest_materialization_event(AssetKey("ingest"))
        assert event is not None
        assert event.asset_materialization.metadata["rows_train"].value == report["metrics"]["rows_train"]
        checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [c for c in defs.resolve_asset_graph().asset_check_keys]
        )
        assert set(checks) == set(defs.resolve_asset_graph().asset_check_keys)  # every check ran
        splits = next(c for k, c in checks.items() if k.name == "ingest_splits_are_sound")
        assert splits.status.value == "SUCCEEDED"  # quality checks (DA0 vs TF-IDF) may warn on quick's tiny models


def dvc(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "DAGSTER_HOME": str(root / ".dagster"),
    }
    for var in ("SPARRING_ROOT", "SPARRING_PROFILE"):
        env.pop(var, None)
    return subprocess.run([str(BIN / "dvc"), *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_run_prints_a_line_per_stage_and_no_trainer_chatter(dagster_run):
    root, output = dagster_run
    for stage in STAGES:
        assert f"stage {stage.name}: started" in output and f"stage {stage.name}: finished in " in output, output
    assert "{'loss'" not in output and "it/s]" not in output and "Traceback" not in output  # in scratch/logs/
    assert "{'loss'" in (root / "scratch" / "logs" / "agent_sft.log").read_text()
    assert "zeros are expected" in " ".join(output.split())  # quick's all-zero tables say why


def test_run_ends_naming_its_critical_path_and_keeps_it_with_every_stages_time_in_run_json(dagster_run):
    root, output = dagster_run
    reports = {s.name: json.loads((root / s.report).read_text()) for s in STAGES}
    assert all(reports[s.name]["upstream"] == list(s.upstream) for s in STAGES)
    said = re.search(r"sparring run: critical path (.+): ([\d.]+) s of the run's ([\d.]+) s", output)
    assert said, output
    parts, seconds, took = re.split(r" ([→⇢]) ", said[1]), float(said[2]), float(said[3])
    chain, links = parts[::2], parts[1::2]
    waits = re.search(r"critical path .+, slot waits before (.+)$", output, re.M)
    waited = waits[1].split(", ") if waits else []
    assert chain[-1] == "report" and not reports[chain[0]]["upstream"]  # from a first stage to the last
    for before, link, after in zip(chain[:-1], links, chain[1:], strict=True):
        # → : the stage started as its upstream one ended; ⇢ : it waited for the process that stage freed
        assert before in reports[after]["upstream"] if link == "→" else after in waited, (before, link, after)
    timings = {s.name: json.loads((root / "reports" / "timings" / f"{s.name}.json").read_text()) for s in STAGES}
    assert not any("wall_seconds" in report for report in reports.values())  # DVC tracks the reports, not the times
    # the same path and every stage's time, in the run's one timing record; the line prints its figures to 0.1 s
    run = json.loads((root / "reports" / "timings" / "run.json").read_text())
    assert run["critical_path"]["stages"] == chain and run["critical_path"]["waits"] == waited
    assert run["critical_path"]["seconds"] == pytest.approx(sum(timings[s]["wall_seconds"] for s in chain), abs=1e-3)
    assert said[2] == f"{run['critical_path']['seconds']:.1f}" and said[3] == f"{run['wall_seconds']:.1f}"
    assert seconds < took
    assert run["stage_wall_seconds"] == {s: timings[s]["wall_seconds"] for s in run["stage_wall_seconds"]}
    assert set(run["stage_wall_seconds"]) == set(timings)


@pytest.mark.parametrize(
    "stage, label, unit",
    [
        ("simulator_sft", "SFT simulator_sft", "steps"),
        ("agent_sft", "SFT demos", "steps"),
        ("simulator_rl", "GRPO sim_reward", "steps"),
        ("evaluate", "held-out play", "episodes"),
    ],
)
def test_run_shows_each_long_stages_progress_with_rising_counts(dagster_run, stage, label, unit):
    output = dagster_run[1]
    assert f"sparring run: stages {', '.join(s.name for s in STAGES)}" in output  # what it will run, first
    pattern = rf"\] stage {stage}: {re.escape(label)}: (\d+)/(\d+) {unit} \(\d+%\)"
    seen = [(int(m[1]), int(m[2])) for m in re.finditer(pattern, output)]
    assert len({done for done, _ in seen}) >= 2, output  # at least two updates on the terminal
    assert [done for done, _ in seen] == sorted(done for done, _ in seen) and seen[-1][0] == seen[-1][1]
    assert f"{label}: " in (dagster_run[0] / "scratch" / "logs" / f"{stage}.log").read_text()  # and in its log


def test_dvc_repro_after_sparring_run_has_nothing_to_do(dagster_run):
    """`sparring run` ran `dvc commit`: the lock records what it made, so DVC reruns nothing."""
    root = dagster_run[0]
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    assert set(lock) == {s.name for s in STAGES} and lock["ingest"]["params"]["params.yaml"]["profile"] == "quick"
    again = dvc(root, "repro")
    assert again.returncode == 0 and "Running stage" not in again.stdout, again.stdout + again.stderr
    assert "Data and pipelines are up to date." in again.stdout


def test_dvc_metrics_are_a_short_table_and_plots_have_something_to_draw(dagster_run, tmp_path):
    root = dagster_run[0]
    shown = dvc(root, "metrics", "show")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.strip().splitlines()
    assert len(lines) == len(STAGES) + 1 and max(map(len, lines)) < 260, shown.stdout  # was one 28,000-char line
    assert "rows_train" in lines[0] and "w_da" in lines[0] and "final.strict_pass_advpool" in lines[0]
    drawn = dvc(root, "plots", "show", "-o", str(tmp_path / "plots"))
    assert drawn.returncode == 0, drawn.stderr
    page = (tmp_path / "plots" / "index.html").read_text()
    for title in ("simulator SFT: training loss", "DA0 warm start: training loss", "co-evolution: W_DA"):
        assert title in page
    cycles = [s.name for s in STAGES if s.name.startswith("cycle_")]
    trajectory = yaml.safe_load((root / "reports" / "plots" / f"{cycles[-1]}.json").read_text())["points"]
    assert [p["cycle"] for p in trajectory] == list(range(1, len(trajectory) + 1)) and trajectory


def test_dvc_repro_makes_the_same_files_skips_when_unchanged_and_reruns_on_a_param(tmp_path, dagster_run):
    root = project_copy(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    first = dvc(root, "repro", "ingest")
    assert first.returncode == 0, first.stdout + first.stderr
    produced = hashes(root / "data" / "ingest")
    assert produced == hashes(dagster_run[0] / "data" / "ingest")  # same files as the Dagster materialization

    second = dvc(root, "repro", "ingest")
    assert second.returncode == 0 and "didn't change, skipping" in second.stdout, second.stdout

    raw = yaml.safe_load((root / "params.yaml").read_text())
    raw["ingest"]["split"]["test"] = 0.2
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    third = dvc(root, "repro", "ingest")
    assert third.returncode == 0 and "Running stage 'ingest'" in third.stdout, third.stdout + third.stderr
    assert hashes(root / "data" / "ingest") != produced


def test_stage_command_refuses_bad_input_naming_the_file(tmp_path):
    root = project_copy(tmp_path, utterances={"source": "banking77_csv", "path": "missing.csv"})
    env = {"SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster"), "SPARRING_PROFILE": None}
    result = CliRunner().invoke(app, ["stage", "ingest"], env=env)
    assert result.exit_code != 0
    assert "missing.csv: no such file" in result.output
    assert not (root / "data" / "ingest").exists()


def test_checkpoints_load_with_plain_transformers_and_generate(dagster_run):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = dagster_run[0]
    for name in ("simulator_sft", "agent_sft"):
        folder = root / "models" / name
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder)
        assert tokenizer.padding_side == "left" and tokenizer.chat_template  # saved with every checkpoint
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": "my card never arrived"}],
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        out = model.generate(**prompt, max_new_tokens=5, do_sample=False)
        assert out.shape[1] > prompt["input_ids"].shape[1]


def test_route_command_writes_intent_tool_and_reply(dagster_run, tmp_path):
    root = dagster_run[0]
    csv_in = tmp_path / "in.csv"
    csv_in.write_text('text,ref\n"my card, it never came",1\nhow do I top up by card?,2\n', encoding="utf-8")
    out = tmp_path / "out.csv"
    result = CliRunner().invoke(
        app, ["route", str(csv_in), "--checkpoint", str(root / "models" / "agent_sft"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    import polars as pl

    routed = pl.read_csv(out)
    assert routed.columns == ["text", "ref", "intent", "tool", "reply"] and routed.height == 2
    assert routed["text"][0] == "my card, it never came"


@pytest.mark.parametrize(
    "content, checkpoint, message",
    [
        ("text\nhello\n", "nowhere", "nowhere: not a model checkpoint"),
        ("words\nhello\n", None, "missing column 'text'"),
        ("", None, "the file is empty"),
    ],
)
def test_route_refuses_bad_input(dagster_run, tmp_path, content, checkpoint, message):
    csv_in = tmp_path / "in.csv"
    csv_in.write_text(content, encoding="utf-8")
    folder = tmp_path / checkpoint if checkpoint else dagster_run[0] / "models" / "agent_sft"
    result = CliRunner().invoke(app, ["route", str(csv_in), "--checkpoint", str(folder)])
    assert result.exit_code != 0 and message in " ".join(result.output.split())
    assert not (tmp_path / "in.routed.csv").exists()
