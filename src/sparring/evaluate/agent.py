"""Evaluate an agent policy: full episodes against each opponent, and single-turn routing of utterances.

Episode metrics carry METRICS.md names with the opponent as suffix (``routing_acc_coop``,
``strict_pass_camo``): the same agent is only comparable across checkpoints against the same opponent, and
the gap between opponents is what co-evolution is meant to close. ``route_utterances`` is the agent's
first reply to a lone utterance: what ``sparring route`` shows, and intent accuracy on held-out utterances
without the cost (or the world noise) of whole episodes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sparring.agents.chat import agent_system_prompt, parse_agent_message
from sparring.agents.policies import Policy, TurnRequest
from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer
from sparring.rollout import agent_opening, episode_metrics, run_episodes
from sparring.world.scenarios import Scenario, as_cooperative
from sparring.world.taxonomy import load_taxonomy


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


def route_utterances(
    agent_policy: Policy,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    system: str | None = None,
) -> list[dict[str, Any]]:
    """The agent's first reply to each text (as the customer's opening turn), generated in batches.

    Returns ``{"intent", "tool", "reply", "format_ok"}`` per text. ``tool`` is the call the reply made, or,
    when it made none (a first reply asks for identity before acting), the taxonomy's tool for the named
    intent: where the agent would route. ``intent``/``tool`` are None when the reply names no known intent.
    ``system``: the agent's system message ("" for none; None: the policy's own, as in episodes).
    """
    tokenizer = getattr(agent_policy, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("route_utterances needs an LM policy (with a tokenizer)")
    tax = load_taxonomy()
    system = agent_system_prompt(agent_policy) if system is None else system
    routes: list[dict[str, Any]] = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        requests = []
        for text in chunk:
            messages = agent_opening(text, system)
            ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
            requests.append(TurnRequest(role="agent", prompt_ids=list(ids), messages=messages, scenario=None))  # type: ignore[arg-type]
        for out in agent_policy.act(requests):
            parsed = parse_agent_message(out.text)
            tool = parsed.call.name if parsed.call is not None else None
            if tool is None and parsed.intent in tax.intents:
                tool = tax.intents[parsed.intent].tool
            routes.append({"intent": parsed.intent, "tool": tool, "reply": parsed.text, "format_ok": parsed.format_ok})
    return routes


def intent_accuracy(agent_policy: Policy, texts: Sequence[str], intents: Sequence[str]) -> float:
    """Share of texts whose first reply names the gold intent (a reply naming none counts as wrong)."""
    if len(texts) != len(intents):
        raise ValueError(f"{len(texts)} texts but {len(intents)} intents")
    if not texts:
        return 0.0
    routes = route_utterances(agent_policy, texts)
    return sum(r["intent"] == gold for r, gold in zip(routes, intents, strict=True)) / len(texts)
