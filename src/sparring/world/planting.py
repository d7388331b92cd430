"""Scenario-specific facts: choosing them (slots) and planting them into a generated world.

Slots are what the customer knows about their problem (merchant, amount, card ending, ...); they are
chosen once at sampling time and stored in the scenario. Planting turns slots into objects in the
world. Both are deterministic, so ``build_world(scenario)`` always rebuilds the same start world.
"""

from __future__ import annotations

import random
from typing import Any

from sparring.world.bank import Beneficiary, Card, Customer, TopUp, Transaction, Transfer, World
from sparring.world.generate import (
    ATM_PLACES,
    CITIES,
    DIRECT_DEBITS,
    FIRST_NAMES,
    FOREIGN,
    LAST_NAMES,
    MERCHANTS,
    STREETS,
    iso,
    money,
    postcode,
)
from sparring.world.vocab import TOOLS

WALLETS: tuple[str, ...] = TOOLS["card_services"].params["wallet"].choices or ()

# intent -> (kind of fact, attributes). Kinds: card, transaction, transfer, top_up, beneficiary, profile.
PLANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "card_arrival": ("card", {"kind": "physical", "status": "ordered"}),
    "activate_my_card": ("card", {"kind": "physical", "status": "not_activated"}),
    "card_linking": ("card", {"kind": "physical", "linked_in_app": False}),
    "card_not_working": ("card", {"kind": "physical", "status": "frozen"}),
    "virtual_card_not_working": ("card", {"kind": "virtual", "status": "frozen"}),
    "lost_or_stolen_card": ("card", {"kind": "physical"}),
    "compromised_card": ("card", {"kind": "physical"}),
    "card_swallowed": ("card", {"kind": "physical"}),
    "change_pin": ("card", {"kind": "physical"}),
    "apple_pay_or_google_pay": ("card", {"kind": "physical"}),
    "pin_blocked": ("card", {"kind": "physical", "pin_blocked": True}),
    "contactless_not_working": ("card", {"kind": "physical", "contactless_enabled": False}),
    "card_about_to_expire": ("card", {"kind": "physical", "status": "expiring", "expiry": "03/25"}),
    "transaction_charged_twice": ("transaction", {"kind": "card_payment", "duplicate": True}),
    "card_payment_not_recognised": ("transaction", {"kind": "card_payment", "unrecognized": True}),
    "direct_debit_payment_not_recognised": ("transaction", {"kind": "direct_debit", "unrecognized": True}),
    "cash_withdrawal_not_recognised": ("transaction", {"kind": "atm_withdrawal", "unrecognized": True}),
    "card_payment_wrong_exchange_rate": ("transaction", {"kind": "card_payment", "foreign": True}),
    "wrong_exchange_rate_for_cash_withdrawal": ("transaction", {"kind": "atm_withdrawal", "foreign": True}),
    "wrong_amount_of_cash_received": ("transaction", {"kind": "atm_withdrawal", "short_cash": True}),
    "extra_charge_on_statement": ("transaction", {"kind": "card_payment"}),
    "request_refund": ("transaction", {"kind": "card_payment"}),
    "Refund_not_showing_up": ("transaction", {"kind": "refund", "status": "pending"}),
    "reverted_card_payment?": ("transaction", {"kind": "card_payment", "status": "reverted"}),
    "pending_cash_withdrawal": ("transaction", {"kind": "atm_withdrawal", "status": "pending"}),
    "declined_cash_withdrawal": ("transaction", {"kind": "atm_withdrawal", "status": "declined"}),
    "pending_card_payment": ("transaction", {"kind": "card_payment", "status": "pending"}),
    "declined_card_payment": ("transaction", {"kind": "card_payment", "status": "declined"}),
    "cancel_transfer": ("transfer", {"direction": "out", "status": "pending"}),
    "pending_transfer": ("transfer", {"direction": "out", "status": "pending"}),
    "transfer_not_received_by_recipient": ("transfer", {"direction": "out", "status": "completed"}),
    "failed_transfer": ("transfer", {"direction": "out", "status": "failed"}),
    "declined_transfer": ("transfer", {"direction": "out", "status": "declined"}),
    "balance_not_updated_after_bank_transfer": ("transfer", {"direction": "in", "status": "pending"}),
    "beneficiary_not_allowed": ("beneficiary", {"status": "pending_review"}),
    "pending_top_up": ("top_up", {"method": "card", "status": "pending"}),
    "top_up_reverted": ("top_up", {"method": "card", "status": "reverted"}),
    "top_up_failed": ("top_up", {"method": "card", "status": "failed"}),
    "verify_top_up": ("top_up", {"method": "card", "status": "awaiting_verification"}),
    "balance_not_updated_after_cheque_or_cash_deposit": ("top_up", {"method": None, "status": "pending"}),
    "unable_to_verify_identity": ("profile", {"id_verification": "failed"}),
    "verify_my_identity": ("profile", {"id_verification": "not_started"}),
}


