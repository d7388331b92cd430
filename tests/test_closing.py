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
from sparring.params import Tracking, load_params
from stagekit.resources import MlflowTracking

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


def quick_params(experiment: str):
    return load_params(ROOT / "params.yaml", "quick").model_copy(update={"tracking": Tracking(experiment=experiment)})


@pytest.mark.parametrize("raised, status", [(KeyboardInterrupt, "KILLED"), (ValueError, "FAILED")])
def test_a_stage_run_ends_killed_when_interrupted_and_failed_when_it_raised(stores, raised, status):
    _, tracking, client, _, experiment = stores
    with pytest.raises(raised), tracking.stage_run("dagster-run-1", "ingest", quick_params(experiment), []) as log:
        raise raised()
    assert client.get_run(log.run_id).info.status == status
    assert client.get_run(log.parent_id).info.status == "RUNNING"  # one stage's end is not the run's


def stage(tracking, dagster_run: str, name: str, experiment: str, raised: type[BaseException] | None = None) -> str:
    """One stage's MLflow run under ``dagster_run``'s parent, ended as ``raised`` ends it; returns the parent's id."""
    try:
        with tracking.stage_run(dagster_run, name, quick_params(experiment), []) as log:
            if raised is not None:
                raise raised()
    except BaseException as exc:
        if raised is None or not isinstance(exc, raised):
            raise
    return log.parent_id


def test_the_parent_run_is_running_until_the_run_is_over_and_then_says_how_the_whole_run_ended(stores):
    """It took the status of whichever stage ended last: FINISHED while the run went on, and a failed stage's
    FAILED overwritten by a sibling that finished after it."""
    instance, tracking, client, _, experiment = stores
    ok, failed, stopped = (started(instance, owner_tags(), "SUCCESS"), started(instance, owner_tags(), "FAILURE"),
                           started(instance, owner_tags(), "FAILURE"))  # fmt: skip
    parents = {run: stage(tracking, run, "ingest", experiment) for run in (ok, failed, stopped)}
    stage(tracking, failed, "agent_sft", experiment, ValueError)
    stage(tracking, failed, "simulator_sft", experiment)  # the sibling that finishes after the failure
    stage(tracking, stopped, "agent_sft", experiment, KeyboardInterrupt)
    assert {client.get_run(p).info.status for p in parents.values()} == {"RUNNING"}  # stages ended, runs not over
    assert close_own_runs(instance, tracking, experiment, owner_tags()) == ([], [])  # nothing left open to report
    statuses = {run: client.get_run(parent).info.status for run, parent in parents.items()}
    assert statuses == {ok: "FINISHED", failed: "FAILED", stopped: "KILLED"}


def test_a_killed_runs_parent_ends_killed(stores):
    """kill -9 in the middle of agent_sft: ingest had FINISHED its parent; now the next command settles it KILLED."""
    instance, tracking, client, experiment_id, experiment = stores
    killed = started(instance, owner_tags(dead_pid()))
    parent = stage(tracking, killed, "ingest", experiment)
    left = mlflow_run(client, experiment_id, "agent_sft", **{"dagster.run_id": killed, "mlflow.parentRunId": parent})
    assert close_stale_runs(instance, tracking, experiment) == ([killed], ["agent_sft"])
    assert client.get_run(left).info.status == "KILLED" and client.get_run(parent).info.status == "KILLED"


def test_every_run_carries_the_code_commit_and_the_params_digest(stores):
    _, tracking, client, _, experiment = stores
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    with (
        tracking.stage_run("dagster-run-2", "peer_rl", quick_params(experiment), []) as log,
        log.child_run("qwen") as m,
    ):
        pass
    runs = [client.get_run(r) for r in (log.parent_id, log.run_id, m.run_id)]
    assert [r.data.tags["mlflow.source.git.commit"] for r in runs] == [head] * 3
    assert {r.data.tags["sparring.git_commit"].removesuffix("-dirty") for r in runs} == {head}
    (digest,) = {r.data.tags["sparring.params_digest"] for r in runs}
    assert len(digest) == 12
    other = quick_params(experiment).model_copy(update={"seed": 7})
    with tracking.stage_run("dagster-run-3", "ingest", other, []) as changed:
        pass
    assert client.get_run(changed.run_id).data.tags["sparring.params_digest"] != digest


def test_ctrl_c_during_a_stage_prints_one_line_and_exits_130(tmp_path):
    """Ctrl-C reaches the terminal's whole process group: Dagster's log mirrors (tail and its orphan watcher) used
    to print KeyboardInterrupt tracebacks and the command exited 1. An ingest of many utterances keeps the stage
    running while the signal arrives."""
    from stagekit.project import copy_project

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
