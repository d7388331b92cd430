"""Faults: `sparring run` killed (SIGKILL, its whole process group) during every stage, rerun until it completes.

Two copies of the project (:func:`stagekit.project.copy_project`, params set to ``--seed`` and ``--profile``)
under ``--workdir``: ``reference`` runs once, uninterrupted; ``faulted`` is killed and rerun. Which stage is
running is read from the Dagster run's event log (``.dagster/history/runs/<run id>.db``: STEP_START, STEP_SUCCESS),
polled every 20 ms, read-only (the log is in WAL mode, so reading never blocks the run's writes).

For each stage, in the reference run's order (``--kills-per-stage`` times), the faulted copy is run again and
killed once the stage has started, after a random share (seeded) of the stage's reference duration; a kill that
lands after the stage finished is retried with a shorter delay (up to ``--tries``) and counted for the stage it
did hit. ``--extra-kills`` more kills fall at uniform random times of a whole run (startup and the gaps between
stages included). Each launch after a kill is the rerun that must recover from it: every stage is materialized
again (Dagster semantics; finished cycles are reused by their fingerprint), so a stage a kill left broken fails
the next launch, which the benchmark reports (stage, error, what the kill left) instead of retrying past it.
Last, the faulted copy runs to completion and its reports/metrics.json is compared with the reference's, without
timing keys (any key containing ``seconds``, ``tokens_per_s``, ``wall``, ``fingerprint`` or ``resumed``).

Runs left open: after each kill, once its rerun has started its Dagster run (having closed what the kill left), no
Dagster run but the rerun's may be open (STARTED, ...) and no MLflow run but the rerun's RUNNING; after the last run
none at all. ``--interrupts`` more launches are stopped as a person would stop them, during the longest stages: Ctrl-C
(SIGINT to the process group), then ``kill`` (SIGTERM to the command alone); each must exit by itself with nothing
left open and its interrupted stage's MLflow run KILLED. Both are read from the stores (mlruns/mlflow.db,
.dagster/history/runs.db), read-only.

Prints the kills per stage, the reruns, the runs left open, ``metrics_equal`` and the differences; the last line is
JSON. Usage: ``python benchmarks/faults.py [--profile quick] [--seed 0] [--workdir DIR] [--kills-per-stage 1]``.

One file over 400 lines: a self-contained script (it runs from a copy of the project), its kills and their checks
together.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from stagekit.project import copy_project

ROOT = Path(__file__).resolve().parents[1]
TIMING_KEYS = ("seconds", "tokens_per_s", "wall", "fingerprint", "resumed")
POLL_S = 0.02
_ACTIVE: list[Launch] = []  # launches to kill if the benchmark itself is stopped


def prepare(dst: Path, seed: int, profile: str) -> Path:
    """A fresh copy of the project at ``dst`` with ``seed`` and ``profile`` written into its params.yaml."""

    def edit(raw: dict[str, Any]) -> None:
        raw["seed"], raw["profile"] = seed, profile

    return copy_project(ROOT, dst, edit)


class Launch:
    """One `sparring run` in a copy, in its own process group, its output appended to run.log."""

    def __init__(self, root: Path, profile: str, command: list[str] | None = None) -> None:
        """``command`` replaces `sparring run --profile PROFILE` (tests)."""
        self.root, self.t0 = root, time.monotonic()
        runs = root / ".dagster" / "history" / "runs"
        self.before = set(runs.glob("*.db")) if runs.is_dir() else set()
        env = {**os.environ, "SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster")}
        # The copy's own code, not the checkout's editable install.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root / "src"), str(root), env.get("PYTHONPATH")) if p)
        env.pop("SPARRING_PROFILE", None)
        cli = Path(sys.executable).parent / "sparring"
        with open(root / "run.log", "a", encoding="utf-8") as log:
            log.write(f"\n===== launch at {datetime.now().isoformat(timespec='seconds')} =====\n")
            log.flush()
            self.proc = subprocess.Popen(
                command or [str(cli), "run", "--profile", profile], cwd=root, env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self._db: Path | None = None
        _ACTIVE.append(self)

    def db(self) -> Path | None:
        """This launch's Dagster event log (the run database that was not there before it started)."""
        if self._db is None:
            runs = self.root / ".dagster" / "history" / "runs"
            found = runs.glob("*.db") if runs.is_dir() else []
            new = [p for p in found if p.name != "index.db" and p not in self.before]
            self._db = new[0] if len(new) == 1 else None
        return self._db

    def steps(self) -> dict[str, dict[str, float]]:
        """``{step: {"start": t, "end": t, "failed": t}}`` from the event log so far (empty while unreadable)."""
        db = self.db()
        if db is None:
            return {}
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
                rows = con.execute(
                    "select dagster_event_type, step_key, timestamp from event_logs where dagster_event_type in "
                    "('STEP_START', 'STEP_SUCCESS', 'STEP_FAILURE') order by id"
                ).fetchall()
        except sqlite3.Error:
            return {}
        out: dict[str, dict[str, float]] = {}
        names = {"STEP_START": "start", "STEP_SUCCESS": "end", "STEP_FAILURE": "failed"}
        for kind, step, stamp in rows:
            out.setdefault(step, {})[names[kind]] = datetime.fromisoformat(str(stamp)).timestamp()
        return out

    def running(self) -> list[str]:
        """Steps started and not finished."""
        return [s for s, e in self.steps().items() if "start" in e and "end" not in e and "failed" not in e]

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def interrupt(self, sig: int, group: bool, timeout: float = 180.0) -> int | None:
        """Send ``sig`` to the process group (Ctrl-C) or the command alone (``kill``); its exit code, or None if it
        did not exit within ``timeout`` (then it is killed)."""
        try:
            os.killpg(self.proc.pid, sig) if group else self.proc.send_signal(sig)
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def wait_for_start(self, step: str, timeout: float) -> bool:
        """Poll until ``step`` has started (True) or the run ended or timed out (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if "start" in self.steps().get(step, {}):
                return True
            time.sleep(POLL_S)
        return False


OPEN_DAGSTER = ("NOT_STARTED", "STARTING", "STARTED", "CANCELING")


def _read(db: Path, query: str) -> list[tuple]:
    if not db.is_file():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
        return con.execute(query).fetchall()


def open_runs(root: Path) -> dict[str, list[tuple[str, str]]]:
    """Runs the stores hold open: Dagster ``(run id, status)`` not over, MLflow ``(name, Dagster run id)`` RUNNING."""
    statuses = ", ".join(f"'{s}'" for s in OPEN_DAGSTER)
    dagster = _read(
        root / ".dagster" / "history" / "runs.db", f"select run_id, status from runs where status in ({statuses})"
    )
    mlflow = _read(
        root / "mlruns" / "mlflow.db",
        "select r.name, coalesce(t.value, '') from runs r left join tags t on t.run_uuid = r.run_uuid "
        "and t.key = 'dagster.run_id' where r.status = 'RUNNING'",
    )
    return {"dagster": [tuple(r) for r in dagster], "mlflow": [tuple(r) for r in mlflow]}


def others_open(root: Path, launch: Launch) -> dict[str, list[tuple[str, str]]]:
    """The open runs that are not ``launch``'s own (all of them when it has no Dagster run yet)."""
    own = launch.db().stem if launch.db() is not None else None
    found = open_runs(root)
    return {
        "dagster": [r for r in found["dagster"] if r[0] != own],
        "mlflow": [r for r in found["mlflow"] if r[1] != own],
    }


