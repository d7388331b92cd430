"""Killed runs are closed: a run's owner process is recognised (a dead or reused pid is not it), the next command
closes the Dagster runs whose owner is gone (canceled) and their MLflow runs (KILLED) and leaves live and unowned
ones alone; an interrupted command closes its own; an interrupted stage's MLflow run ends KILLED, a failed one
FAILED. benchmarks/faults.py runs the real kills (SIGINT, SIGTERM, SIGKILL) against `sparring run`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, job, op

from pipelines.closing import (
    PID_TAG,
    STARTED_TAG,
    close_own_runs,
    close_stale_runs,
    describe,
    owner_alive,
    owner_tags,
)
from pipelines.resources import MlflowTracking
from sparring.params import Tracking, load_params

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "sparring"  # params.yaml's


@op
def nothing() -> None:
    pass


@job
def tiny() -> None:
    nothing()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_runs_owner_is_this_process_while_it_lives_and_never_a_reused_pid():
    mine = owner_tags()
    assert owner_alive(mine) is True
    assert owner_alive(owner_tags(dead_pid())) is False
    assert owner_alive({**mine, STARTED_TAG: "1"}) is False  # same pid, another process's start: reused
    assert owner_alive({}) is None and owner_alive({**mine, "sparring/host": "elsewhere"}) is None


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """One MLflow store for the module (making one takes seconds); each test has its own experiment."""
    return MlflowTracking(root=str(tmp_path_factory.mktemp("mlflow")))


@pytest.fixture()
def stores(tracking, tmp_path, request):
    client, experiment_id = tracking._setup(request.node.name)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        yield instance, tracking, client, experiment_id, request.node.name


def started(instance, tags: dict[str, str], status: str = "STARTED") -> str:
    return instance.create_run_for_job(tiny, tags=tags, status=DagsterRunStatus(status)).run_id


def mlflow_run(client, experiment_id: str, name: str, **tags: str) -> str:
    return client.create_run(experiment_id, run_name=name, tags=tags).info.run_id


def test_the_next_command_closes_what_dead_owners_left_and_nothing_else(stores):
    instance, tracking, client, experiment_id, experiment = stores
    killed = started(instance, owner_tags(dead_pid()))
    live = started(instance, owner_tags())
    unowned = started(instance, {})
    done = started(instance, owner_tags(dead_pid()), "SUCCESS")
    stage = mlflow_run(client, experiment_id, "agent_sft", **{"dagster.run_id": killed})
    member = mlflow_run(client, experiment_id, "peer_rl.qwen", **{"mlflow.parentRunId": stage})  # no own tag
    left = mlflow_run(client, experiment_id, "evaluate", **{"dagster.run_id": done})
    running = [mlflow_run(client, experiment_id, n, **{"dagster.run_id": r}) for n, r in (("a", live), ("b", unowned))]

    dagster, names = close_stale_runs(instance, tracking, experiment)
    assert dagster == [killed] and sorted(names) == ["agent_sft", "evaluate", "peer_rl.qwen"]
    assert instance.get_run_by_id(killed).status == DagsterRunStatus.CANCELED
    assert {instance.get_run_by_id(r).status for r in (live, unowned)} == {DagsterRunStatus.STARTED}
    assert {client.get_run(r).info.status for r in (stage, member, left)} == {"KILLED"}
    assert {client.get_run(r).info.status for r in running} == {"RUNNING"}
    assert describe(dagster, names).startswith(f"Dagster run {killed[:8]} marked canceled; MLflow runs ")
    assert close_stale_runs(instance, tracking, experiment) == ([], [])  # and says nothing the next time


def test_an_interrupted_command_closes_its_own_runs(stores):
    instance, tracking, client, experiment_id, experiment = stores
    mine, other = started(instance, owner_tags()), started(instance, {**owner_tags(), PID_TAG: "1"})
    stage = mlflow_run(client, experiment_id, "cycle_1", **{"dagster.run_id": mine})
    theirs = mlflow_run(client, experiment_id, "cycle_1", **{"dagster.run_id": other})
    assert close_own_runs(instance, tracking, experiment, owner_tags()) == ([mine], ["cycle_1"])
    assert client.get_run(stage).info.status == "KILLED" and client.get_run(theirs).info.status == "RUNNING"
    assert instance.get_run_by_id(other).status == DagsterRunStatus.STARTED


def test_no_store_yet_means_nothing_to_close(tmp_path):
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        assert close_stale_runs(instance, MlflowTracking(root=str(tmp_path)), EXPERIMENT) == ([], [])
    assert not (tmp_path / "mlruns").exists()  # looking did not create MLflow's store


@pytest.mark.parametrize("raised, status", [(KeyboardInterrupt, "KILLED"), (ValueError, "FAILED")])
def test_a_stage_run_ends_killed_when_interrupted_and_failed_when_it_raised(stores, raised, status):
    _, tracking, client, _, experiment = stores
    params = load_params(ROOT / "params.yaml", "quick").model_copy(update={"tracking": Tracking(experiment=experiment)})
    with pytest.raises(raised), tracking.stage_run("dagster-run-1", "ingest", params, ["ingest"]) as log:
        raise raised()
    assert client.get_run(log.run_id).info.status == status
    assert client.get_run(log.parent_id).info.status == status


def test_ctrl_c_during_a_stage_prints_one_line_and_exits_130(tmp_path):
    """Ctrl-C reaches the terminal's whole process group: Dagster's log mirrors (tail and its orphan watcher) used
    to print KeyboardInterrupt tracebacks and the command exited 1. An ingest of many utterances keeps the stage
    running while the signal arrives."""
    from pipelines.project import copy_project

    def slow(raw: dict) -> None:
        raw.update(profile="quick")
        raw["ingest"]["profiles"]["quick"]["utterances"]["per_intent"] = 20_000

    root = copy_project(ROOT, tmp_path / "project", slow)
    env = {k: v for k, v in os.environ.items() if k != "SPARRING_PROFILE"}
    env.update(SPARRING_ROOT=str(root), DAGSTER_HOME=str(root / ".dagster"))
    cli = Path(sys.executable).parent / "sparring"
    err = tmp_path / "stderr.txt"
    with err.open("w") as stream:  # a file, not a pipe: the watchers would hold a pipe open after the command ends
        proc = subprocess.Popen([cli, "stage", "ingest"], cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=stream,
                                start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "stage ingest: started" not in err.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, err.read_text()
            time.sleep(0.1)
        time.sleep(1.0)  # inside the stage, Dagster's log mirrors running
        assert proc.poll() is None, err.read_text()
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends Ctrl-C: to every process in the group
        assert proc.wait(timeout=60) == 130, err.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(0.5)  # anything the group's other processes would still print
    lines = err.read_text().splitlines()
    assert "Traceback" not in err.read_text() and "KeyboardInterrupt" not in err.read_text(), err.read_text()
    assert lines[-1] == "error: stage ingest: interrupted" and "stage ingest: interrupted after" in lines[-2], lines
