"""Where a stage's time goes: named phases, each timed with ``time.perf_counter`` around the real work and counted
in the tokens or episodes it processed (never estimated). A stage puts :meth:`Phases.as_dict` in its report
(reports/<stage>.json's ``phases``); benchmarks/main_job_profile.py reads them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

UNITS = ("tokens", "episodes")  # what a phase counts, if anything


class Phases:
    """Named phases in the order they first ran: ``{name: {"seconds": s, "tokens" | "episodes": n}}``. A phase
    timed twice adds up (seconds and counts)."""

    def __init__(self) -> None:
        self._phases: dict[str, dict[str, float]] = {}

    def add(self, name: str, seconds: float, *, tokens: int | None = None, episodes: int | None = None) -> None:
        """Record ``seconds`` (and a count) measured elsewhere, such as a trainer's own timing."""
        entry = self._phases.setdefault(name, {"seconds": 0.0})
        entry["seconds"] = round(entry["seconds"] + seconds, 4)
        for unit, count in (("tokens", tokens), ("episodes", episodes)):
            if count is not None:
                entry[unit] = int(entry.get(unit, 0) + count)

    @contextmanager
    def time(self, name: str) -> Iterator[dict[str, int]]:
        """Time the block as phase ``name``; the block may set ``counts["tokens"]`` or ``counts["episodes"]``."""
        counts: dict[str, int] = {}
        start = time.perf_counter()
        try:
            yield counts
        finally:
            self.add(name, time.perf_counter() - start, **{u: counts[u] for u in UNITS if u in counts})

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {name: dict(entry) for name, entry in self._phases.items()}


def sft_phases(phases: Phases, result: Any, prefix: str = "") -> None:
    """An SFT result's phases (:class:`~sparring.train.sft.SFTResult`: its own ``phases``, or itself) as two
    phases each: ``<name>.tokenize`` (building the trainer: tokenizing the dataset, its tokens) and ``<name>``
    (``trainer.train()``: the tokens it trained on)."""
    parts = result.phases or {"sft": result}
    for name, part in parts.items():
        if part.prepare_seconds:
            phases.add(f"{prefix}{name}.tokenize", part.prepare_seconds, tokens=part.dataset_tokens)
        phases.add(f"{prefix}{name}", part.seconds, tokens=part.train_tokens)


# Keys that are times wherever they appear: the stage's own, its phase profile (times beside the counts they
# timed), a critical path, and a `timings` block a stage hands over whole.
TIMING_KEYS = frozenset({"wall_seconds", "seconds", "phases", "worker_phases", "critical_path", "timings"})
# sparring names a duration `<what>_seconds` and a rate or a duration in seconds `<what>_s` (tokens_per_s,
# oracle_fit_s): a measurement of this machine on this run, never of the data.
TIMING_SUFFIXES = ("_seconds", "_s")


def is_timing(key: str) -> bool:
    """Whether a report's ``key`` holds a time (:data:`TIMING_KEYS`, or a name ending in :data:`TIMING_SUFFIXES`)."""
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