def mlflow_statuses(root: Path, dagster_run: str) -> dict[str, str]:
    """``{MLflow run name: status}`` of one Dagster run's MLflow runs."""
    rows = _read(
        root / "mlruns" / "mlflow.db",
        "select r.name, r.status from runs r join tags t on t.run_uuid = r.run_uuid "
        f"and t.key = 'dagster.run_id' where t.value = '{dagster_run}'",
    )
    return dict(rows)


def stage_of(step: str, stages: list[str]) -> str:
    """The stage a step belongs to: itself, or the asset an asset check step is named after (``ingest_...``)."""
    if step in stages:
        return step
    return max((s for s in stages if step.startswith(f"{s}_")), key=len, default=step)


def reference_run(root: Path, profile: str) -> tuple[list[str], dict[str, float], float]:
    """The uninterrupted run: (steps in the order they ran, each step's seconds, the whole run's seconds)."""
    launch = Launch(root, profile)
    rc = launch.proc.wait()
    wall = time.monotonic() - launch.t0
    if rc != 0:
        sys.exit(f"error: the reference run failed (exit {rc}); see {root / 'run.log'}")
    steps = launch.steps()
    order = sorted(steps, key=lambda s: steps[s]["start"])
    return order, {s: steps[s]["end"] - steps[s]["start"] for s in order}, wall


