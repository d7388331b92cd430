"""How far a long task is: throttled progress lines (done/total, share, the latest loss or reward, rate, ETA).

The library only logs them, as INFO records of the ``sparring.progress`` logger (:data:`LOGGER`); whoever runs it
decides where they go. Without a handler nothing shows (Python's last-resort handler prints warnings only); the
pipeline sends them to the terminal and to Dagster's run log (stagekit/stages.py), and evaluate's worker
processes forward theirs to the stage's process (:func:`forward_to`, :func:`relay_from`).

:class:`ProgressMeter` counts one task and writes a line at most every :func:`progress_interval` seconds
(``SPARRING_PROGRESS_SECONDS``, default 30), so a stage shows a line about every half minute, never a flood;
:class:`TrainerProgress` is the transformers ``TrainerCallback`` that drives one from an SFT or GRPO trainer.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

LOGGER = logging.getLogger("sparring.progress")
INTERVAL_ENV = "SPARRING_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 30.0  # at most one line per task this often: a line a minute at least, without a flood
# What a trainer's log shows of its progress, in this order (GRPO logs its mean reward as "reward").
TRAINER_FIGURES = ("loss", "reward")


def progress_interval() -> float:
    """Seconds between two lines of one task: ``$SPARRING_PROGRESS_SECONDS`` (0: every update), else 30."""
    raw = os.environ.get(INTERVAL_ENV, "")
    try:
        return max(0.0, float(raw)) if raw.strip() else DEFAULT_INTERVAL
    except ValueError:
        return DEFAULT_INTERVAL


def format_duration(seconds: float) -> str:
    """``42s``, ``9m05s``, ``1h02m``: a duration as a person reads it."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class ProgressMeter:
    """One counted task (``total`` of ``unit``) that logs ``label: 120/600 steps (20%), <detail>, 1.9 steps/s,
    ETA 4m12s`` when :meth:`update` is called ``interval`` seconds or more after the last line (or the start).
    :meth:`finish` closes a task that showed a line with its total time; a short task stays silent."""

    def __init__(
        self,
        label: str,
        total: int,
        unit: str = "steps",
        *,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger = LOGGER,
    ) -> None:
        self.label, self.total, self.unit, self.logger, self.clock = label, max(0, total), unit, logger, clock
        self.interval = progress_interval() if interval is None else interval
        self.started = self.last_line = clock()
        self.done, self.lines = 0, 0

    def update(self, done: int, detail: str = "") -> str | None:
        """Record ``done`` units so far; log and return a line when one is due (else None)."""
        self.done = done
        if self.clock() - self.last_line < self.interval:
            return None
        return self._emit(self.line(detail))

    def advance(self, count: int, detail: str = "") -> str | None:
        """:meth:`update` with ``count`` more units done."""
        return self.update(self.done + count, detail)

    def finish(self, detail: str = "") -> str | None:
        """A closing line (``done in 4m12s``), only when the task already showed one: what was quiet stays so."""
        if not self.lines:
            return None
        elapsed = format_duration(self.clock() - self.started)
        extra = f", {detail}" if detail else ""
        return self._emit(f"{self.label}: {self.done:,}/{self.total:,} {self.unit}{extra}, done in {elapsed}")

    def line(self, detail: str = "") -> str:
        """The line for the state so far: count, share, ``detail``, rate and the ETA at that rate."""
        elapsed = self.clock() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        parts = [f"{self.label}: {self.done:,}/{self.total:,} {self.unit}{share}"]
        if detail:
            parts.append(detail)
        if rate > 0:
            parts.append(f"{rate:.3g} {self.unit}/s" if rate >= 1 else f"{1 / rate:.3g} s per {self.unit[:-1]}")
            parts.append(f"ETA {format_duration(max(0, self.total - self.done) / rate)}")
        return ", ".join(parts)

    def _emit(self, line: str) -> str:
        self.last_line, self.lines = self.clock(), self.lines + 1
        self.logger.info(line)
        return line


def trainer_figures(logs: Mapping[str, Any]) -> dict[str, float]:
    """The figures a progress line shows from one trainer log entry (:data:`TRAINER_FIGURES`)."""
    return {k: float(logs[k]) for k in TRAINER_FIGURES if isinstance(logs.get(k), int | float)}


def _trainer_callback_base() -> type:
    from transformers import TrainerCallback  # late: importing sparring.progress must not import transformers

    return TrainerCallback


def trainer_progress(label: str) -> Any:
    """A transformers ``TrainerCallback`` that shows the trainer's step out of ``max_steps`` with its latest loss
    (SFT) or mean reward (GRPO) through a :class:`ProgressMeter` labelled ``label``."""

    class TrainerProgress(_trainer_callback_base()):  # type: ignore[misc]
        def __init__(self) -> None:
            self.meter: ProgressMeter | None = None
            self.figures: dict[str, float] = {}

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.meter = ProgressMeter(label, int(state.max_steps or 0))

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            self.figures.update(trainer_figures(logs or {}))

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.meter is not None:
                self.meter.update(int(state.global_step), self.detail())

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.meter is not None:
                self.meter.finish(self.detail())

        def detail(self) -> str:
            return ", ".join(f"{k} {v:.4g}" for k, v in self.figures.items())

    return TrainerProgress()


# ------------------------------------------------------------------------------------------ across processes


def forward_to(queue: Any) -> None:
    """In a worker process: send this process's progress records to ``queue`` (a multiprocessing queue), where
    the parent's :func:`relay_from` hands them to its own handlers. Meant as a pool's ``initializer``."""
    LOGGER.handlers[:] = [logging.handlers.QueueHandler(queue)]
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False  # the worker's root logger would print them a second time


class _Relay(logging.Handler):
    """Hands a record from another process to this process's logger of the same name (and so its handlers)."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


@contextmanager
def relay_from(queue: Any) -> Iterator[None]:
    """While the block runs, log here what worker processes put on ``queue`` through :func:`forward_to`."""
    listener = logging.handlers.QueueListener(queue, _Relay())
    listener.start()
    try:
        yield
    finally:
        listener.stop()
