"""A recorded dialogue in the customer's view: the identity facts the customer gave, the hidden goal built from
them, and the conversation with the roles swapped, as the simulator is trained on it (``train/tracer.py``, stage 1) and
as its held-out perplexity reads it (``evaluate/fidelity.py``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sparring.agents.clarify import ASKS_CONFIRM, ASKS_WHICH, mark_restatement
from sparring.agents.customer_prompt import PERSONA_BEHAVIOUR, goal_text
from sparring.agents.leaving import gives_up
from sparring.agents.slots import DETAILS, delexicalize, identity_slots
from sparring.lm.chat import swap_roles
from sparring.world.vocab import DOMAIN

# Identity facts a customer says in a dialogue, in any form the domain lists, after the domain's wording for an
# answer; an e-mail address besides, where the domain's identity has none.
_EMAIL = re.compile(r"\b([\w.'+-]+@[\w-]+(?:\.[\w-]+)+)\b")
_IDENTITY_READERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    *((key, DOMAIN.identity.reader(key, in_answer=True)) for key in DOMAIN.identity.keys),
    *((("email", _EMAIL),) if "email" not in DOMAIN.identity.keys else ()),
)
_NAME = re.compile(r"\b([A-Z][a-z]+ (?:[A-Z]')?[A-Z][a-z]+(?:-[A-Z][a-z]+)?)\b")
_ASKS_IDENTITY = re.compile(DOMAIN.identity.asked_in_dialogues, re.I)
# An agent question about which object the problem is about (in banking: card, payment, transfer, top-up, payee), in
# the generator's and common wordings; identity checks and confirmations that mention one are not such questions:
# the domain file's which_in_dialogues.
_WHICH = {key: re.compile(pattern, re.I) for key, pattern in DOMAIN.which_in_dialogues.items()}
_OBJECT_WORDS, _ASKS_IDENTIFYING, _NOT_WHICH = _WHICH["objects"], _WHICH["identifying"], _WHICH["not_which"]
_ANSWER_LEAD = re.compile(r"^\W*(sure|yes|yeah|of course|okay|ok|sorry|right)\b", re.I)
_NOT_NAMES = {"Sure", "Yes", "Yeah", "Fine", "Okay", "Hello", "Hi", "Thanks", "Please", "Now", "Can", "It", "The"}


def asks_which_object(text: str) -> bool:
    """Whether an agent turn asks which of the customer's objects (card, payment, ...) the problem is about."""
    if "?" not in text or ASKS_CONFIRM.search(text) or _NOT_WHICH.search(text):
        return False
    return bool(ASKS_WHICH.search(text) or (_OBJECT_WORDS.search(text) and _ASKS_IDENTIFYING.search(text)))


def extract_identity(turns: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """Identity facts the customer gave in a dialogue (``turns``: ``{role: customer|agent, text}``).

    Only answers to an agent turn that asks for identity count, so merchants, places, dates and the card a
    problem is about stay out."""
    facts: dict[str, str] = {}
    asked = False
    for turn in turns:
        text = str(turn.get("text") or "")
        if turn.get("role") == "agent":
            asked = bool(_ASKS_IDENTITY.search(text)) and not asks_which_object(text)
            continue
        if not asked:
            continue
        for key, pattern in _IDENTITY_READERS:
            found = pattern.search(text)
            if found and key not in facts:
                facts[key] = found.group(1)
        if "full_name" not in facts:
            name = next((m.group(1) for m in _NAME.finditer(text) if m.group(1).split()[0] not in _NOT_NAMES), None)
            if name:
                facts["full_name"] = name
        asked = False
    return facts


def identity_sentence(facts: Mapping[str, str]) -> str:
    """The facts in :func:`~sparring.agents.customer_prompt.identity_text`'s wording ("" when there are none)."""
    name = facts.get("full_name") or " ".join(facts[k] for k in ("first_name", "last_name") if k in facts)
    parts = [
        f"My name is {name}" if name else "",
        f"customer id {facts['customer_id']}" if "customer_id" in facts else "",
        f"date of birth {facts['date_of_birth']}" if "date_of_birth" in facts else "",
        f"postcode {facts['postcode']}" if "postcode" in facts else "",
        f"zip code {facts['zip']}" if "zip" in facts else "",
        f"my card ending {facts['card_last4']}" if "card_last4" in facts else "",
        f"email {facts['email']}" if "email" in facts else "",
    ]
    parts = [p for p in parts if p]
    if not parts:
        return ""
    body = ", ".join(parts)
    return body[0].upper() + body[1:] + "."


def dialogue_goal(row: Mapping[str, Any], with_outcome: bool = False, seed_phrasing: str = "") -> str:
    """The goal of a dialogue row (``intent``, ``persona``, ``outcome``, ``turns``)."""
    return goal_text(
        row["intent"],
        PERSONA_BEHAVIOUR.get(str(row.get("persona") or ""), ""),
        identity_sentence(extract_identity(row["turns"])),
        row.get("outcome") if with_outcome else None,
        seed_phrasing=seed_phrasing,
    )


def dialogue_view(row: Mapping[str, Any], with_outcome: bool = False, seed_phrasing: str = "") -> list[dict[str, str]]:
    """A dialogue in the customer's view: goal, then agent turns as ``user``, the customer's as ``assistant``;
    the identity facts the customer gave are placeholders in its goal and turns (:mod:`sparring.agents.slots`).

    A customer's answer to a which-object question becomes ``[details]``: its merchant, amount or payee belong
    to another customer's account, which a simulator cannot know in a rollout, and learnt literally they taught
    it to answer with made-up objects the agent could not find (issue 25). An agent turn that restates a request
    is marked as the rollout marks it (:func:`~sparring.agents.clarify.mark_restatement`).

    Dialogues may end on the agent's closing turn; kept, it costs no loss and shows how sessions end."""
    values = identity_slots(extract_identity(row["turns"]))
    agent_view, asked_which = [], False
    for t in row["turns"]:
        text = str(t.get("text") or "")
        if not text.strip():
            continue
        if t["role"] == "customer":
            text = object_answer(text) if asked_which else delexicalize(text, values)
        asked_which = t["role"] == "agent" and asks_which_object(text)
        if t["role"] == "agent":
            text = mark_restatement(text, row["intent"])
        agent_view.append({"role": "user" if t["role"] == "customer" else "assistant", "content": text})
    return swap_roles(agent_view, delexicalize(dialogue_goal(row, with_outcome, seed_phrasing), values))


def object_answer(text: str) -> str:
    """A customer's answer to a which-object question, its object stated as the ``[details]`` placeholder (a
    lead such as "Sure," kept); an answer that leaves the chat stays as it is."""
    if gives_up(text):
        return text
    lead = _ANSWER_LEAD.match(text)
    return f"{lead.group(1).capitalize()}. {DETAILS}" if lead else DETAILS