def leftovers(root: Path) -> list[str]:
    """Half-written siblings a kill left beside outputs (``.NAME.tmp-*``, ``.NAME.old-*``)."""
    found = []
    for top in ("data", "models", "reports"):
        for path in (root / top).rglob(".*") if (root / top).is_dir() else []:
            if ".tmp" in path.name or ".old-" in path.name:
                found.append(str(path.relative_to(root)))
    return sorted(found)


def failure(launch: Launch, rc: int) -> dict[str, Any]:
    """What a launch that failed on its own (no kill) says: the failed steps, the last error lines, leftovers."""
    steps = launch.steps()
    log = (launch.root / "run.log").read_text(encoding="utf-8", errors="replace").splitlines()
    errors = [line for line in log if "error" in line.lower()][-5:]
    return {
        "exit": rc,
        "failed_steps": sorted(s for s, e in steps.items() if "failed" in e),
        "running_steps": sorted(s for s, e in steps.items() if "start" in e and "end" not in e),
        "errors": errors,
        "log_tail": log[-15:],
        "leftovers": leftovers(launch.root),
    }


def strip_timing(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip_timing(v) for k, v in node.items() if not any(t in k for t in TIMING_KEYS)}
    if isinstance(node, list):
        return [strip_timing(v) for v in node]
    return node


def differences(a: Any, b: Any, path: str = "", limit: int = 20) -> list[str]:
    """Paths where two JSON documents differ (at most ``limit``)."""
    if a == b:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += differences(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}" if path else k, limit)
            if len(out) >= limit:
                return out[:limit]
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]", limit)][
            :limit
        ]
    return [f"{path}: {a!r} != {b!r}"[:300]]


