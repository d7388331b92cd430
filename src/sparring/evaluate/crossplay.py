"""What `evaluate` computes from held-out episodes beyond their averages: cross-play cells with 95% intervals,
τ-bench's pass^k, the failure kinds, and each agent's share of the expert's ceiling.

- Cross-play: every agent against every opponent on the same held-out scenarios (strict PASS, with a 95% interval
  that resamples scenarios and keeps each scenario's draws together: a cell's episodes are not independent).
- pass^k (τ-bench, Yao et al. 2024): over n sampled runs per task with c successes, pass^k = mean over tasks of
  C(c, k) / C(n, k): the chance that k runs drawn without replacement all succeed. pass^1 is the mean success.
- Failure kinds (METRICS.md ``failure_<kind>_<opponent>``), one per failed episode, first that applies: ``left``
  (the customer gave up before the request was carried out, :mod:`sparring.agents.leaving`), ``denied_own``
  (the resolving tool never called after the customer said no to a restatement of its own request: the customer's
  failure, not the agent's, :func:`~sparring.world.answers.confirmation_answers`), ``format``
  (the resolving tool never called and an agent message was malformed), ``misroute`` (never called: another
  intent's tool chosen, or the session ended without one), ``turn_cap`` (never called, nor any other intent's tool,
  when the turns ran out: the agent was still asking or looking up, which is no wrong routing), ``undescribed``
  (called, or the ``payment_details`` read it needs called, and refused because the customer never described the
  object; checked before ``misroute`` and ``turn_cap``), ``refused`` (called and refused otherwise), ``no_end``
  (resolved but the conversation did not end cleanly), ``other`` (resolved and ended, but no lookup first or the
  world's state differs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sparring.evaluate.intervals import cluster_bootstrap
from sparring.metrics import routed_correctly
from sparring.rollout import Episode
from sparring.world.answers import confirmation_answers
from sparring.world.session import CUSTOMER_LEFT
from sparring.world.taxonomy import load_taxonomy

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval
FAILURE_KINDS = ("left", "denied_own", "format", "misroute", "turn_cap", "undescribed", "refused", "no_end", "other")
UNDESCRIBED = "has not described"  # the world's refusal when the customer's words identify no object


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a share ``successes / n`` (n = 0: the whole [0, 1])."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_hat_k(successes: Sequence[int], n: int, k: int) -> float:
    """τ-bench's pass^k: mean over tasks of C(c, k) / C(n, k), ``successes`` holding c per task out of ``n`` runs."""
    if not 1 <= k <= n:
        raise ValueError(f"pass^k needs 1 <= k <= n, got k={k}, n={n}")
    if any(not 0 <= c <= n for c in successes):
        raise ValueError(f"every task's successes must lie in [0, {n}]")
    if not successes:
        return 0.0
    return sum(math.comb(c, k) for c in successes) / (math.comb(n, k) * len(successes))


def pass_hat_metrics(runs: Sequence[Sequence[Episode]], suffix: str) -> dict[str, float]:
    """``pass_hat_<k><suffix>`` for k = 1..n over ``runs`` (n sampled runs, each the same scenarios in order)."""
    if not runs:
        return {}
    n, tasks = len(runs), len(runs[0])
    if any(len(run) != tasks for run in runs):
        raise ValueError("every sampled run must play the same scenarios")
    successes = [sum(run[t].outcome.strict_pass for run in runs) for t in range(tasks)]
    return {f"pass_hat_{k}{suffix}": pass_hat_k(successes, n, k) for k in range(1, n + 1)}


def failure_kind(episode: Episode) -> str | None:
    """The kind of an episode's failure (module docstring), or None when it passed strictly."""
    if episode.outcome.strict_pass:
        return None
    if episode.ended_by == CUSTOMER_LEFT:
        return "left"
    calls = episode.log.tool_calls()
    if not routed_correctly(episode):
        if confirmation_answers(episode)["own_denied"]:
            return "denied_own"
        if any(not p.format_ok for p in episode.agent_turns):
            return "format"
        # a dispute or transfer case must read the payment first: an undescribed payment stops it at the read
        reads = [c for c in calls if c.name == "payment_details"]
        if any(UNDESCRIBED in (c.error or "") for c in reads):
            return "undescribed"
        # another intent's tool, other than the calls this case expects (lookup_account verifies every case)
        wrong = {i.tool for i in load_taxonomy().intents.values()} - {c.name for c in episode.scenario.expected_calls}
        if episode.ended_by is None and not any(c.name in wrong for c in calls):  # None: max_turns cut it off
            return "turn_cap"
        return "misroute"
    resolving = [c for c in calls if c.name == episode.scenario.tool]
    if not any(c.ok for c in resolving):
        return "undescribed" if any(UNDESCRIBED in (c.error or "") for c in resolving) else "refused"
    if not episode.outcome.clean_end:
        return "no_end"
    return "other"


def failure_rates(episodes: Sequence[Episode], suffix: str) -> dict[str, float]:
    """``failure_<kind><suffix>``: the share of ``episodes`` failed by each kind (they sum to 1 − strict PASS)."""
    kinds = [failure_kind(ep) for ep in episodes]
    n = max(1, len(episodes))
    return {f"failure_{kind}{suffix}": sum(k == kind for k in kinds) / n for kind in FAILURE_KINDS}


def cross_play_cell(episodes: Sequence[Episode], seed: int = 0) -> dict[str, float]:
    """One cross-play cell: strict PASS over ``episodes`` with its 95% interval and n (episodes), resampling
    scenarios with each scenario's draws kept together (:func:`~sparring.evaluate.intervals.cluster_bootstrap`)."""
    by_scenario: dict[str, list[int]] = {}
    for ep in episodes:
        by_scenario.setdefault(ep.scenario.scenario_id, []).append(int(bool(ep.outcome.strict_pass)))
    if not by_scenario:
        return {"strict_pass": 0.0, "ci_low": 0.0, "ci_high": 1.0, "n": 0}
    k = min(len(r) for r in by_scenario.values())  # every scenario played the same draws
    mean, low, high = cluster_bootstrap([r[:k] for r in by_scenario.values()], seed=seed)
    return {"strict_pass": mean, "ci_low": low, "ci_high": high, "n": len(episodes)}


def cross_play_matrix(cells: dict[str, dict[str, dict[str, float]]]) -> dict[str, list]:
    """``{agent: {opponent: cell}}`` as METRICS.md's ``cross_play``: agents, opponents and row-major matrices."""
    agents = list(cells)
    opponents = list(dict.fromkeys(o for row in cells.values() for o in row))

    def grid(key: str) -> list[list[float | None]]:
        return [[cells[a][o][key] if o in cells[a] else None for o in opponents] for a in agents]

    return {
        "agents": agents,
        "opponents": opponents,
        "strict_pass": grid("strict_pass"),
        "ci_low": grid("ci_low"),
        "ci_high": grid("ci_high"),
        "n": grid("n"),
    }


def share_of_ceiling(agent: dict[str, float], ceiling: dict[str, float]) -> dict[str, float]:
    """``share_of_ceiling_<opponent>``: the agent's strict PASS over the expert's, per opponent (ceiling 0: skipped)."""
    shares = {}
    for key, best in ceiling.items():
        if key.startswith("strict_pass_") and isinstance(best, float | int) and best > 0 and key in agent:
            shares[f"share_of_ceiling_{key.removeprefix('strict_pass_')}"] = agent[key] / best
    return shares
