"""An agent that escalates as real agents do, and a customer that steers a session to a given ending (issue 44).

Real sessions end resolved, escalated or abandoned (TRACER's outcome level), and in the dialogues a quarter end
escalated: the agent hands over on its own. The scripted :class:`~sparring.agents.scripted.ExpertAgent` hands
over only after two failed identity checks, two refused resolving calls or a second no to a right confirmation,
none of which a customer can bring about against it (0 of 240 replayed sessions ended escalated), so no simulator
played against it could end a session as those customers did. :class:`EscalatingExpert` is the expert plus what
a real agent does: it calls ``transfer_to_human`` (the world records ``ended_by = "transfer_to_human"``, read as
"escalated" by :func:`~sparring.train.tracer.simulated_outcome`) when the customer asks for a person
(:func:`asks_for_person`), or once the customer has refused twice (:func:`refusals`): a no to the agent's
question, or a refusal to verify, as the dialogues' evasive customers word it. Before the lookup, a first refusal
to verify is met by asking again, not by looking the caller up. It is the agent side of the simulator's fidelity
replays and of its gym (TRACER stage 2); DA0's demonstrations and the agents' ceilings keep the plain expert.

:class:`EndingCustomer` plays the cooperative customer up to the ending it is told: it leaves (``abandoned``),
asks for a person or refuses twice (``escalated``), or cooperates (``resolved``). With endings drawn from each
persona's rates it is the persona-rate ceiling realized through the world (benchmarks/simulator_fidelity.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sparring.agents.clarify import ASKS_CONFIRM, ASKS_WHICH
from sparring.agents.domain_expert import DomainExpert
from sparring.agents.scripted import BANKING, CooperativeCustomer, ExpertAgent
from sparring.agents.transcript import ASKS_IDENTITY, tool_calls
from sparring.data.synthetic import OUTCOMES
from sparring.lm.policies import TurnRequest
from sparring.world.answers import answer_kind
from sparring.world.vocab import DOMAIN

# A customer asking for a person: "can I speak to a human", "get me a manager", "a real person please".
_STAFF = r"(?:human|person|manager|supervisor|someone(?: else| real)?|real agent|colleague|specialist)"
ASKS_PERSON = re.compile(
    rf"\b(?:speak|talk|chat)(?:ing)? (?:to|with) (?:a |an |your |some )?(?:real |actual |live )?{_STAFF}\b"
    rf"|\b(?:get|put|pass|transfer|connect) me (?:through |over )?(?:to|with) (?:a |an |your )?(?:real |actual )?"
    rf"{_STAFF}\b"
    r"|\b(?:real|actual|live) (?:person|human)\b|\bhuman (?:agent|being)\b"
    r"|\bescalate (?:this|it|me)\b|\btransfer me\b",
    re.I,
)
# A customer declining to verify, as the dialogues' evasive customers do (the lexicon's customer_identity_evasive):
# the common ways a customer refuses a question, then the domain's own words (identity.declined).
REFUSES = re.compile(
    r"\bskip (?:the |all )?(?:security|verification|checks?|questions?|that)\b"
    r"|\bwhy do you need (?:that|this|it|to know|all that|my)\b|\bcan'?t you just\b|\bjust (?:tell|read|send) me\b"
    r"|\b(?:don'?t|do not|won'?t|will not|not going to|rather not) (?:give|share|tell) (?:you|that|those|them|it|my)\b"
    rf"|{DOMAIN.identity.declined}",
    re.I,
)
REVERIFY = f"I'm sorry, I can only help once you have verified your identity. {DOMAIN.identity.reask}"


def asks_for_person(text: str) -> bool:
    """True when a customer message asks to be passed to a person."""
    return bool(ASKS_PERSON.search(text))


def _asked(agent_message: dict[str, Any]) -> str | None:
    """What an agent message asked the customer: ``identity``, ``question`` (a confirmation or which-object
    question, by its call or its words), or None."""
    text = str(agent_message.get("content") or "")
    calls = [c["function"]["name"] for c in agent_message.get("tool_calls") or ()]
    if {"confirm_request", "ask_customer"} & set(calls) or ASKS_CONFIRM.search(text) or ASKS_WHICH.search(text):
        return "question"
    return "identity" if ASKS_IDENTITY.search(text) else None


def refusals(messages: list[dict[str, Any]]) -> tuple[int, bool]:
    """(how many of the customer's answers refused, whether the last customer message refused verification) in an
    agent-view conversation. A refusal answers the agent's question (identity, confirmation, which object) with a
    no or a refusing phrase (:data:`REFUSES`); a no to "anything else?" is no refusal."""
    count, last_refused_identity, asked = 0, False, None
    for m in messages:
        if m["role"] == "assistant":  # an agent turn's last message is the one the customer answers
            asked = _asked(m)
        elif m["role"] == "user":
            text = str(m.get("content") or "")
            said_no = answer_kind(text) == "no"
            refused = asked is not None and (said_no or bool(REFUSES.search(text)))
            count += refused
            last_refused_identity = refused and asked == "identity"
            asked = None
    return count, last_refused_identity


class EscalatingExpert(ExpertAgent if BANKING else DomainExpert):  # type: ignore[misc]
    """The scripted expert that also hands over as real agents do: when the customer asks for a person, or after
    the customer has refused twice (:func:`refusals`); a first refusal to verify is asked again. Against a
    customer who does neither it plays exactly as the domain's expert (:class:`ExpertAgent` in banking, else
    :class:`~sparring.agents.domain_expert.DomainExpert`; same constructor)."""

    def __init__(self, *args: Any, max_refusals: int = 2, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if max_refusals < 1:
            raise ValueError(f"max_refusals must be >= 1, got {max_refusals!r}")
        self.max_refusals = max_refusals

    def reply(self, scenario: Any, messages: list[dict[str, Any]]) -> str:
        if not messages or messages[-1]["role"] != "user":
            return super().reply(scenario, messages)
        if asks_for_person(str(messages[-1].get("content") or "")):
            return self._handoff(scenario.intent, "The customer asked for a person.")
        count, refused_identity = refusals(messages)
        if count >= self.max_refusals:
            return self._handoff(scenario.intent, f"The customer refused {count} times.")
        if refused_identity and not any(c["name"] == DOMAIN.identity.tool for c in tool_calls(messages)):
            return self._say(scenario.intent, REVERIFY)
        return super().reply(scenario, messages)


# How an EndingCustomer brings about an escalation: by asking for a person, or by refusing to verify twice.
ESCALATE_BY = ("ask", "refuse")
LEAVE_LINE = "Never mind, I'll try another time."
ASK_LINE = "Can I speak to a real person, please?"
REFUSE_LINE = "Can we skip the security questions? I'm in a hurry."


class EndingCustomer(CooperativeCustomer):
    """The cooperative customer steered to an ending per scenario (``endings``: scenario id -> resolved |
    escalated | abandoned; unlisted scenarios are resolved): after its opening it leaves (abandoned), asks for
    a person or refuses every identity request (escalated, as ``escalate_by`` says), or cooperates (resolved)."""

    def __init__(self, endings: Mapping[str, str], escalate_by: str = "ask") -> None:
        unknown = sorted(set(endings.values()) - set(OUTCOMES))
        if unknown:
            raise ValueError(f"endings must be among {OUTCOMES}, got {unknown}")
        if escalate_by not in ESCALATE_BY:
            raise ValueError(f"escalate_by must be one of {ESCALATE_BY}, got {escalate_by!r}")
        self.endings, self.escalate_by = dict(endings), escalate_by

    def reply(self, request: TurnRequest) -> str:
        ending = self.endings.get(request.scenario.scenario_id, "resolved")
        if ending == "resolved" or not any(m["role"] == "assistant" for m in request.messages):
            return super().reply(request)  # the opening, or a session that should be resolved
        if ending == "abandoned":
            return LEAVE_LINE
        if self.escalate_by == "ask":
            return ASK_LINE
        heard = str(request.messages[-1]["content"]) if request.messages[-1]["role"] == "user" else ""
        return REFUSE_LINE if ASKS_IDENTITY.search(heard) else super().reply(request)
