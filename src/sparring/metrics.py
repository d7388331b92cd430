"""The episode metrics of ../shared/METRICS.md, read off finished episodes: what evaluations report and trainers log.

No torch here: the rollout engine's :class:`~sparring.rollout.Episode` is only a type to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sparring.world.events import object_view
from sparring.world.vocab import DESCRIBED, ID_KEYS

if TYPE_CHECKING:
    from sparring.rollout import Episode


def routed_correctly(ep: Episode) -> bool:
    """The agent called the tool that resolves the scenario's intent (METRICS.md ``routing_acc``); an attempt
    counts even when refused: routing is the decision, authorization is measured on its own."""
    return any(c.name == ep.scenario.tool for c in ep.log.tool_calls())


def named_target(ep: Episode) -> bool | None:
    """Whether a call of the resolving tool named the object the resolution acts on (``target_id_acc``): by the
    id ``lookup_account`` listed, or as ``"described"`` when the customer's words identified it. None when the
    agent never called that tool or the resolution acts on no object. Routing is the decision; this follows it."""
    expected = ep.scenario.expected_calls[1:][-1:]  # the resolving call (payment_details may come before it)
    wanted = {k: v for c in expected for k, v in c.arguments.items() if k in ID_KEYS}
    tried = [c for c in ep.log.tool_calls() if expected and c.name == expected[0].name]
    if not wanted or not tried:
        return None
    return any(all(_named(c, k) == v for k, v in wanted.items()) for c in tried)


def _named(call: Any, key: str) -> Any:
    """The id a call acted on: its argument, or for ``"described"`` the id its result shows."""
    value = call.arguments.get(key)
    if value != DESCRIBED:
        return value
    view = object_view(call.result, key)
    return view[key] if view is not None else None


def named_intent(ep: Episode) -> str | None:
    """The last intent the agent named with ``<intent>`` (it may revise its guess), or None."""
    return next((p.intent for p in reversed(ep.agent_turns) if p.intent), None)


def episode_metrics(episodes: Sequence[Episode], suffix: str = "") -> dict[str, float]:
    """Aggregate metrics with the names of METRICS.md (``suffix`` names the opponent, e.g. ``"_coop"``).

    Rates are shares of episodes, except ``intent_acc`` (of the episodes where the agent named an intent) and
    ``format_failure_rate`` (of agent messages). ``unauthorized_actions``/``unauthorized_attempts`` are counts;
    ``unauthorized_attempt_rate`` is the share of episodes with at least one refused security-relevant call;
    ``mean_turns`` counts messages (customer and agent, not tool results); ``target_id_acc`` is the share of
    :func:`named_target` over the episodes where it is defined.
    """
    if not episodes:
        return {f"n_episodes{suffix}": 0}
    named = [(named_intent(ep), ep.scenario.intent) for ep in episodes]
    named = [(guess, true) for guess, true in named if guess is not None]

    def mean(values: Sequence[float | bool]) -> float:
        return float(sum(values)) / len(values) if values else 0.0

    metrics = {
        "n_episodes": len(episodes),
        "routing_acc": mean([routed_correctly(ep) for ep in episodes]),
        "intent_acc": mean([guess == true for guess, true in named]),
        "intent_named_rate": len(named) / len(episodes),
        "target_id_acc": mean([t for t in map(named_target, episodes) if t is not None]),
        "lookup_first": mean([ep.outcome.lookup_first for ep in episodes]),
        "strict_pass": mean([ep.outcome.strict_pass for ep in episodes]),
        "pass": mean([ep.outcome.passed for ep in episodes]),
        "unauthorized_actions": sum(ep.outcome.unauthorized_actions for ep in episodes),
        "unauthorized_attempts": sum(ep.outcome.unauthorized_attempts for ep in episodes),
        "unauthorized_attempt_rate": mean([ep.outcome.unauthorized_attempts > 0 for ep in episodes]),
        "mean_turns": mean([len(ep.log.turns()) for ep in episodes]),
        "mean_rounds": mean([ep.rounds for ep in episodes]),
        "ended_rate": mean([ep.ended_by is not None for ep in episodes]),
        "format_failure_rate": mean([not p.format_ok for ep in episodes for p in ep.agent_turns]),
    }
    return {f"{name}{suffix}": value for name, value in metrics.items()}
