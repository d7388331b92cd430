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


def money_text(value: Any, currency: str = "GBP") -> str:
    """An amount as customers state it and :func:`slot_values` fills it: ``61.16 GBP``."""
    return f"{float(value):.2f} {currency}"


def slot_values(scenario: Scenario) -> dict[str, str]:
    """The facts of ``scenario`` a customer states verbatim, keyed by placeholder name, formatted as
    :func:`~sparring.agents.scripted.identity_text` and :func:`~sparring.agents.scripted.describe_slots`
    write them. Closed-vocabulary words (card kind, top-up method, wallet) stay plain words."""
    i, s = scenario.identity, scenario.slots
    values = {
        "full_name": i.get("full_name"),
        "customer_id": i.get("customer_id"),
        "date_of_birth": i.get("date_of_birth"),
        "postcode": i.get("postcode"),
        "my_card_last4": i.get("card_last4"),
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
    if "amount" in s:  # a transaction's in its own currency, transfers and top-ups in GBP, as describe_slots
        values["amount"] = money_text(s["amount"], s.get("currency", "GBP") if "merchant" in s else "GBP")
    if "original_amount" in s:
        values["original_amount"] = f"{s['original_amount']} {s['original_currency']}"
    for key in ("cash_received", "threshold"):
        if key in s:
            values[key] = money_text(s[key])
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
