"""Main job profile: where `sparring run`'s wall time goes, per stage and per phase within a stage.

Reads a finished run's records in a project folder (``--root``, default this project): each stage's
reports/timings/<stage>.json (``wall_seconds``, the time inside the stage's function, and ``phases``: what the stage
timed with ``time.perf_counter`` around its real work, counted in the tokens or episodes it processed; see
src/sparring/timing.py), and the Dagster event log
(``.dagster/history/runs/<run id>.db``: each step's start and end, so the time a stage spends outside its function
(MLflow run, reports, the step's own start) and the run's start, end and asset checks). With ``--run`` it first
runs the pipeline (``--profile``, default ``default``) in a copy of the project
(:func:`stagekit.project.copy_project`, as benchmarks/faults.py does) under ``--workdir``, and also measures
the process: launch to the run's start (interpreter start-up, imports, loading the job) and the run's end to exit
(dvc commit, the summary tables).

Per stage: wall seconds, share of the summed stage wall time, and per phase seconds, tokens or episodes and
their rate (per_s = count / seconds); ``other`` is the stage's wall time no phase covers. Phases are disjoint
and inside the stage's wall time. A reused cycle (resumed: its inputs unchanged) reports only its fingerprint.

Prints a table; the last line is JSON: ``{"root", "profile", "stage_seconds", "run": {...}, "stages": {stage:
{"wall_seconds", "share", "step_seconds", "phases": {name: {"seconds", "tokens"|"episodes", "per_s"}}}}}``.
Usage: ``python benchmarks/main_job_profile.py [--root DIR] | --run [--profile default] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from sparring.timing import UNITS
from stagekit.project import copy_project

ROOT = Path(__file__).resolve().parents[1]
RUN_START = ("PIPELINE_START", "RUN_START")
RUN_END = ("PIPELINE_SUCCESS", "PIPELINE_FAILURE", "RUN_SUCCESS", "RUN_FAILURE")
# Timings a stage's metrics already carry, as phases, for stages whose report has none: {stage: {phase: key}}.
RECORDED = {"judge_models": {"oracle_fit": "oracle_fit_s", "discriminator_fit": "discriminator_fit_s"}}


def stage_reports(root: Path) -> dict[str, dict[str, Any]]:
    """Every stage's timings (reports/timings/<stage>.json: ``wall_seconds``, ``phases``, its timing metrics), with
    its report's metrics beside them, by stage name. A report from before timings moved out (one holding
    ``wall_seconds`` itself) counts as it is."""
    from stagekit.timings import TIMINGS

    out = {}
    for path in [*sorted((root / "reports").glob("*.json")), *sorted((root / TIMINGS).glob("*.json"))]:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if not (isinstance(report, dict) and "wall_seconds" in report and report.get("stage") == path.stem):
            continue
        tracked = root / "reports" / path.name
        try:
            metrics = json.loads(tracked.read_text(encoding="utf-8")).get("metrics", {}) if tracked != path else {}
        except (OSError, ValueError):
            metrics = {}
        out[path.stem] = {**report, "metrics": {**metrics, **report.get("metrics", {})}}
    return out


def run_db(root: Path, before: set[Path] | None = None) -> Path | None:
    """The newest Dagster run database in ``root`` (one not in ``before``)."""
    runs = root / ".dagster" / "history" / "runs"
    found = [p for p in runs.glob("*.db") if p.name != "index.db" and p not in (before or set())]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def dagster_events(db: Path | None) -> dict[str, Any]:
    """From a run's event log: ``{"steps": {step: {"start", "end"}}, "run_start", "run_end"}`` (epoch seconds)."""
    out: dict[str, Any] = {"steps": {}, "run_start": None, "run_end": None}
    if db is None:
        return out
    kinds = ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE", "STEP_WORKER_STARTING", *RUN_START, *RUN_END)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
        rows = con.execute(
            f"select dagster_event_type, step_key, timestamp from event_logs where dagster_event_type in "
            f"({','.join('?' * len(kinds))}) order by id",
            kinds,
        ).fetchall()
    names = {"STEP_START": "start", "STEP_SUCCESS": "end", "STEP_FAILURE": "end", "STEP_WORKER_STARTING": "worker"}
    for kind, step, stamp in rows:
        t = datetime.fromisoformat(str(stamp)).timestamp()
        if kind in names and step:
            out["steps"].setdefault(step, {})[names[kind]] = t
        elif kind in RUN_START:
            out["run_start"] = t
        elif kind in RUN_END:
            out["run_end"] = t
    return out


