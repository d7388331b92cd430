"""benchmarks/faults.py's machinery, without running the pipeline: the kill takes the whole process group, stages are
read from a Dagster-format event log, timing keys are ignored and nothing else, and a kill in the middle of an
atomic folder write leaves the old folder and debris that the next write clears."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from sparring.atomic import replace_dir

ROOT = Path(__file__).resolve().parents[1]
import benchmarks.faults as faults  # noqa: E402


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state  # a zombie is dead, only not yet reaped


def _wait_for(path: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.exists(), f"{path} never appeared"


def test_a_kill_takes_the_whole_process_group(tmp_path):
    script = "sleep 60 & echo $! > child.pid; sleep 60"
    launch = faults.Launch(tmp_path, "quick", command=["sh", "-c", script])
    _wait_for(tmp_path / "child.pid")
    child = int((tmp_path / "child.pid").read_text())
    assert _alive(child) and launch.proc.poll() is None
    launch.kill()
    assert launch.proc.returncode == -9
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(child)  # the stage processes go down with the run, not only the parent
    assert "===== launch at" in (tmp_path / "run.log").read_text()


def _event_log(path: Path, rows: list[tuple[str, str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as con:
        con.execute(
            "create table if not exists event_logs (id integer primary key, run_id text, event text, "
            "dagster_event_type text, timestamp text, step_key text, asset_key text, partition text)"
        )
        con.executemany(
            "insert into event_logs (dagster_event_type, step_key, timestamp) values (?, ?, ?)",
            [(kind, step, stamp) for kind, step, stamp in rows],
        )


def test_steps_come_from_the_runs_own_event_log(tmp_path):
    runs = tmp_path / ".dagster" / "history" / "runs"
    _event_log(runs / "old-run.db", [("STEP_START", "ingest", "2026-01-01 10:00:00.000000")])
    launch = faults.Launch(tmp_path, "quick", command=[sys.executable, "-c", "pass"])
    launch.proc.wait()
    assert launch.steps() == {}  # the earlier run's log is not this launch's
    _event_log(
        runs / "new-run.db",
        [
            ("STEP_START", "ingest", "2026-01-01 10:00:00.000000"),
            ("STEP_SUCCESS", "ingest", "2026-01-01 10:00:04.500000"),
            ("STEP_START", "ingest_ingest_splits_are_sound", "2026-01-01 10:00:04.600000"),
            ("STEP_SUCCESS", "ingest_ingest_splits_are_sound", "2026-01-01 10:00:04.700000"),
            ("STEP_START", "cycle_1", "2026-01-01 10:00:05.000000"),
        ],
    )
    _event_log(runs / "index.db", [])
    steps = launch.steps()
    assert abs(steps["ingest"]["end"] - steps["ingest"]["start"] - 4.5) < 1e-6
    assert launch.running() == ["cycle_1"]
    stages = ["ingest", "cycle_1", "cycle_10"]
    assert faults.stage_of("ingest_ingest_splits_are_sound", stages) == "ingest"
    assert faults.stage_of("cycle_10", stages) == "cycle_10"


def test_metrics_compare_without_timing_keys_only():
    a = {"agents": {"da0": {"strict_pass": 0.5, "wall_seconds": 3.0}}, "cycles": [{"resumed": False, "w_da": 0.4}]}
    b = {"agents": {"da0": {"strict_pass": 0.5, "wall_seconds": 9.0}}, "cycles": [{"resumed": True, "w_da": 0.4}]}
    b["grpo_tokens_per_s"], b["inputs_fingerprint"], b["wall"] = 12.0, "abc", {"x": 1}
    assert faults.strip_timing(a) == faults.strip_timing(b)
    b["cycles"][0]["w_da"] = 0.41
    assert faults.strip_timing(a) != faults.strip_timing(b)
    assert faults.differences(faults.strip_timing(a), faults.strip_timing(b)) == ["cycles[0].w_da: 0.4 != 0.41"]


def test_a_kill_mid_write_keeps_the_old_folder_and_the_next_write_clears_the_debris(tmp_path):
    out = tmp_path / "models" / "agent_sft"
    replace_dir(out, lambda d: (d / "weights").write_text("old"))
    writer = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from sparring.atomic import replace_dir
        def fill(d):
            (d / "weights").write_text("half")
            Path({str(tmp_path / "filling")!r}).write_text("yes")
            time.sleep(60)
        replace_dir(Path({str(out)!r}), fill)
    """)
    proc = subprocess.Popen([sys.executable, "-c", writer], start_new_session=True)
    try:
        _wait_for(tmp_path / "filling")
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert (out / "weights").read_text() == "old"
    assert [p.startswith("models/.agent_sft.tmp-") for p in faults.leftovers(tmp_path)] == [True]
    replace_dir(out, lambda d: (d / "weights").write_text("new"))
    assert (out / "weights").read_text() == "new" and faults.leftovers(tmp_path) == []


def _stores(root: Path, dagster: list[tuple[str, str]], mlflow: list[tuple[str, str, str]]) -> None:
    """The two tables open_runs reads, as Dagster's runs.db and MLflow's mlflow.db hold them."""
    (root / ".dagster" / "history").mkdir(parents=True)
    (root / "mlruns").mkdir()
    with sqlite3.connect(root / ".dagster" / "history" / "runs.db") as con:
        con.execute("create table runs (run_id text, status text)")
        con.executemany("insert into runs values (?, ?)", dagster)
    with sqlite3.connect(root / "mlruns" / "mlflow.db") as con:
        con.execute("create table runs (run_uuid text, name text, status text)")
        con.execute("create table tags (run_uuid text, key text, value text)")
        for i, (name, status, dagster_run) in enumerate(mlflow):
            con.execute("insert into runs values (?, ?, ?)", (str(i), name, status))
            con.execute("insert into tags values (?, 'dagster.run_id', ?)", (str(i), dagster_run))


def test_open_runs_are_read_from_both_stores_and_a_launchs_own_are_told_apart(tmp_path):
    _stores(
        tmp_path,
        [("old", "STARTED"), ("new", "STARTED"), ("done", "SUCCESS"), ("stopped", "CANCELED")],
        [("agent_sft", "RUNNING", "old"), ("cycle_1", "RUNNING", "new"), ("ingest", "FINISHED", "old")],
    )
    assert faults.open_runs(tmp_path) == {
        "dagster": [("old", "STARTED"), ("new", "STARTED")],
        "mlflow": [("agent_sft", "old"), ("cycle_1", "new")],
    }
    launch = faults.Launch(tmp_path, "quick", command=[sys.executable, "-c", "pass"])
    launch.proc.wait()
    launch._db = tmp_path / "new.db"  # its Dagster run is "new"
    assert faults.others_open(tmp_path, launch) == {"dagster": [("old", "STARTED")], "mlflow": [("agent_sft", "old")]}
    assert faults.mlflow_statuses(tmp_path, "old") == {"agent_sft": "RUNNING", "ingest": "FINISHED"}


def test_an_interrupt_counts_as_closed_only_when_everything_ended():
    closed = {"exit": 1, "dagster_status": "FAILURE", "mlflow": {"agent_sft": "KILLED"}, "left_open": {"dagster": []}}
    assert faults.interrupt_closed(closed)
    assert not faults.interrupt_closed({**closed, "exit": None})  # had to be killed
    assert not faults.interrupt_closed({**closed, "dagster_status": "STARTED"})
    assert not faults.interrupt_closed({**closed, "mlflow": {"agent_sft": "FAILED"}})
    assert not faults.interrupt_closed({**closed, "left_open": {"mlflow": [("cycle_1", "x")]}})
