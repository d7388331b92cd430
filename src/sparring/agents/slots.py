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

from sparring.domains import retail_talk
from sparring.world.scenarios import Scenario
from sparring.world.vocab import DOMAIN

_PLACEHOLDER = re.compile(r"\[([a-z0-9_]+)\]")
DETAILS = "[details]"  # the whole of describe_slots: the sentences that name the problem's object


# Each domain's talk (what its customers say of themselves and their problem): banking's is this module's own;
# another domain's module is registered here, by the domain file's `module`. Its functions: identity_text,
# describe_slots, fact_values.
_TALK: dict[str, Any] = {"sparring.domains.banking": None, "sparring.domains.retail": retail_talk}


def domain_talk() -> Any:
    """The active domain's talk module, or None for banking (this module's functions)."""
    if DOMAIN.module not in _TALK:
        raise ImportError(f"{DOMAIN.path}: no customer talk for {DOMAIN.module} in sparring.agents.slots")
    return _TALK[DOMAIN.module]


def _money(value: Any, currency: str = "GBP") -> str:
    return f"{float(value):.2f} {currency}"


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
    if (talk := domain_talk()) is not None:
        return {**identity_slots(scenario.identity), **talk.fact_values(scenario)}
    s = scenario.slots
    values = {
        **identity_slots(scenario.identity),
        "card_last4": s.get("card_last4"),
        "merchant": s.get("merchant"),
        "counterparty": s.get("counterparty"),
        "beneficiary": s.get("beneficiary"),
        "account_last4": s.get("account_last4"),
        "date": s.get("date"),
        "value": s.get("value"),
        "other_full_name": s.get("other_full_name"),
        "other_customer_id": s.get("other_customer_id"),
    }
    if "amount" in s:  # a transaction's in its own currency; transfers, top-ups and thresholds in GBP
        values["amount"] = _money(s["amount"], s.get("currency", "GBP") if "merchant" in s else "GBP")
    if "original_amount" in s:
        values["original_amount"] = f"{s['original_amount']} {s['original_currency']}"
    for key in ("cash_received", "threshold"):
        if key in s:
            values[key] = _money(s[key])
    return {k: str(v) for k, v in values.items() if v not in (None, "")}


def describe_slots(scenario: Scenario) -> str:
    """The customer's knowledge of their problem (``scenario.slots``) in plain words, ids and amounts verbatim.

    Saying them verbatim is what lets the event log trace the agent's arguments back to the customer; the
    amounts are spelled by :func:`fact_values`, as LM customers' placeholders are filled.
    """
    if (talk := domain_talk()) is not None:
        return talk.describe_slots(scenario)
    s, v = scenario.slots, fact_values(scenario)
    parts: list[str] = []
    if "card_last4" in s:
        parts.append(f"It is about my {s.get('card_kind', '')} card ending {s['card_last4']}.".replace("  ", " "))
    if "merchant" in s:
        what = {"atm_withdrawal": "cash withdrawal at", "direct_debit": "direct debit to", "refund": "refund from"}
        kind = what.get(s.get("transaction_kind", ""), "card payment at")
        parts.append(f"It is the {v['amount']} {kind} {s['merchant']} on {s['date']}.")
        if "original_amount" in s:
            parts.append(f"I paid {v['original_amount']} but the rate looked wrong.")
        if "cash_received" in s:
            parts.append(f"I only got {v['cash_received']} out of the machine.")
    if "counterparty" in s:
        way = "to" if s.get("direction") == "out" else "from"
        parts.append(f"It is the {v['amount']} transfer {way} {s['counterparty']} on {s['date']}.")
    if "beneficiary" in s:
        parts.append(f"The payee is {s['beneficiary']}, account ending {s['account_last4']}.")
    if "method" in s:
        parts.append(f"It is my {v['amount']} {s['method'].replace('_', ' ')} top-up on {s['date']}.")
    if "wallet" in s:
        parts.append(f"I want to add it to {s['wallet'].replace('_', ' ').title()} ({s['wallet']}).")
    if "threshold" in s:
        parts.append(f"Top up {v['amount']} whenever my balance falls below {v['threshold']}.")
    if "field" in s:
        parts.append(f"Please change my {s['field']} to {s['value']}.")
    return " ".join(parts)


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
