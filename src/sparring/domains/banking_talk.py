"""What a banking customer says: who they are (as ``lookup_account`` takes it) and, in plain words, the card, payment,
transfer, top-up or payee their problem is about (``scenario.slots``), ids and amounts verbatim so the event log can
trace the agent's arguments back to the customer (registered in :mod:`sparring.agents.slots`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparring.world.scenarios import Scenario


def _money(value: Any, currency: str = "GBP") -> str:
    return f"{float(value):.2f} {currency}"


def identity_text(identity: dict[str, str]) -> str:
    """What a cooperative customer answers when asked to verify: id, date of birth, postcode, card ending."""
    i = identity
    return (
        f"My name is {i['full_name']}, customer id {i['customer_id']}, date of birth {i['date_of_birth']}, "
        f"postcode {i['postcode']}, and my card ending {i['card_last4']}."
    )


def fact_values(scenario: Scenario) -> dict[str, str]:
    """The problem's facts a customer states verbatim, keyed by placeholder name (the identity's are
    :func:`sparring.agents.slots.identity_slots`). Closed-vocabulary words (card kind, top-up method, wallet) stay
    plain words."""
    s = scenario.slots
    values = {
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
    """The customer's knowledge of their problem in plain words, ids and amounts verbatim (amounts spelled by
    :func:`fact_values`)."""
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
