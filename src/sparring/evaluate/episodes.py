"""Per-episode outcomes of held-out evaluation, compact enough for evaluate's report (reports/evaluate.json's
``episodes``), and read back for paired comparisons of agents on the same scenarios. Plain Python: a reader such
as benchmarks/coevolution_acceptance.py imports no model code."""

from __future__ import annotations

from collections.abc import Mapping
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
