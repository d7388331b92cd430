"""Runs a killed `sparring run` left open, closed: its Dagster run marked canceled, its MLflow runs KILLED; and
every pipeline's parent MLflow run settled once its Dagster run is over, from all its stages (:func:`settled_status`).

Every run `sparring run` and `sparring stage` start is tagged with the process that owns it (:func:`owner_tags`:
host, pid and the pid's start time, so a reused pid is not mistaken for it). A Dagster run still STARTED (or
STARTING, CANCELING, NOT_STARTED) whose owner is gone is stale; so is an MLflow run still RUNNING whose Dagster
run is stale or over. A SIGTERM or SIGINT ends a run through Dagster's own interrupt handling (the run FAILURE,
each interrupted stage's MLflow run KILLED: stagekit/resources.py); :func:`close_own_runs` then closes whatever
the run still left open, and a SIGKILL's leftovers are closed by the next command's :func:`close_stale_runs`.
Runs without owner tags (the Dagster UI's, or older ones) are left alone: nothing says whether they still run.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HOST_TAG, PID_TAG, STARTED_TAG = "sparring/host", "sparring/pid", "sparring/pid_started"
DAGSTER_RUN_TAG = "dagster.run_id"  # on every MLflow run of a pipeline execution (stagekit/resources.py)
PARENT_TAG = "mlflow.parentRunId"
OPEN = ("NOT_STARTED", "STARTING", "STARTED", "CANCELING")  # Dagster run statuses of a run not over
KILLED = "KILLED"
KIND_TAG = "sparring.kind"  # "pipeline": the parent MLflow run of a Dagster run (stagekit/resources.py)


def settled_status(dagster_status: str | None, stages: Iterable[str]) -> str:
    """The parent MLflow run's status once its Dagster run is over, from the whole run rather than from the stage
    that ended last: FAILED if a stage failed, KILLED if one was stopped (Ctrl-C, a kill) or the run was canceled,
    FAILED if the run failed with no stage's run saying why, else FINISHED."""
    stages = set(stages)
    if "FAILED" in stages:
        return "FAILED"
    if KILLED in stages or dagster_status == "CANCELED":
        return KILLED
    return "FAILED" if dagster_status == "FAILURE" else "FINISHED"


def _process_started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux /proc; None elsewhere or when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return None if fields[0] == "Z" else fields[19]  # a zombie is dead, only not reaped yet


def owner_tags(pid: int | None = None) -> dict[str, str]:
    """Tags naming this process (or ``pid``) as a run's owner."""
    pid = os.getpid() if pid is None else pid
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), STARTED_TAG: _process_started(pid) or ""}


def owner_alive(tags: dict[str, str]) -> bool | None:
    """Whether the process a run's tags name still runs: None when they name none, or one on another host."""
    if PID_TAG not in tags or tags.get(HOST_TAG) != socket.gethostname():
        return None
    pid = int(tags[PID_TAG])
    if Path("/proc").is_dir():
        started = _process_started(pid)
        return started is not None and started == (tags.get(STARTED_TAG) or started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open_dagster_runs(instance: Any) -> list[Any]:
    from dagster import DagsterRunStatus, RunsFilter

    return list(instance.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus(s) for s in OPEN])))


def close_dagster_runs(instance: Any, runs: Iterable[Any], why: str) -> list[str]:
    """Mark ``runs`` canceled (the run log says ``why``); returns their ids."""
    closed = []
    for run in runs:
        instance.report_run_canceled(run, message=f"Closed by sparring: {why}.")
        closed.append(run.run_id)
    return closed


def _mlflow_open_runs(tracking: Any, experiment: str) -> tuple[Any, list[Any]]:
    """The MLflow client and the experiment's RUNNING runs (none when the store or experiment does not exist)."""
    client = tracking.existing_client()
    found = client.get_experiment_by_name(experiment) if client is not None and experiment else None
    if found is None:
        return client, []
    return client, list(client.search_runs([found.experiment_id], "attributes.status = 'RUNNING'", max_results=5000))


