"""Evaluate an agent policy: full episodes against each opponent, and single-turn routing of utterances.

Episode metrics carry METRICS.md names with the opponent as suffix (``routing_acc_coop``,
``strict_pass_camo``): the same agent is only comparable across checkpoints against the same opponent, and
the gap between opponents is what co-evolution is meant to close. Intent accuracy reads the agent's first reply
to a lone utterance (:func:`~sparring.rollout.route_utterances`, what ``sparring route`` shows) on held-out
utterances, without the cost (or the world noise) of whole episodes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer
from sparring.lm.policies import Policy
from sparring.metrics import episode_metrics
from sparring.rollout import route_utterances, run_episodes
from sparring.world.scenarios import Scenario, as_cooperative


def scripted_opponents(seed: int = 0) -> dict[str, Policy]:
    """The reference opponents: ``coop`` (replaced by the trained simulator once there is one) and ``camo``."""
    return {"coop": CooperativeCustomer(), "camo": CamouflagingCustomer(seed=seed)}


def evaluate_agent(
    agent_policy: Policy,
    heldout_scenarios: Sequence[Scenario],
    customers: Mapping[str, Policy],
    seed: int = 0,
    max_turns: int = 6,
    *,
    max_calls_per_turn: int = 3,
    cooperative: Collection[str] = ("coop",),
) -> dict[str, float]:
    """``episode_metrics`` of ``agent_policy`` against each customer, suffixed ``_<key>`` (``_coop``, ``_camo``).

    Every opponent plays the same scenarios with the same seed, so differences are the opponent's doing; those
    named in ``cooperative`` play them all with the cooperative persona (:func:`as_cooperative`).
    """
    metrics: dict[str, float] = {}
    for key, customer in customers.items():
        episodes = run_episodes(
            as_cooperative(heldout_scenarios) if key in cooperative else heldout_scenarios,
            agent_policy,
            customer,
            max_turns=max_turns,
            max_calls_per_turn=max_calls_per_turn,
            seed=seed,
        )
        metrics.update(episode_metrics(episodes, suffix=f"_{key}"))
    return metrics


def intent_accuracy(agent_policy: Policy, texts: Sequence[str], intents: Sequence[str]) -> float:
    """Share of texts whose first reply names the gold intent (a reply naming none counts as wrong)."""
    if len(texts) != len(intents):
        raise ValueError(f"{len(texts)} texts but {len(intents)} intents")
    if not texts:
        return 0.0
    routes = route_utterances(agent_policy, texts)
    return sum(r["intent"] == gold for r, gold in zip(routes, intents, strict=True)) / len(texts)
