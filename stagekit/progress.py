"""What a person sees of a running stage: the stage's start and end lines (:func:`say`), the progress lines its
code logs (:mod:`sparring.progress`), a heartbeat when that code is quiet, the run's estimate at the start and its
critical path at the end.

A stage runs in its own process under Dagster's multiprocess executor (or in the command's, one at a time); either
way its stderr is the terminal's, which is how :func:`say`'s lines reach the person. :func:`stage_progress` sends
the progress records the same way (with the stage's name), into the stage's log file, and to Dagster's run log
(``context.log``), which the UI shows and ``--verbose`` prints, in place of the terminal line.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from sparring.progress import LOGGER, format_duration, progress_interval
from stagekit.timings import wall_seconds

HEARTBEAT_SECONDS = 60.0  # a stage whose code logged nothing for this long still shows it is running


def say(message: str, stream: TextIO | None = None) -> None:
    """One line on the terminal (stderr, or ``stream``), whatever a stage's own output is redirected to."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=stream or sys.stderr, flush=True)


def previous_seconds(root: Path, stage: str, profile: str) -> float | None:
    """The wall time of the stage's last run on ``profile`` (reports/timings/<stage>.json), or None."""
    return wall_seconds(root, stage, profile)


class StageProgress(logging.Handler):
    """Publishes each progress record of one stage: on ``terminal`` (unless ``echo`` is off: --verbose, where
    Dagster's console logger prints its run log), in the stage's log file when stderr is redirected there, and
    in Dagster's run log. :meth:`beat` is the heartbeat's line, with an ETA from the stage's last run."""

    def __init__(
        self, stage: str, dagster_log: Any, terminal: TextIO, echo: bool, previous: float | None = None
    ) -> None:
        super().__init__(logging.INFO)
        self.stage, self.dagster_log, self.terminal, self.echo = stage, dagster_log, terminal, echo
        self.previous = previous
        self.started = self.last = time.monotonic()
        self.publishing = threading.Lock()  # the heartbeat and peer_rl's members publish from their threads

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.publish(record.getMessage())
        except Exception:  # a progress line must never fail the stage
            self.handleError(record)

    def publish(self, message: str) -> None:
        with self.publishing:
            self.last = time.monotonic()
            if self.echo:
                say(f"stage {self.stage}: {message}", self.terminal)
            if sys.stderr is not self.terminal:  # the stage's log file (scratch/logs/<stage>.log)
                say(message, sys.stderr)
        self.dagster_log.info(message)

    def quiet_for(self) -> float:
        return time.monotonic() - self.last

    def beat(self) -> str:
        """``running for 12m00s (its last run took 20m00s: about 8m00s left)``."""
        elapsed = time.monotonic() - self.started
        line = f"running for {format_duration(elapsed)}"
        if self.previous:
            left = self.previous - elapsed
            ahead = f"about {format_duration(left)} left" if left > 0 else "longer than then"
            line += f" (its last run took {format_duration(self.previous)}: {ahead})"
        return line


@contextmanager
def stage_progress(
    stage: str, dagster_log: Any, echo: bool, previous: float | None = None, heartbeat: float | None = None
) -> Iterator[StageProgress]:
    """While the stage runs, publish its ``sparring.progress`` records (:class:`StageProgress`) and, when they
    fall silent for ``heartbeat`` seconds (default :data:`HEARTBEAT_SECONDS`, or twice the progress interval if
    longer), a heartbeat line. Enter it before stderr is redirected to the stage's log: it keeps the terminal."""
    every = heartbeat if heartbeat is not None else max(HEARTBEAT_SECONDS, 2 * progress_interval())
    handler = StageProgress(stage, dagster_log, sys.stderr, echo, previous)
    was = (LOGGER.level, LOGGER.propagate)
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False  # a root handler somewhere (a library's basicConfig) would print it twice
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(min(every, 5.0)):
            if handler.quiet_for() >= every:
                handler.publish(handler.beat())

    beater = threading.Thread(target=beat, name=f"heartbeat-{stage}", daemon=True)
    beater.start()
    try:
        yield handler
    finally:
        stop.set()
        beater.join()
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(was[0])
        LOGGER.propagate = was[1]


