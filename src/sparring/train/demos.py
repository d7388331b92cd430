"""Expert demonstrations for the agent's warm start (DA0), and the texts its tokenizer is trained on.

DA0 is supervised on what the scripted :class:`~sparring.agents.scripted.ExpertAgent` does against
cooperative customers: it verifies, looks up, routes to the resolving tool with ids copied from the lookup
result, confirms and ends. Only cooperative customers play here: the adversary's styles (camouflage, social
engineering) are what co-evolution must discover, so the warm start must not have seen them already.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sparring.agents.policies import Policy
from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, ExpertAgent
from sparring.rollout import run_episodes
from sparring.train.sft import flatten
from sparring.world.scenarios import Scenario

# Scripted customers by name; "camouflaging" exists for ablations, never in the default warm start.
CUSTOMERS: dict[str, Callable[[int], Policy]] = {
    "cooperative": lambda seed: CooperativeCustomer(),
    "camouflaging": lambda seed: CamouflagingCustomer(seed=seed),
}


def expert_demonstrations(
    scenarios: Sequence[Scenario],
    seed: int,
    customers: Sequence[str] = ("cooperative",),
    *,
    max_turns: int = 6,
    max_calls_per_turn: int = 3,
) -> list[list[dict[str, Any]]]:
    """Agent-view conversations (``Episode.messages``) of the expert against each named customer, one per
    scenario and customer, keeping only strict passes: a demonstration that does not solve the scenario
    the way the outcome check wants would teach the failure."""
    unknown = sorted(set(customers) - set(CUSTOMERS))
    if unknown:
        raise ValueError(f"unknown customers {unknown}; known: {sorted(CUSTOMERS)}")
    demos: list[list[dict[str, Any]]] = []
    for name in customers:
        episodes = run_episodes(
            scenarios,
            ExpertAgent(),
            CUSTOMERS[name](seed),
            max_turns=max_turns,
            max_calls_per_turn=max_calls_per_turn,
            seed=seed,
        )
        demos += [ep.messages for ep in episodes if ep.outcome.strict_pass]
    return demos


def render_messages(conversation: Sequence[dict[str, Any]]) -> str:
    """One conversation's text as the model reads it, minus role markers (the chat format's agent syntax:
    ``<intent>NAME text<call>TOOL {JSON}</call>``), for tokenizer training."""
    return "\n".join(m["content"] for m in flatten(conversation))


def tokenizer_corpus(
    utterance_texts: Iterable[str],
    dialogues_turn_texts: Iterable[str],
    demos: Iterable[Sequence[dict[str, Any]]] = (),
) -> list[str]:
    """Texts to train the shared BPE on: customer utterances, dialogue turns and the rendered demos.

    The demos carry the tool results' JSON and the call arguments: with them in the corpus, keys such as
    ``"transaction_id":"`` become a few tokens instead of a dozen, which shortens every lookup result the
    tiny model reads (the longest message of an episode by far).
    """
    texts = [t for t in utterance_texts if t]
    texts += [t for t in dialogues_turn_texts if t]
    texts += [render_messages(d) for d in demos]
    return texts
