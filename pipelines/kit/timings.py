"""Run timings, kept apart from what DVC tracks.

reports/<stage>.json is an output DVC tracks and a dependency of every stage downstream, so anything in it that
differs between two runs with the same inputs (the stage's wall time, its phases' seconds, a trainer's tokens/s)
made a rerun of one stage mark everything below it stale. Each stage's timings live instead in
reports/timings/<stage>.json, which no stage declares: the estimates, heartbeats, the critical path, the report's
wall-time table and benchmarks/main_job_profile.py read them there, and MLflow still logs them with the metrics.
`sparring run` alone writes the run's own timing, reports/timings/run.json (pipelines/cli.py's run_timing).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sparring.atomic import write_json
from sparring.catalog import REPORTS, stage_report

TIMINGS = f"{REPORTS}/timings"
RUN_TIMINGS = f"{TIMINGS}/run.json"  # `sparring run`'s: its wall time, every stage's, the scheduled critical path
# Keys that are times wherever they appear: the stage's own, its phase profile (times beside the counts they
# timed), a critical path, and a `timings` block a stage hands over whole.
TIMING_KEYS = frozenset({"wall_seconds", "seconds", "phases", "worker_phases", "critical_path", "timings"})
# sparring names a duration `<what>_seconds` and a rate or a duration in seconds `<what>_s` (tokens_per_s,
# oracle_fit_s): a measurement of this machine on this run, never of the data.
TIMING_SUFFIXES = ("_seconds", "_s")


def stage_timings(stage: str) -> str:
    """reports/timings/<stage>.json: the stage's wall time and every timing its report would have held."""
    return f"{TIMINGS}/{stage}.json"


def is_timing(key: str) -> bool:
    return key in TIMING_KEYS or key.endswith(TIMING_SUFFIXES)


def split_timings(value: Any) -> tuple[Any, Any]:
    """``value`` without its timings, and the timings alone in the same layout (None when it holds none): a dict
    loses every key :func:`is_timing` names, at any depth, lists keep their length (an entry without timings is
    ``{}`` on the timings side)."""
    if isinstance(value, dict):
        kept, timed = {}, {}
        for key, item in value.items():
            if is_timing(str(key)):
                timed[key] = item
                continue
            kept[key], inner = split_timings(item)
            if inner is not None:
                timed[key] = inner
        return kept, timed or None
    if isinstance(value, list):
        pairs = [split_timings(item) for item in value]
        if all(t is None for _, t in pairs):
            return value, None
        return [k for k, _ in pairs], [t if t is not None else {} for _, t in pairs]
    return value, None


def write_stage_timings(root: Path, stage: str, document: dict[str, Any]) -> None:
    write_json(document, root / stage_timings(stage))


def read_timings(root: Path, stage: str, profile: str) -> dict[str, Any] | None:
    """The stage's timings from its last run on ``profile``, or None. A report written before timings moved out
    (one with ``wall_seconds``) still counts, so an existing project keeps its estimates."""
    for path in (root / stage_timings(stage), root / stage_report(stage)):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and "wall_seconds" in document:
            return document if document.get("profile") == profile else None
    return None


def wall_seconds(root: Path, stage: str, profile: str) -> float | None:
    """The stage's wall time in its last run on ``profile`` (the time inside its function), or None."""
    seconds = (read_timings(root, stage, profile) or {}).get("wall_seconds")
    return float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) else None


def timed_stages(root: Path) -> list[str]:
    """The stages with a timings file (or a report from before timings moved out), by name."""
    names = {p.stem for p in (root / TIMINGS).glob("*.json")}
    for path in (root / REPORTS).glob("*.json"):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and document.get("stage") == path.stem and "wall_seconds" in document:
            names.add(path.stem)
    return sorted(names)


def run_order_times(root: Path, order: Iterable[str], profile: str, running: str | None = None) -> dict[str, Any]:
    """Every stage's wall time on ``profile`` in run order (``order``: the declared stages, then any other stage
    with times here): a float, None where none is known, or ``"running now"`` for ``running`` (the stage asking,
    whose time ends after it writes this)."""
    names = list(dict.fromkeys([*order, *timed_stages(root)]))
    return {name: "running now" if name == running else wall_seconds(root, name, profile) for name in names}
