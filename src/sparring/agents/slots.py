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

from sparring.world.scenarios import Scenario

_PLACEHOLDER = re.compile(r"\[([a-z0-9_]+)\]")


def _money(value: Any, currency: str = "GBP") -> str:
    return f"{float(value):.2f} {currency}"


def identity_slots(facts: Mapping[str, str]) -> dict[str, str]:
    """Identity facts (``full_name``, ``customer_id``, ``date_of_birth``, ``postcode``, ``card_last4``, ...)
    keyed by placeholder name: the identity's card ending is ``my_card_last4``, apart from the card a problem
    is about."""
    return {("my_card_last4" if k == "card_last4" else k): str(v) for k, v in facts.items() if v not in (None, "")}


def slot_values(scenario: Scenario) -> dict[str, str]:
    """The facts of ``scenario`` a customer states verbatim, keyed by placeholder name: the one spelling of
    each, which :func:`~sparring.agents.scripted.describe_slots` writes and :func:`lexicalize` fills.
    Closed-vocabulary words (card kind, top-up method, wallet) stay plain words."""
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
