"""Expert demonstrations for the agent's warm start (DA0), and the texts its tokenizer is trained on.

DA0 is supervised on what the scripted :class:`~sparring.agents.scripted.ExpertAgent` does against
cooperative customers: it verifies, looks up, routes to the resolving tool (naming the object by the id the
lookup listed, or as ``"described"``: ``agent_sft.object_refs``), confirms and ends. Only cooperative customers
play here: the adversary's styles (camouflage, social engineering) are what co-evolution must discover, so the
warm start must not have seen them already.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, expert_agent
from sparring.lm.chat import AGENT_SYSTEM_PROMPT, message_text
from sparring.lm.policies import Policy
from sparring.rollout import agent_opening, run_episodes
from sparring.settings import AgentSFTSettings, SFTSettings
from sparring.train.sft import SFTResult, combine, flatten, train_sft
from sparring.world.scenarios import Scenario

# Scripted customers by name; "camouflaging" exists for ablations, never in the default warm start.
CUSTOMERS: dict[str, Callable[[int], Policy]] = {
    "cooperative": lambda seed: CooperativeCustomer(),
    "camouflaging": lambda seed: CamouflagingCustomer(seed=seed),
}


def expert_demonstrations(
    scenarios: Sequence[Scenario],
    seed: int,
    customers: Sequence[str | Policy] = ("cooperative",),
    *,
    max_turns: int = 6,
    max_calls_per_turn: int = 3,
    refs: str = "id",
    agent_system: str | None = None,
) -> list[list[dict[str, Any]]]:
    """Agent-view conversations (``Episode.messages``) of the expert against each customer, one per
    scenario and customer, keeping only strict passes: a demonstration that does not solve the scenario
    the way the outcome check wants would teach the failure. A customer is a scripted one's name
    (:data:`CUSTOMERS`) or any policy, such as a trained adversary (``benchmarks/agent_gym.py --expert``).
    ``refs`` is the expert's (:class:`ExpertAgent`); ``agent_system`` the system message the demos open with
    (as :func:`~sparring.rollout.run_episodes`)."""
    unknown = sorted(c for c in customers if isinstance(c, str) and c not in CUSTOMERS)
    if unknown:
        raise ValueError(f"unknown customers {unknown}; known: {sorted(CUSTOMERS)}")
    demos: list[list[dict[str, Any]]] = []
    for customer in customers:
        episodes = run_episodes(
            scenarios,
            expert_agent(refs=refs),
            CUSTOMERS[customer](seed) if isinstance(customer, str) else customer,
            max_turns=max_turns,
            max_calls_per_turn=max_calls_per_turn,
            seed=seed,
            agent_system=agent_system,
        )
        demos += [ep.messages for ep in episodes if ep.outcome.strict_pass]
    return demos


def recovery_demonstrations(
    scenarios: Sequence[Scenario],
    seed: int,
    *,
    max_turns: int = 6,
    max_calls_per_turn: int = 3,
    refs: str = "id",
    agent_system: str | None = None,
) -> list[list[dict[str, Any]]]:
    """DART-style demonstrations of recovering from a wrong turn (Laskey et al., 2017: noise injected into the
    expert's own play, so that the learner sees the states its mistakes lead to and what the expert does there).

    The expert first confirms a wrong intent of the same tool (``expert_agent(misconfirm=1.0)``), the cooperative
    customer says no and restates, and the expert confirms the right intent and resolves. DA0 had never seen a
    no: it went on to act on the request it had just heard refused. Every agent turn up to the wrong confirmation
    is rewritten as an agent that believed the wrong intent (its tag) and kept out of the loss (``train: false``,
    :func:`wrong_turns_masked`): what is learnt is the recovery, never the mistake. Strict passes only; scenarios
    whose tool serves no other intent give none."""
    episodes = run_episodes(
        scenarios,
        expert_agent(refs=refs, misconfirm=1.0),
        CooperativeCustomer(),
        max_turns=max_turns,
        max_calls_per_turn=max_calls_per_turn,
        seed=seed,
        agent_system=agent_system,
    )
    masked = (wrong_turns_masked(ep.messages, ep.scenario.intent) for ep in episodes if ep.outcome.strict_pass)
    return [demo for demo in masked if demo is not None]


def wrong_turns_masked(messages: Sequence[dict[str, Any]], intent: str) -> list[dict[str, Any]] | None:
    """``messages`` with every agent turn up to the first confirmation of an intent other than ``intent`` tagged
    with that wrong intent and marked ``train: false``; None when no turn confirms a wrong intent."""
    wrong_at = next((i for i, m in enumerate(messages) if _confirmed(m) not in (None, intent)), None)
    if wrong_at is None:
        return None
    wrong = _confirmed(messages[wrong_at])
    out = [dict(m) for m in messages]
    for m in out[: wrong_at + 1]:
        if m["role"] == "assistant":
            m.update(train=False, **({"intent": wrong} if m.get("intent") else {}))
    return out


def _confirmed(message: dict[str, Any]) -> str | None:
    """The intent an agent message's ``confirm_request`` call states, else None."""
    if message.get("role") != "assistant":
        return None
    calls = [c.get("function", c) for c in message.get("tool_calls") or []]
    return next((str(c["arguments"]["intent"]) for c in calls if c.get("name") == "confirm_request"), None)


def demo_prefixes(demos: Iterable[Sequence[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Each demo up to its first tool result: the opening, the identity request and the ``lookup_account`` call.

    A whole demo is ~1.4k tokens, most of them the lookup result; its first ~200 carry the intent and the
    copying of the customer's identity into the call. Training on these slices teaches both at a seventh of the
    cost, and they are exact prefixes, so they never disagree with the whole demos.
    """
    out = []
    for demo in demos:
        cut = next((i for i, m in enumerate(demo) if m["role"] == "tool"), None)
        if cut is not None:
            out.append(list(demo[:cut]))
    return out


def intent_examples(
    texts: Sequence[str], intents: Sequence[str], system: str | None = None
) -> list[list[dict[str, Any]]]:
    """``user: text`` / ``assistant: <intent>NAME`` conversations, after ``system`` if given: the routing decision
    alone, as the agent reads a customer's opening (:func:`~sparring.rollout.agent_opening`).

    Intent is what routing hangs on, and a tiny model from scratch needs ~20k labelled utterances (passes) to
    learn it (DESIGN.md's probe); through whole demos that would cost ~40x the tokens.

    ``system``: the agent's system message, when it reads one (``agent_sft.system_prompt``): phase 1 must prompt
    as episodes and ``route_utterances`` do. A model from scratch learns far faster without one, and one exchange
    per conversation beats chaining several (more optimizer steps): docs/results.md, agent_sft.system_prompt.
    """
    if len(texts) != len(intents):
        raise ValueError(f"{len(texts)} texts but {len(intents)} intents")
    return [
        [*agent_opening(text, system), {"role": "assistant", "content": "", "intent": intent}]
        for text, intent in zip(texts, intents, strict=True)
        if text.strip()
    ]


def warm_start(
    model: Any,
    tokenizer: Any,
    demos: Sequence[Sequence[dict[str, Any]]],
    texts: Sequence[str],
    intents: Sequence[str],
    settings: AgentSFTSettings,
    output_dir: Path,
    seed: int = 0,
) -> SFTResult:
    """DA0 in two phases: (1) ``settings.intent``: utterance -> ``<intent>NAME`` exchanges (:func:`intent_examples`,
    after the agent's system message when ``settings.system_prompt``); (2) ``settings.sft``: the expert
    demonstrations, loss on the agent's turns. Curves carry a ``phase`` key.

    Phase 1 is the routing decision at ~15-50 tokens an example, and its whole-text loss also teaches the model
    customers' language; mixed into the demonstrations instead, the exchanges taught nothing
    (docs/results.md). ``intent_rehearsal``: that many of phase 1's exchanges (a seeded sample) join phase 2's
    demonstrations, answered as the demos answer an opening (:func:`first_reply`): phase 2's passes over a few
    hundred openings otherwise wear down what phase 1 learnt.
    """
    phases: dict[str, SFTResult] = {}
    for name, (conversations, phase) in warm_start_phases(demos, texts, intents, settings, seed).items():
        phases[name] = train_sft(model, tokenizer, conversations, phase, output_dir / name, seed=seed)
        model = phases[name].model
    return combine(phases, {"intent": 1, "demos": 2})


def warm_start_phases(
    demos: Sequence[Sequence[dict[str, Any]]],
    texts: Sequence[str],
    intents: Sequence[str],
    settings: AgentSFTSettings,
    seed: int = 0,
) -> dict[str, tuple[list[list[dict[str, Any]]], SFTSettings]]:
    """:func:`warm_start`'s phases in order, each its conversations and settings: ``intent`` (absent when
    ``settings.intent`` is null or there are no utterances) and ``demos``."""
    out: dict[str, tuple[list[list[dict[str, Any]]], SFTSettings]] = {}
    system = AGENT_SYSTEM_PROMPT if settings.system_prompt else None
    examples = intent_examples(texts, intents, system)
    if settings.intent is not None and examples:
        out["intent"] = (examples, settings.intent)
    out["demos"] = ([*demos, *rehearsal(examples, demos, settings.intent_rehearsal, seed)], settings.sft)
    return out


def rehearsal(
    examples: Sequence[Sequence[dict[str, Any]]], demos: Sequence[Sequence[dict[str, Any]]], n: int, seed: int
) -> list[list[dict[str, Any]]]:
    """``n`` of :func:`intent_examples`' exchanges (a seeded sample), each answered as the demos answer an opening
    (:func:`first_reply`): ending at the intent instead, they taught the agent to stop there in episodes."""
    picked = random.Random(seed).sample(range(len(examples)), min(n, len(examples)))
    reply = first_reply(demos)
    return [[*examples[i][:-1], {**examples[i][-1], "content": reply}] for i in picked]


def first_reply(demos: Sequence[Sequence[dict[str, Any]]]) -> str:
    """The text the demos' agent most often answers a customer's opening with ("" when there are none)."""
    replies: Counter[str] = Counter()
    for demo in demos:
        roles = [m["role"] for m in demo]
        i = roles.index("user") if "user" in roles else len(roles)
        if i + 1 < len(roles) and roles[i + 1] == "assistant":
            replies[message_text(demo[i + 1].get("content"))] += 1
    return replies.most_common(1)[0][0] if replies else ""


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
