"""Per-episode outcomes of held-out evaluation, compact enough for evaluate's report (reports/evaluate.json's
``episodes``), and read back for paired comparisons of agents on the same scenarios (:func:`gains`: paired
bootstrap intervals). Plain Python and numpy: a reader such as benchmarks/coevolution_acceptance.py imports no
model code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

OUTCOMES = ("strict_pass", "routed")  # the per-episode outcomes kept, each 0 or 1


def compact_episodes(episodes: Mapping[str, Mapping[str, Mapping[str, list]]]) -> dict[str, dict]:
    """``{agent: {opponent: {"scenario_id": [...], outcome: [0/1, ...]}}}`` (``HeldoutReport.episodes``) as the
    report keeps it: per opponent the scenario ids once, in play order (every agent plays the same list in the
    same order), and per outcome, agent and opponent a string of 0/1, one character per episode."""
    ids: dict[str, list[str]] = {}
    out: dict[str, dict] = {"scenario_ids": ids, **{k: {} for k in OUTCOMES}}
    for agent, by_opponent in episodes.items():
        for opponent, record in by_opponent.items():
            if ids.setdefault(opponent, list(record["scenario_id"])) != list(record["scenario_id"]):
                raise ValueError(f"{agent} played other scenarios against {opponent} than the agents before it")
            for k in OUTCOMES:
                out[k].setdefault(agent, {})[opponent] = "".join(str(int(v)) for v in record[k])
    return out


def episode_outcomes(
    compact: Mapping[str, Any], agent: str, opponent: str, outcome: str = "strict_pass"
) -> dict[tuple[str, int], int]:
    """``{(scenario_id, occurrence): 0 or 1}`` of ``agent`` against ``opponent`` (``coop``, ``coopsim``,
    ``camo``, ``advpool``) from :func:`compact_episodes`'s form; occurrence is 0 unless a scenario was played
    more than once. KeyError when that agent or opponent was not played."""
    flags = compact[outcome][agent][opponent]
    seen: dict[str, int] = {}
    keys = []
    for sid in compact["scenario_ids"][opponent]:
        keys.append((sid, seen.get(sid, 0)))
        seen[sid] = seen.get(sid, 0) + 1
    if len(keys) != len(flags):
        raise ValueError(f"{agent} vs {opponent}: {len(flags)} outcomes for {len(keys)} scenarios")
    return dict(zip(keys, (int(c) for c in flags), strict=True))


RESAMPLES = 2000  # bootstrap resamples of a paired interval
# metrics.json's `gains`: (later, earlier) agents, each against every opponent both played.
GAIN_PAIRS = (("da1", "da0"), ("final", "da0"), ("final", "da1"))
GAIN_OPPONENTS = ("advpool", "coop", "camo")


def paired_bootstrap(
    before: Sequence[float], after: Sequence[float], resamples: int = RESAMPLES, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """The ``level`` percentile interval of mean(after - before) over ``resamples`` resamples of the pairs."""
    import numpy as np

    d = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("paired_bootstrap needs two equally long, non-empty vectors")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(resamples, d.size))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def paired_gain(compact: Mapping[str, Any], later: str, earlier: str, opponent: str, seed: int = 0) -> list[float]:
    """``[mean, low, high]``: ``later``'s strict PASS minus ``earlier``'s against ``opponent``, scenario by scenario
    (both played the same scenarios with the same seed), with the paired bootstrap 95% interval."""
    a = episode_outcomes(compact, earlier, opponent)
    b = episode_outcomes(compact, later, opponent)
    keys = sorted(a)
    if sorted(b) != keys:
        raise ValueError(f"{later} and {earlier} played other scenarios against {opponent}")
    before, after = [a[k] for k in keys], [b[k] for k in keys]
    low, high = paired_bootstrap(before, after, seed=seed)
    return [(sum(after) - sum(before)) / len(keys), low, high]


def gains(compact: Mapping[str, Any], seed: int = 0) -> dict[str, dict[str, list[float]]]:
    """metrics.json's ``gains``: ``{"da1-da0": {"advpool": [mean, low, high], "coop": ..., "camo": ...},
    "final-da0": ..., "final-da1": ...}`` for the pairs and opponents that were played."""
    out: dict[str, dict[str, list[float]]] = {}
    played = compact.get("strict_pass", {})
    for later, earlier in GAIN_PAIRS:
        if later not in played or earlier not in played:
            continue
        shared = [o for o in GAIN_OPPONENTS if o in played[later] and o in played[earlier]]
        out[f"{later}-{earlier}"] = {o: paired_gain(compact, later, earlier, o, seed) for o in shared}
    return out
