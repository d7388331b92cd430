"""Slot placeholders: the exact facts a customer states, written by an LM customer as ``[key]`` and filled in.

A customer must state some facts exactly: who they are (customer id, date of birth, postcode) and the details
that name the object of their problem (merchant and amount, card ending, payee...), which is what
``lookup_account`` checks and what a ``"described"`` reference matches. A tiny model trained from scratch does not
learn to copy within our budget (the simulator stated 0 identity facts right; DA0 copied 0 of 45 ids), so the
LM customer works delexicalized, as task-oriented dialogue systems long have: its goal and its training turns
carry ``[merchant]`` where the value stood, and what it writes is filled from its own scenario
(:func:`lexicalize`) before the agent reads it. The customer still decides whether, when and how to state
each fact, which is the adversary's lever; only the spelling is filled. A placeholder its scenario has no value
for stays as written, and the realism judge sees it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sparring.domains import banking_talk, retail_talk
from sparring.world.scenarios import Scenario
from sparring.world.vocab import DOMAIN

_PLACEHOLDER = re.compile(r"\[([a-z0-9_]+)\]")
DETAILS = "[details]"  # the whole of describe_slots: the sentences that name the problem's object


# Each domain's talk (what its customers say of themselves and their problem), by the domain file's `module`: its
# functions identity_text(identity), describe_slots(scenario) and fact_values(scenario) (the problem's facts).
_TALK: dict[str, Any] = {"sparring.domains.banking": banking_talk, "sparring.domains.retail": retail_talk}


def domain_talk() -> Any:
    """The active domain's talk module."""
    if DOMAIN.module not in _TALK:
        raise ImportError(f"{DOMAIN.path}: no customer talk for {DOMAIN.module} in sparring.agents.slots")
    return _TALK[DOMAIN.module]


def identity_slots(facts: Mapping[str, str]) -> dict[str, str]:
    """Identity facts (``full_name``, ``customer_id``, ``date_of_birth``, ``postcode``, ``card_last4``, ...)
    keyed by placeholder name: the identity's card ending is ``my_card_last4``, apart from the card a problem
    is about."""
    return {("my_card_last4" if k == "card_last4" else k): str(v) for k, v in facts.items() if v not in (None, "")}


def slot_values(scenario: Scenario) -> dict[str, str]:
    """What an LM customer's placeholders stand for: every fact (:func:`fact_values`) and ``details``, the
    whole of :func:`describe_slots` (the sentences that name the problem's object).

    ``[details]`` lets a customer state its object exactly without copying the sentence from its goal, which
    the tiny simulator did not learn to do: copying, it often stated another kind of problem's details ("It is
    the [amount] cash withdrawal at [merchant]" for a card that will not activate), and DA0, which routes on
    details as much as on the opening, followed them (docs/results.md, the [details] placeholder). Its goal
    still spells the details out fact by fact, so a customer may also state them its own way."""
    values = fact_values(scenario)
    details = describe_slots(scenario)
    return {**values, "details": details} if details else values


def fact_values(scenario: Scenario) -> dict[str, str]:
    """The facts of ``scenario`` a customer states verbatim, keyed by placeholder name: the one spelling of
    each, which :func:`describe_slots` writes and :func:`lexicalize` fills. Closed-vocabulary words (card
    kind, top-up method, wallet) stay plain words."""
    return {**identity_slots(scenario.identity), **domain_talk().fact_values(scenario)}


def describe_slots(scenario: Scenario) -> str:
    """The customer's knowledge of their problem (``scenario.slots``) in plain words, ids and amounts verbatim.

    Saying them verbatim is what lets the event log trace the agent's arguments back to the customer; the
    amounts are spelled by :func:`fact_values`, as LM customers' placeholders are filled.
    """
    return domain_talk().describe_slots(scenario)


def delexicalize(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every stated value replaced by its ``[key]`` (longest values first, whole words only)."""
    for key, value in sorted(values.items(), key=lambda kv: -len(kv[1])):
        text = re.sub(rf"(?<![\w.]){re.escape(value)}(?!\w)", f"[{key}]", text)
    return text


def lexicalize(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every ``[key]`` that ``values`` has replaced by its value; other brackets stay."""
    if "[" not in text:
        return text
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)