def kill_schedule(root: Path, args: argparse.Namespace, stages: list[str], durations: dict[str, float], wall: float,
                  rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:  # fmt: skip
    """Kill the faulted copy during every stage (and at ``--extra-kills`` random times); returns (kills, failure)."""
    targets = [s for s in stages for _ in range(args.kills_per_stage)] + [None] * args.extra_kills
    kills: list[dict[str, Any]] = []
    for target in targets:
        for attempt in range(args.tries if target else 1):
            launch = Launch(root, args.profile)
            if target is None:
                delay = rng.uniform(0.0, wall)
                started = True
            else:
                started = launch.wait_for_start(target, timeout=3 * wall + 60)
                delay = rng.uniform(0.05, 0.9) * durations[target] * 0.5**attempt
            if not started:
                rc = launch.proc.wait()
                if rc != 0:  # it failed on its own before reaching the stage: the last kill broke something
                    return kills, {"after_kill": kills[-1] if kills else None, **failure(launch, rc)}
                print(f"  {target}: the run finished before the stage started; retrying", flush=True)
                continue
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and launch.proc.poll() is None:
                time.sleep(POLL_S / 2)
            running = launch.running()
            at = time.monotonic() - launch.t0
            if launch.proc.poll() is not None:
                rc = launch.proc.returncode
                if rc != 0:
                    return kills, {"after_kill": kills[-1] if kills else None, **failure(launch, rc)}
                print(f"  {target or 'random'}: the run completed before the kill; retrying", flush=True)
                continue
            # This launch reruns the last kill: once its Dagster run exists it has closed what that kill left open.
            stale = others_open(root, launch) if kills and launch.db() is not None else None
            launch.kill()
            hit = sorted({stage_of(s, stages) for s in running}) or ["(between stages)"]
            kills.append({"target": target, "hit": hit, "at_s": round(at, 2), "delay_s": round(delay, 3),
                          "leftovers": leftovers(root), "left_open_by_earlier": stale})  # fmt: skip
            print(f"  kill {len(kills)}: target {target or 'random'}, hit {', '.join(hit)} at {at:.1f} s", flush=True)
            if target is None or target in hit:
                break
    return kills, None


def interrupts(root: Path, args: argparse.Namespace, stages: list[str], durations: dict[str, float],
               rng: random.Random) -> list[dict[str, Any]]:  # fmt: skip
    """Stop ``--interrupts`` launches mid-stage (longest stages first) with SIGINT to the group, then SIGTERM to
    the command, alternately; what each left open and how its runs ended."""
    longest = sorted(stages, key=lambda s: -durations[s])
    ways = [("SIGINT", signal.SIGINT, True), ("SIGTERM", signal.SIGTERM, False)]
    out = []
    for i in range(args.interrupts):
        target, (name, sig, group) = longest[i % len(longest)], ways[i % 2]
        launch = Launch(root, args.profile)
        if not launch.wait_for_start(target, timeout=3 * sum(durations.values()) + 60):
            launch.proc.wait()
            continue
        time.sleep(rng.uniform(0.2, 0.6) * durations[target])
        running = launch.running()
        rc = launch.interrupt(sig, group)
        run_id = launch.db().stem if launch.db() is not None else ""
        status = _read(root / ".dagster" / "history" / "runs.db", f"select status from runs where run_id = '{run_id}'")
        entry = {"signal": name, "to": "group" if group else "command", "target": target, "running": running,
                 "exit": rc, "dagster_status": (status or [[None]])[0][0], "mlflow": mlflow_statuses(root, run_id),
                 "left_open": open_runs(root)}  # fmt: skip
        out.append(entry)
        print(f"  {name} to the {entry['to']} during {target}: exit {rc}, Dagster {entry['dagster_status']}, "
              f"left open {sum(map(len, entry['left_open'].values()))}", flush=True)  # fmt: skip
    return out


def interrupt_closed(entry: dict[str, Any]) -> bool:
    """An interrupted launch exited by itself, left nothing open, its Dagster run over and a stage's run KILLED."""
    over, left = entry["dagster_status"] in ("CANCELED", "FAILURE"), any(entry["left_open"].values())
    return entry["exit"] is not None and over and not left and "KILLED" in entry["mlflow"].values()


def finish(root: Path, profile: str, tries: int = 2) -> tuple[int, dict[str, Any] | None]:
    """Run the faulted copy to completion: (launches, failure of the last one or None)."""
    problem = None
    for n in range(1, tries + 1):
        launch = Launch(root, profile)
        rc = launch.proc.wait()
        if rc == 0:
            return n, None
        problem = failure(launch, rc)
    return tries, problem


def parse_args() -> argparse.Namespace:
    """The command line: the pipeline's profile and seed, the kills' seed and counts, the work folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--seed", type=int, default=0, help="the pipeline's seed (both copies)")
    parser.add_argument("--kill-seed", type=int, default=0, help="seeds the kill times")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new folder under the temp dir")
    parser.add_argument("--kills-per-stage", type=int, default=1)
    parser.add_argument("--extra-kills", type=int, default=2, help="kills at uniform random times of a whole run")
    parser.add_argument("--tries", type=int, default=4, help="attempts per stage when a kill lands after it")
    parser.add_argument("--interrupts", type=int, default=2, help="launches stopped by SIGINT / SIGTERM mid-stage")
    return parser.parse_args()


def main() -> None:
    """A reference run, the faulted copy killed during every stage and rerun to the end, then the comparison."""
    args = parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sparring-faults-"))
    t_start, rng = time.perf_counter(), random.Random(f"faults:{args.kill_seed}")

    reference = prepare(work / "reference", args.seed, args.profile)
    print(f"reference run in {reference} (log: {reference / 'run.log'})", flush=True)
    order, durations, wall = reference_run(reference, args.profile)
    stages = [s for s in order if (reference / "reports" / f"{s}.json").is_file()]  # assets; the rest are checks
    print(f"  {wall:.0f} s; steps: " + ", ".join(f"{s} {durations[s]:.2f} s" for s in order), flush=True)

    faulted = prepare(work / "faulted", args.seed, args.profile)
    print(f"faulted runs in {faulted} (log: {faulted / 'run.log'})", flush=True)
    try:
        kills, problem = kill_schedule(faulted, args, stages, durations, wall, rng)
        stopped = interrupts(faulted, args, stages, durations, rng) if problem is None else []
        if problem is None:
            _, problem = finish(faulted, args.profile)
    finally:
        for launch in _ACTIVE:
            if launch.proc.poll() is None:
                launch.kill()
    launches = len(_ACTIVE) - 1  # the faulted copy's: every kill's rerun, retries and the final run
    per_stage = {s: sum(s in k["hit"] for k in kills) for s in [*stages, "(between stages)"]}
    result: dict[str, Any] = {"profile": args.profile, "seed": args.seed, "kills": len(kills), "launches": launches}
    result["kills_by_stage"] = per_stage
    result["every_stage_interrupted"] = all(per_stage[s] > 0 for s in stages)
    if problem is None:
        ref = strip_timing(json.loads((reference / "reports" / "metrics.json").read_text(encoding="utf-8")))
        got = strip_timing(json.loads((faulted / "reports" / "metrics.json").read_text(encoding="utf-8")))
        result["metrics_equal"], result["differences"] = ref == got, differences(ref, got)
        resumed = [s for s in stages if json.loads((faulted / "reports" / f"{s}.json").read_text()).get("resumed")]
        result["final_run_resumed"] = resumed
        result["leftovers_after_finish"] = leftovers(faulted)
    else:
        result["metrics_equal"], result["unrecoverable"] = False, problem
    result["kills_survived_by_stage"] = per_stage if problem is None else {}
    stale = [k for k in kills if k["left_open_by_earlier"] and any(k["left_open_by_earlier"].values())]
    result["reruns_checked"] = sum(k["left_open_by_earlier"] is not None for k in kills)
    result["reruns_left_earlier_runs_open"] = len(stale)
    result["interrupts"], result["left_open_at_end"] = stopped, open_runs(faulted)
    result["runs_closed"] = (
        not stale and all(map(interrupt_closed, stopped)) and not any(result["left_open_at_end"].values())
    )
    result["kill_log"], result["wall_s"] = kills, round(time.perf_counter() - t_start, 1)

    print(f"\n{'stage':20s}{'reference s':>12s}{'kills survived':>16s}")
    for s in [*stages, "(between stages)"]:
        ref_s = f"{durations[s]:.2f}" if s in durations else "-"
        print(f"{s:20s}{ref_s:>12s}{per_stage[s] if problem is None else 0:>16d}")
    print(f"kills {len(kills)}, launches {launches}, every stage interrupted: {result['every_stage_interrupted']}")
    if problem is not None:
        print(f"UNRECOVERABLE after kill {json.dumps(problem.get('after_kill'))}:\n" + "\n".join(problem["log_tail"]))
    print(f"runs closed: {result['runs_closed']} ({result['reruns_checked']} reruns checked, "
          f"{len(stale)} left an earlier run open; {len(stopped)} interrupts; open at the end: "
          f"{result['left_open_at_end']})")  # fmt: skip
    print(f"metrics_equal: {result['metrics_equal']}" + "".join(f"\n  {d}" for d in result.get("differences", [])))
    print(json.dumps(result))
    sys.exit(0 if result["metrics_equal"] and result["runs_closed"] else 1)


if __name__ == "__main__":
    main()
