"""Per-episode outcomes of held-out evaluation, compact enough for evaluate's report (reports/evaluate.json's
``episodes``), and read back for paired comparisons of agents on the same scenarios and customer draws
(:func:`gains`: intervals that resample scenarios with their draws, :mod:`sparring.evaluate.intervals`). Plain
Python, numpy and scipy: a reader such as benchmarks/coevolution_acceptance.py imports no model code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sparring.evaluate.intervals import paired_difference

OUTCOMES = ("strict_pass", "routed")  # the per-episode outcomes kept, each 0 or 1


def compact_episodes(episodes: Mapping[str, Mapping[str, Mapping[str, list]]]) -> dict[str, dict]:
    """``{agent: {opponent: {"scenario_id": [...], "draw": [...], outcome: [0/1, ...]}}}``
    (``HeldoutReport.episodes``) as the report keeps it: per opponent the scenario ids and draws once, in play order
    (every agent plays the same list in the same order, draw by draw), and per outcome, agent and opponent a string
    of 0/1, one character per episode. A player of fewer draws (the expert: ``evaluate.expert_draws``) holds a
    prefix of the list: its first draws."""
    ids: dict[str, list[str]] = {}
    drawn: dict[str, list[int]] = {}
    out: dict[str, dict] = {"scenario_ids": ids, "draws": drawn, **{k: {} for k in OUTCOMES}}
    for agent, by_opponent in episodes.items():
        for opponent, record in by_opponent.items():
            mine = list(record["scenario_id"])
            draws = list(record["draw"]) if "draw" in record else _occurrences(mine)
            have, have_draws = ids.setdefault(opponent, mine), drawn.setdefault(opponent, draws)
            short, long = sorted(((mine, draws), (have, have_draws)), key=lambda pair: len(pair[0]))
            if long[0][: len(short[0])] != short[0] or long[1][: len(short[1])] != short[1]:
                raise ValueError(f"{agent} played other scenarios against {opponent} than the agents before it")
            ids[opponent], drawn[opponent] = long
            for k in OUTCOMES:
                out[k].setdefault(agent, {})[opponent] = "".join(str(int(v)) for v in record[k])
    return out


def _occurrences(scenario_ids: Sequence[str]) -> list[int]:
    """A record from before draws: each scenario's repeats, in play order, count as its draws 0, 1, ..."""
    seen: dict[str, int] = {}
    out = []
    for sid in scenario_ids:
        out.append(seen.get(sid, 0))
        seen[sid] = out[-1] + 1
    return out


def episode_outcomes(
    compact: Mapping[str, Any], agent: str, opponent: str, outcome: str = "strict_pass"
) -> dict[tuple[str, int], int]:
    """``{(scenario_id, draw): 0 or 1}`` of ``agent`` against ``opponent`` (``coop``, ``coopsim``, ``camo``,
    ``ref``, ``advpool``) from :func:`compact_episodes`'s form (a player of fewer draws: its first ones). A record
    from before draws (no ``draws``) counts a scenario's repeats as its draws 0, 1, ... KeyError when that agent or
    opponent was not played."""
    flags = compact[outcome][agent][opponent]
    ids = compact["scenario_ids"][opponent]
    draws = (compact.get("draws") or {}).get(opponent) or _occurrences(ids)
    keys = list(zip(ids, draws, strict=True))
    if len(flags) > len(keys):
        raise ValueError(f"{agent} vs {opponent}: {len(flags)} outcomes for {len(keys)} scenarios")
    keys = keys[: len(flags)]  # a player of fewer draws played the first ones
    return dict(zip(keys, (int(c) for c in flags), strict=True))


def outcome_matrix(
    outcomes: Mapping[tuple[str, int], int],
    scenarios: Sequence[str] | None = None,
    draws: Sequence[int] | None = None,
) -> Any:
    """``{(scenario_id, draw): 0/1}`` as an (n_scenarios, K) array, scenarios in ``scenarios``' order (default:
    sorted), ``draws`` in order (default: every draw, ascending; refused unless every scenario holds the same)."""
    import numpy as np

    by: dict[str, dict[int, int]] = {}
    for (sid, draw), v in outcomes.items():
        by.setdefault(sid, {})[draw] = v
    order = list(scenarios) if scenarios is not None else sorted(by)
    if draws is not None:
        return np.array([[by[sid][d] for d in draws] for sid in order], dtype=float)
    draws = sorted(by[order[0]]) if order else []
    if any(sorted(by.get(sid, {})) != draws for sid in order):
        raise ValueError("every scenario must hold the same draws")
    return np.array([[by[sid][d] for d in draws] for sid in order], dtype=float)


RESAMPLES = 2000  # bootstrap resamples of a paired interval
# metrics.json's `gains`: (later, earlier) agents, each against every opponent both played.
GAIN_PAIRS = (("da1", "da0"), ("final", "da0"), ("final", "da1"), ("peer_final", "final"))
GAIN_OPPONENTS = ("ref", "advpool", "coop", "camo")


def paired_bootstrap(
    before: Sequence[float], after: Sequence[float], resamples: int = RESAMPLES, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """The ``level`` interval of mean(after - before) over pairs: :func:`~sparring.evaluate.intervals.
    paired_difference` with one draw per item (each pair its own cluster)."""
    if len(before) == 0 or len(before) != len(after):
        raise ValueError("paired_bootstrap needs two equally long, non-empty vectors")
    _, low, high = paired_difference(before, after, resamples=resamples, seed=seed, level=level)
    return low, high


def paired_gain(compact: Mapping[str, Any], later: str, earlier: str, opponent: str, seed: int = 0) -> list[float]:
    """``[mean, low, high]``: ``later``'s strict PASS minus ``earlier``'s against ``opponent`` over (scenario, draw)
    (both met the same customer draws), with the 95% interval that resamples scenarios, draws kept together."""
    a = episode_outcomes(compact, earlier, opponent)
    b = episode_outcomes(compact, later, opponent)
    if sorted(b) != sorted(a):
        raise ValueError(f"{later} and {earlier} played other scenarios against {opponent}")
    return paired_difference(outcome_matrix(a), outcome_matrix(b), seed=seed)


def gains(compact: Mapping[str, Any], seed: int = 0) -> dict[str, dict[str, list[float]]]:
    """metrics.json's ``gains``: ``{"da1-da0": {"ref": [mean, low, high], "advpool": ..., "coop": ..., "camo": ...},
    "final-da0": ..., "final-da1": ...}`` for the pairs and opponents that were played."""
    out: dict[str, dict[str, list[float]]] = {}
    played = compact.get("strict_pass", {})
    for later, earlier in GAIN_PAIRS:
        if later not in played or earlier not in played:
            continue
        shared = [o for o in GAIN_OPPONENTS if o in played[later] and o in played[earlier]]
        out[f"{later}-{earlier}"] = {o: paired_gain(compact, later, earlier, o, seed) for o in shared}
    return out