def _new_last4(world: World, rng: random.Random) -> str:
    taken = {c.last4 for cu in world.customers.values() for c in cu.cards}
    taken |= {b.account_last4 for cu in world.customers.values() for b in cu.beneficiaries}
    while True:
        candidate = f"{rng.randrange(10000):04d}"
        if candidate not in taken:
            return candidate


def _new_name(cust: Customer, rng: random.Random) -> str:
    used = {cust.full_name} | {t.counterparty for t in cust.transfers} | {b.name for b in cust.beneficiaries}
    while True:
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        if name not in used:
            return name


def make_slots(intent: str, world: World, customer_id: str, rng: random.Random, opening: str = "") -> dict[str, Any]:
    """Choose the customer-known details of ``intent``'s problem for ``customer_id``. The ``opening`` (what the
    customer says first) is not read: banking's details are drawn apart from it."""
    cust = world.customers[customer_id]
    kind, attrs = PLANTS.get(intent, ("none", {}))
    slots: dict[str, Any] = {}
    if kind == "card":
        existing = [c for c in cust.cards if c.kind == attrs["kind"] and c.status == "active"]
        if attrs.get("status") in ("ordered", "not_activated") or not existing:
            last4 = _new_last4(world, rng)  # a new card (e.g. the replacement now in the post)
        else:
            last4 = existing[0].last4
        slots.update(card_kind=attrs["kind"], card_last4=last4)
    elif kind == "transaction":
        slots.update(_transaction_slots(cust, attrs, rng))
    elif kind == "transfer":
        slots.update(
            direction=attrs["direction"],
            counterparty=_new_name(cust, rng),
            amount=money(rng, 15, 600),
            currency="GBP",
            date=iso(rng.randint(0, 4)),
        )
    elif kind == "beneficiary":
        slots.update(beneficiary=_new_name(cust, rng), account_last4=_new_last4(world, rng))
    elif kind == "top_up":
        method = attrs["method"] or rng.choice(("cash", "cheque"))
        while True:  # unique (method, amount) so "my £40 card top-up" names one top-up
            amount = float(rng.randrange(20, 500, 10))
            if not any(t.method == method and t.amount == amount for t in cust.top_ups):
                break
        slots.update(method=method, amount=amount, currency="GBP", date=iso(rng.randint(0, 4)))
    if intent == "apple_pay_or_google_pay":
        slots["wallet"] = rng.choice(WALLETS)
    elif intent == "automatic_top_up":
        slots.update(threshold=float(rng.choice((20, 50, 100))), amount=float(rng.choice((50, 100, 200))))
    elif intent == "edit_personal_details":
        slots.update(_detail_slots(cust, rng))
    return slots