def phase_row(entry: dict[str, Any]) -> dict[str, Any]:
    """``{"seconds", "tokens"|"episodes", "per_s"}``: per_s is the count over the seconds (None without both)."""
    seconds = float(entry.get("seconds", 0.0))
    row: dict[str, Any] = {"seconds": round(seconds, 4)}
    unit = next((u for u in UNITS if u in entry), None)
    if unit is not None:
        row[unit] = int(entry[unit])
    row["per_s"] = round(row[unit] / seconds, 2) if unit is not None and seconds > 0 else None
    return row


def stage_phases(name: str, report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A stage's phases: its report's, else timings among its metrics."""
    phases = report.get("phases")
    if not phases:
        metrics = report.get("metrics", {})
        phases = {p: {"seconds": metrics[k]} for p, k in RECORDED.get(name, {}).items() if k in metrics}
    return {phase: phase_row(entry) for phase, entry in phases.items()}


def build_profile(root: Path, events: dict[str, Any] | None = None) -> dict[str, Any]:
    """The profile of the run recorded in ``root`` (``events``: :func:`dagster_events`, read from root if None)."""
    events = dagster_events(run_db(root)) if events is None else events
    reports = stage_reports(root)
    steps = events["steps"]
    order = sorted(reports, key=lambda s: (steps.get(s, {}).get("start", float("inf")), s))
    total = sum(float(reports[s]["wall_seconds"]) for s in order)
    stages: dict[str, Any] = {}
    for name in order:
        report, wall = reports[name], float(reports[name]["wall_seconds"])
        phases = stage_phases(name, report)
        covered = sum(p["seconds"] for p in phases.values())
        step = steps.get(name, {})
        step_seconds = step["end"] - step["start"] if "start" in step and "end" in step else None
        stages[name] = {
            "wall_seconds": wall,
            "share": wall / total if total else 0.0,
            "step_seconds": round(step_seconds, 3) if step_seconds is not None else None,
            "outside_seconds": round(step_seconds - wall, 3) if step_seconds is not None else None,
            "worker_start_seconds": round(step["start"] - step["worker"], 3) if "worker" in step else None,
            "other_seconds": round(wall - covered, 4),
            "phases": phases,
        }
    return {
        "root": str(root),
        "profile": next((r.get("profile") for r in reports.values() if r.get("profile")), None),
        "stage_seconds": round(total, 3),
        "run": run_summary(events, set(reports)),
        "stages": stages,
    }


def run_summary(events: dict[str, Any], stage_names: set[str]) -> dict[str, Any]:
    """The run as the event log saw it: its wall time, its steps' (stages' and asset checks') summed time, and the
    gaps (Dagster's own work between steps, or time stages overlapped when run side by side: negative)."""
    steps = events["steps"]
    spans = {s: e["end"] - e["start"] for s, e in steps.items() if "start" in e and "end" in e}
    start, end = events["run_start"], events["run_end"]
    run_wall = end - start if start is not None and end is not None else None
    in_stages = sum(v for s, v in spans.items() if s in stage_names)
    in_checks = sum(v for s, v in spans.items() if s not in stage_names)
    first = min((e["start"] for e in steps.values() if "start" in e), default=None)
    return {
        "run_wall_seconds": round(run_wall, 3) if run_wall is not None else None,
        "stage_steps_seconds": round(in_stages, 3),
        "check_steps_seconds": round(in_checks, 3),
        "to_first_step_seconds": round(first - start, 3) if first is not None and start is not None else None,
        "between_steps_seconds": round(run_wall - in_stages - in_checks, 3) if run_wall is not None else None,
    }


def launch(root: Path, profile: str) -> dict[str, Any]:
    """`sparring run --profile PROFILE` in the copy at ``root`` (its own code), output to run.log; returns the
    process's figures: launch to the run's start, the run's end to exit, the whole process."""
    env = {**os.environ, "SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root / "src"), str(root), env.get("PYTHONPATH")) if p)
    env.pop("SPARRING_PROFILE", None)
    cli = Path(sys.executable).parent / "sparring"
    began = time.time()
    with open(root / "run.log", "w", encoding="utf-8") as log:
        done = subprocess.run([str(cli), "run", "--profile", profile], cwd=root, env=env, stdout=log, stderr=log)
    ended = time.time()
    if done.returncode != 0:
        tail = (root / "run.log").read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise SystemExit(f"sparring run failed ({done.returncode}) in {root}:\n" + "\n".join(tail))
    return {"launched": began, "exited": ended}


def process_figures(run: dict[str, Any], events: dict[str, Any]) -> dict[str, Any]:
    """Process start-up (launch to the Dagster run's start: interpreter, imports, job loading) and shut-down
    (the run's end to exit: dvc commit, the summary tables)."""
    start, end = events["run_start"], events["run_end"]
    return {
        "process_seconds": round(run["exited"] - run["launched"], 3),
        "startup_seconds": round(start - run["launched"], 3) if start is not None else None,
        "shutdown_seconds": round(run["exited"] - end, 3) if end is not None else None,
    }


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def print_table(profile: dict[str, Any]) -> None:
    """One line per stage (wall, share, the step's time outside the stage), one per phase (seconds, count, rate)."""
    print(f"main job profile: {profile['root']} (profile {profile['profile']})")
    print(f"{'stage / phase':34} {'seconds':>9} {'share':>7} {'count':>14} {'per_s':>11}")
    for name, s in profile["stages"].items():
        outside = f"  (+{fmt(s['outside_seconds'])} s outside the stage's function)" if s["outside_seconds"] else ""
        print(f"{name:34} {s['wall_seconds']:9.2f} {s['share']:7.1%}{outside}")
        for phase, p in s["phases"].items():
            unit = next((u for u in UNITS if u in p), None)
            count = f"{p[unit]} {unit[:3]}" if unit else "-"
            print(f"  {phase:32} {p['seconds']:9.2f} {'':7} {count:>14} {fmt(p['per_s'], 1):>11}")
        if s["phases"]:
            print(f"  {'other':32} {s['other_seconds']:9.2f}")
    print(f"{'stages, summed':34} {profile['stage_seconds']:9.2f} {1:7.1%}")
    for key, value in profile["run"].items():
        print(f"run: {key:29} {fmt(value):>9}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="a project folder with a finished run's records")
    parser.add_argument("--run", action="store_true", help="run the pipeline first, in a copy of the project")
    parser.add_argument("--profile", default="default", help="the profile --run runs")
    parser.add_argument("--seed", type=int, default=0, help="the seed --run writes into the copy's params.yaml")
    parser.add_argument("--workdir", type=Path, default=None, help="where --run copies the project (default: a tmp)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    root, process = args.root.resolve(), None
    if args.run:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sparring-profile-"))

        def edit(raw: dict[str, Any]) -> None:
            raw["seed"], raw["profile"] = args.seed, args.profile

        root = copy_project(ROOT, workdir.resolve() / "project", edit)
        process = launch(root, args.profile)
    events = dagster_events(run_db(root))
    profile = build_profile(root, events)
    if process is not None:
        profile["run"].update(process_figures(process, events))
    print_table(profile)
    print(json.dumps(profile))
    return profile


if __name__ == "__main__":
    main()
