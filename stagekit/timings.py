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
from sparring.timing import split_timings  # noqa: F401  (what a time is lives with the phases: drivers split theirs)

TIMINGS = f"{REPORTS}/timings"
RUN_TIMINGS = f"{TIMINGS}/run.json"  # `sparring run`'s: its wall time, every stage's, the scheduled critical path


def stage_timings(stage: str) -> str:
    """reports/timings/<stage>.json: the stage's wall time and every timing its report would have held."""
    return f"{TIMINGS}/{stage}.json"


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