def schedule(stages: Sequence[Any], seconds: Mapping[str, float], parallel: int) -> dict[str, tuple[float, float]]:
    """Each stage's (start, end) if it takes ``seconds[name]``: stages start as the multiprocess executor starts
    them, up to ``parallel`` at once, the ready stage of highest priority first (then declaration order)."""
    pending, running, finished, now = list(stages), [], set(), 0.0
    names, spans = {s.name for s in stages}, {}
    while pending or running:
        ready = [s for s in pending if all(u in finished or u not in names for u in s.upstream)]
        for s in sorted(ready, key=lambda s: -s.priority)[: max(1, parallel) - len(running)]:
            pending.remove(s)
            running.append((now + seconds.get(s.name, 0.0), s.name))
            spans[s.name] = (now, now + seconds.get(s.name, 0.0))
        if not running:  # an upstream cycle: nothing can start (never in a Dagster graph)
            break
        end, name = min(running)
        running.remove((end, name))
        now = end
        finished.add(name)
    return spans


def estimate_run(stages: Sequence[Any], seconds: dict[str, float], parallel: int) -> float:
    """The run's wall time if each stage takes ``seconds[name]``, scheduled as :func:`schedule` does."""
    return max((end for _, end in schedule(stages, seconds, parallel).values()), default=0.0)


class ScheduledPath(NamedTuple):
    stages: list[str]  # first to last, each started when the one before it ended
    waits: list[str]  # of them, those that started on a free slot, not on their last upstream stage
    seconds: float  # the scheduled run's end: the path's times, waits for a slot included


def scheduled_path(stages: Sequence[Any], seconds: Mapping[str, float], parallel: int) -> ScheduledPath:
    """The chain that set the scheduled run's end: from the stage that ends last, back through what each one
    waited for, its last upstream stage or, when all had ended, the stage whose end freed the slot it took.
    Unlike :func:`critical_path` (the longest chain by summed times, whatever ran at once), it counts the slot
    waits: a stage ready early that waited for ``parallel`` others to end."""
    spans = schedule(stages, {s.name: float(seconds.get(s.name, 0.0)) for s in stages}, parallel)
    if not spans:
        return ScheduledPath([], [], 0.0)
    upstream = {s.name: [u for u in s.upstream if u in spans] for s in stages}
    name = max(spans, key=lambda n: (spans[n][1], -list(spans).index(n)))
    chain, waits = [name], []
    while spans[name][0] > 1e-9:
        start = spans[name][0]
        before = [u for u in upstream.get(name, ()) if abs(spans[u][1] - start) < 1e-9]
        if not before:  # ready earlier: a slot freed by another stage's end let it start
            waits.append(name)
            before = [n for n in spans if n != name and abs(spans[n][1] - start) < 1e-9]
        if not before:
            break
        name = before[0]
        chain.append(name)
    return ScheduledPath(chain[::-1], waits[::-1], max(end for _, end in spans.values()))


def run_estimate(root: Path, stages: Sequence[Any], profile: str, parallel: int) -> str | None:
    """The run's estimate as one line, from the stages' last times on ``profile`` (None when none has one)."""
    times = {s.name: previous_seconds(root, s.name, profile) for s in stages}
    known = {name: t for name, t in times.items() if t is not None}
    if not known:
        return None
    total = format_duration(estimate_run(stages, known, parallel))
    missing = [name for name, t in times.items() if t is None]
    if missing:
        return f"at least {total} from the stages' last times (none yet for {', '.join(missing)})"
    return f"about {total} from the stages' last times (reports/timings/<stage>.json; start-up and checks not counted)"


class CriticalPath(NamedTuple):
    stages: list[str]  # first to last, each upstream of the next
    seconds: float


def upstream_closure(upstream: Mapping[str, Sequence[str]], name: str) -> set[str]:
    """Every stage ``name`` waits for, directly or through others (``upstream``: each stage's upstream names)."""
    seen, todo = set(), list(upstream.get(name, ()))
    while todo:
        stage = todo.pop()
        if stage not in seen:
            seen.add(stage)
            todo.extend(upstream.get(stage, ()))
    return seen


def critical_path(upstream: Mapping[str, Sequence[str]], seconds: Mapping[str, float]) -> CriticalPath:
    """The chain of stages whose times sum to the most along the graph, and that sum: the run's wall time if each
    stage started as its last upstream stage ended, however many ran at once. Only the stages in ``seconds`` count
    (an upstream stage without a time is left out of the chain)."""
    longest: dict[str, CriticalPath] = {}  # the longest chain ending at each stage

    def ending_at(name: str) -> CriticalPath:
        if name not in longest:
            before = [ending_at(u) for u in upstream.get(name, ()) if u in seconds]
            best = max(before, key=lambda path: path.seconds, default=CriticalPath([], 0.0))
            longest[name] = CriticalPath([*best.stages, name], best.seconds + float(seconds[name]))
        return longest[name]

    return max((ending_at(name) for name in seconds), key=lambda path: path.seconds, default=CriticalPath([], 0.0))