def _dagster_run_of(run: Any, by_id: dict[str, Any]) -> str | None:
    """The Dagster run an MLflow run belongs to: its own tag, or its parent's (peer_rl's member runs)."""
    tags = run.data.tags
    if DAGSTER_RUN_TAG in tags:
        return tags[DAGSTER_RUN_TAG]
    parent = by_id.get(tags.get(PARENT_TAG, ""))
    return parent.data.tags.get(DAGSTER_RUN_TAG) if parent is not None else None


def close_mlflow_runs(
    tracking: Any, experiment: str, dagster_runs: set[str], over: set[str], instance: Any = None
) -> list[str]:
    """Mark KILLED the experiment's RUNNING stage runs whose Dagster run is in ``dagster_runs`` or is known to be
    ``over`` (finished, failed or canceled), then settle those Dagster runs' parent runs from all their stages
    (:func:`settled_status`, with the Dagster run's status from ``instance``). Returns the stage runs' names: a
    parent's end is no news."""
    client, running = _mlflow_open_runs(tracking, experiment)
    by_id = {r.info.run_id: r for r in running}
    closed, parents = [], []
    for run in running:
        owner = _dagster_run_of(run, by_id)
        if owner is None or (owner not in dagster_runs and owner not in over):
            continue
        if run.data.tags.get(KIND_TAG) == "pipeline":
            parents.append((run, owner))
            continue
        client.set_terminated(run.info.run_id, KILLED)
        closed.append(run.info.run_name or run.info.run_id)
    for run, owner in parents:  # after their stages, so a stage closed just now counts
        found = client.search_runs([run.info.experiment_id], f"tags.`{PARENT_TAG}` = '{run.info.run_id}'")
        dagster = instance.get_run_by_id(owner) if instance is not None else None
        status = settled_status(dagster.status.value if dagster is not None else None, [r.info.status for r in found])
        client.set_terminated(run.info.run_id, status)
    return closed


def _finished_dagster_runs(instance: Any, ids: Iterable[str]) -> set[str]:
    """Of ``ids``, the Dagster runs in ``instance`` that are over."""
    over = set()
    for run_id in set(ids):
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status.value not in OPEN:
            over.add(run_id)
    return over


def close_stale_runs(instance: Any, tracking: Any, experiment: str) -> tuple[list[str], list[str]]:
    """Close what killed runs left open: Dagster runs whose owner process is gone (canceled), and the MLflow runs
    of those or of runs already over (KILLED). Returns (Dagster run ids, MLflow run names) closed."""
    stale = [r for r in _open_dagster_runs(instance) if owner_alive(dict(r.tags)) is False]
    dagster = close_dagster_runs(instance, stale, "the process that ran it is gone (killed)")
    _, running = _mlflow_open_runs(tracking, experiment)
    by_id = {r.info.run_id: r for r in running}
    over = _finished_dagster_runs(instance, filter(None, (_dagster_run_of(r, by_id) for r in running)))
    return dagster, close_mlflow_runs(tracking, experiment, set(dagster), over, instance)


def close_own_runs(instance: Any, tracking: Any, experiment: str, owner: dict[str, str]) -> tuple[list[str], list[str]]:
    """After this process's run has returned (or was interrupted): close what it left open, its Dagster runs still
    open (canceled) and their MLflow runs still RUNNING (KILLED). Returns what it closed, as above."""
    from dagster import RunsFilter

    mine = list(instance.get_runs(filters=RunsFilter(tags=owner)))
    still_open = [r for r in mine if r.status.value in OPEN]
    dagster = close_dagster_runs(instance, still_open, "the command that ran it was interrupted")
    return dagster, close_mlflow_runs(tracking, experiment, {r.run_id for r in mine}, set(), instance)


def describe(dagster: list[str], mlflow_runs: list[str]) -> str | None:
    """One line saying what was closed, or None when nothing was."""
    if not dagster and not mlflow_runs:
        return None
    parts = []
    if dagster:
        parts.append(f"Dagster run{'s' * (len(dagster) > 1)} {', '.join(r[:8] for r in dagster)} marked canceled")
    if mlflow_runs:
        parts.append(f"MLflow run{'s' * (len(mlflow_runs) > 1)} {', '.join(mlflow_runs)} marked KILLED")
    return "; ".join(parts)