def _transaction_slots(cust: Customer, attrs: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    tkind = attrs["kind"]
    while True:
        if tkind == "atm_withdrawal":
            merchant, amount = f"ATM {rng.choice(ATM_PLACES)}", float(rng.randrange(40, 300, 10))
        else:
            pool = DIRECT_DEBITS if tkind == "direct_debit" else MERCHANTS
            merchant, amount = rng.choice(pool), money(rng, 5, 250)
        if not any(t.merchant == merchant and abs(t.amount - amount) < 0.005 for t in cust.transactions):
            break
    slots: dict[str, Any] = {
        "transaction_kind": tkind,
        "merchant": merchant,
        "amount": amount,
        "currency": "GBP",
        "date": iso(rng.randint(0, 6)),
    }
    if attrs.get("foreign"):
        cur = rng.choice(("EUR", "USD"))
        fair = FOREIGN[cur]
        charged = round(fair * (1 - rng.uniform(0.03, 0.08)), 4)  # a visibly worse rate than the fair one
        slots.update(
            original_currency=cur,
            original_amount=round(amount * charged, 2),
            charged_rate=charged,
            expected_rate=fair,
        )
    if attrs.get("short_cash"):
        slots["cash_received"] = amount - 20.0
    return slots


def _detail_slots(cust: Customer, rng: random.Random) -> dict[str, Any]:
    field = rng.choice(("address", "postcode", "email", "phone"))
    while True:
        if field == "address":
            value = f"{rng.randint(1, 180)} {rng.choice(STREETS)}, {rng.choice(CITIES)}"
        elif field == "postcode":
            value = postcode(rng)
        elif field == "email":
            first, last = cust.full_name.lower().split()
            value = f"{first}.{last}.{rng.randint(100, 999)}@example.org"
        else:
            value = f"+44 7{rng.randint(100, 999)} {rng.randint(100000, 999999)}"
        if value != getattr(cust, field):
            return {"field": field, "value": value}


def plant(world: World, customer_id: str, intent: str, slots: dict[str, Any], rng: random.Random) -> None:
    """Add ``intent``'s facts, described by ``slots``, to ``customer_id`` in ``world`` (in place).

    Over 60 lines: one branch per kind of planted object (card, payment, transfer, top-up, payee)."""
    cust = world.customers[customer_id]
    kind, attrs = PLANTS.get(intent, ("none", {}))
    physical = next((c.card_id for c in cust.cards if c.kind == "physical"), None)
    if kind == "card":
        card = next((c for c in cust.cards if c.last4 == slots["card_last4"]), None)
        if card is None:
            card = Card(world.random_id("card", rng), slots["card_kind"], "active", slots["card_last4"], "02/30")
            cust.cards.append(card)
        for key, value in attrs.items():
            if key != "kind":
                setattr(card, key, value)
    elif kind == "transaction":
        tkind = slots["transaction_kind"]
        copies = 2 if attrs.get("duplicate") else 1
        for i in range(copies):
            cust.transactions.append(
                Transaction(
                    transaction_id=world.random_id("tx", rng),
                    kind=tkind,
                    merchant=slots["merchant"],
                    amount=slots["amount"],
                    currency=slots["currency"],
                    date=slots["date"],
                    status=attrs.get("status", "posted"),
                    card_id=physical if tkind in ("card_payment", "atm_withdrawal") else None,
                    original_amount=slots.get("original_amount"),
                    original_currency=slots.get("original_currency"),
                    exchange_rate=slots.get("charged_rate"),
                    duplicate=i == 1,
                    unrecognized=bool(attrs.get("unrecognized")),
                )
            )
    elif kind == "transfer":
        ben_id = None
        if slots["direction"] == "out":
            ben_id = world.random_id("ben", rng)
            cust.beneficiaries.append(Beneficiary(ben_id, slots["counterparty"], _new_last4(world, rng)))
        cust.transfers.append(
            Transfer(
                world.random_id("tr", rng),
                slots["direction"],
                slots["counterparty"],
                slots["amount"],
                slots["currency"],
                slots["date"],
                attrs["status"],
                beneficiary_id=ben_id,
            )
        )
        if attrs["status"] == "failed":
            # A failed transfer's money came back; make sure a retry can be paid.
            cust.account.balance = round(max(cust.account.balance, slots["amount"] + 100.0), 2)
    elif kind == "beneficiary":
        cust.beneficiaries.append(
            Beneficiary(world.random_id("ben", rng), slots["beneficiary"], slots["account_last4"], attrs["status"])
        )
    elif kind == "top_up":
        cust.top_ups.append(
            TopUp(
                world.random_id("tu", rng),
                slots["method"],
                slots["amount"],
                slots["currency"],
                slots["date"],
                attrs["status"],
            )
        )
    elif kind == "profile":
        for key, value in attrs.items():
            setattr(cust, key, value)
