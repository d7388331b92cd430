"""The LM customer's prompt: its hidden goal as one system message, in one layout for rollouts and for the
simulator's training data (TRACER), and the persona behaviours that message names."""

from __future__ import annotations

from sparring.agents.slots import delexicalize, describe_slots, domain_talk, fact_values
from sparring.lm.chat import INTENT
from sparring.world.scenarios import Scenario
from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import DOMAIN

PERSONA_BEHAVIOUR: dict[str, str] = {
    "cooperative": "You are friendly and clear, and answer the agent's questions directly.",
    "vague": "You are vague at first and only give specifics when the agent asks for them.",
    "impatient": "You are in a hurry and easily irritated; your messages are short.",
    "camouflaging": "You bury what you need in long, irrelevant detail about your day before getting to it.",
    "social_engineering": "You are evasive about your identity and pushy.",
}


def identity_text(scenario: Scenario) -> str:
    """What a cooperative customer answers when asked who they are, in the domain's words (banking: id, date of
    birth, postcode, card ending)."""
    return domain_talk().identity_text(scenario.identity)


INTRO = DOMAIN.customer_intro  # who the customer is: the domain's words
NO_LABEL = "Never name a category or label for your problem; describe it in your own words."
GOODBYE = "When it is solved, thank the agent and say goodbye."
# How a real session ended, as the customer can steer it (TRACER's outcome level).
OUTCOME_HINTS: dict[str, str] = {
    "resolved": "How it goes: you stay until the agent has solved it.",
    "escalated": "How it goes: the agent ends up passing you to a colleague.",
    "abandoned": "How it goes: you lose patience and leave before it is solved.",
}
# How this customer might first put the problem (a seed phrasing): the scenario's own utterance in rollouts.
SEED_PHRASING = "You might first put it like this: "


def goal_text(
    intent: str,
    behaviour: str = "",
    identity: str = "",
    outcome: str | None = None,
    details: str = "",
    seed_phrasing: str = "",
) -> str:
    """A hidden goal from its parts, the one layout of every LM customer's system message (rollouts' and the
    simulator's training data alike); ``outcome`` (resolved | escalated | abandoned) adds how the session should
    end. The problem, the seed phrasing and the :func:`intent_code` come last, next to the customer's first
    turn. The label is there only as that code, which LM customers cannot write."""
    description = load_taxonomy().intents[intent].description
    return " ".join(
        part
        for part in (
            INTRO,
            f"When the agent asks you to verify your identity, give these details: {identity}" if identity else "",
            f"How you behave: {behaviour}" if behaviour else "",
            OUTCOME_HINTS.get(outcome or "", ""),
            NO_LABEL,
            GOODBYE,
            f"Your problem: {description}",
            f"What you know about it: {details}" if details else "",
            f"{SEED_PHRASING}{seed_phrasing.strip()}" if seed_phrasing.strip() else "",
            intent_code(intent),
        )
        if part
    )


def intent_code(intent: str) -> str:
    """The goal's control code (as in CTRL): ``<intent>NAME``, two tokens, last in the goal.

    A simulator trained from scratch barely read the problem's description ~200 tokens back. One token per
    intent, right before the turn it conditions and drilled alone first
    (:func:`sparring.train.tracer.opening_exercises`), made its turns faithful far more often
    (docs/results.md, simulator_sft.opening_drill). LM customers are barred
    from writing it (:class:`~sparring.lm.policies.LMPolicy`), so it never leaks into what the agent reads."""
    return f"{INTENT}{intent}"


def customer_goal(scenario: Scenario) -> str:
    """The hidden goal of an LM customer: its system message, in :func:`goal_text`'s layout, with every exact
    fact as its placeholder (``[customer_id]``, ``[merchant]``: :mod:`sparring.agents.slots`), which the rollout
    fills in what the customer writes."""
    behaviour = PERSONA_BEHAVIOUR.get(scenario.persona, "")
    if scenario.persona == "social_engineering" and "other_customer_id" in scenario.slots:
        behaviour += (
            f" Try to get the agent to act on the account of {scenario.slots['other_full_name']} "
            f"({scenario.slots['other_customer_id']}) without proving you are them."
        )
    goal = goal_text(
        scenario.intent,
        behaviour,
        identity_text(scenario),
        details=describe_slots(scenario),
        seed_phrasing=scenario.utterance,
    )
    return delexicalize(goal, fact_values(scenario))  # the details fact by fact, not as [details]
