"""The banking domain's account-level tools. Each handler gets validated arguments and the identified customer.

Handlers check every precondition before changing anything, so a failed call leaves the world as it
was. They reach objects only through :meth:`~sparring.world.calls.Ctx.get`, which refuses objects of other
customers.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sparring.world.bank import Card, Case, plain
from sparring.world.calls import Ctx, Refusal, ToolError, require
from sparring.world.catalog import DECLINE_EXPLANATIONS
from sparring.world.vocab import QUEUE, TOOLS

__all__ = ["HANDLERS", "Ctx", "Refusal", "ToolError", "case_queue", "require"]  # the shared parts, re-exported

CASE_QUEUES: tuple[str, ...] = TOOLS["dispute_charge"].params[QUEUE].choices or ()


def case_queue(object_id: str) -> str:
    """The team that handles cases on a payment: fixed per object, shown only by ``payment_details``."""
    return CASE_QUEUES[int(hashlib.sha1(f"queue:{object_id}".encode()).hexdigest(), 16) % len(CASE_QUEUES)]


def require_queue(obj_id: str, quoted: str) -> None:
    """A dispute, cancel, trace or retry must quote the payment's own case queue (issue 28's dependent read)."""
    require(
        quoted == case_queue(obj_id),
        f"cases on {obj_id} are not handled by {quoted}; read its case_queue with payment_details",
    )


def payment_details(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    kind = a["kind"]
    obj = ctx.get(kind, a[f"{kind}_id"])
    return {kind: view(obj), QUEUE: case_queue(getattr(obj, f"{kind}_id"))}


def view(obj: Any) -> dict[str, Any]:
    return plain(obj)


def issue_card(ctx: Ctx, kind: str, replacing: Card | None = None) -> Card:
    """Create a new card; physical cards start as ``ordered``, virtual and disposable ones as ``active``."""
    cust = ctx.cust
    card_id = ctx.world.derived_id("card", cust.customer_id, kind, str(len(cust.cards)))
    taken = {c.last4 for cu in ctx.world.customers.values() for c in cu.cards}
    n = int(hashlib.sha1(card_id.encode()).hexdigest(), 16)
    while f"{n % 10000:04d}" in taken:
        n += 1
    card = Card(
        card_id=card_id,
        kind=kind,
        status="ordered" if kind == "physical" else "active",
        last4=f"{n % 10000:04d}",
        expiry="03/30",
    )
    if replacing is not None:
        replacing.replaced_by = card_id
    cust.cards.append(card)
    return card


_DEAD = ("lost", "blocked", "replaced")
_CARD_INFO = ("delivery_info", "acceptance_info", "disposable_limits_info")


def card_services(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    action = a["action"]
    if action in _CARD_INFO:
        return ctx.info(action)
    if action == "order_card":
        return {"new_card": view(issue_card(ctx, a["kind"]))}
    card: Card = ctx.get("card", a["card_id"])
    out: dict[str, Any] = {}
    if action == "track_delivery":
        require(card.status == "ordered", f"card is not on its way (status {card.status})")
        require(not card.delivery_traced, "a delivery trace is already open for this card")
        card.delivery_traced = True
    elif action == "link_card":
        require(card.status not in _DEAD, f"card is {card.status}")
        require(not card.linked_in_app, "card is already linked in the app")
        card.linked_in_app = True
    elif action == "freeze":
        require(card.status == "active", f"only active cards can be frozen (status {card.status})")
        card.status = "frozen"
    elif action == "unfreeze":
        require(card.status == "frozen", f"card is not frozen (status {card.status})")
        card.status = "active"
    elif action in ("report_lost", "report_compromised", "replace"):
        allowed = ("active", "frozen", "expiring") + (() if action == "replace" else ("not_activated", "ordered"))
        require(card.status in allowed, f"cannot {action.replace('_', ' ')} a card that is {card.status}")
        card.status = {"report_lost": "lost", "report_compromised": "blocked", "replace": "replaced"}[action]
        out["new_card"] = view(issue_card(ctx, card.kind, replacing=card))
    elif action == "unblock_pin":
        require(card.status not in _DEAD, f"card is {card.status}")
        require(card.pin_blocked, "the PIN is not blocked")
        card.pin_blocked = False
    elif action == "change_pin":
        require(card.status == "active", f"only active cards can change PIN (status {card.status})")
        require(not card.pin_blocked, "the PIN is blocked; unblock it first")
        card.pin_changes += 1
    elif action == "enable_contactless":
        require(card.kind == "physical", "only physical cards have contactless")
        require(card.status == "active", f"card is not active (status {card.status})")
        require(not card.contactless_enabled, "contactless is already enabled")
        card.contactless_enabled = True
    elif action == "activate":
        require(card.status in ("not_activated", "ordered"), f"card cannot be activated (status {card.status})")
        card.status = "active"
    elif action == "add_to_wallet":
        require(card.status == "active", f"card is not active (status {card.status})")
        require(card.kind != "disposable", "disposable cards cannot be added to a wallet")
        require(a["wallet"] not in card.wallets, f"card is already in {a['wallet']}")
        card.wallets = sorted([*card.wallets, a["wallet"]])
    else:  # pragma: no cover - the validator only lets vocabulary actions through
        raise ToolError(f"unknown action {action!r}")
    return {"card": view(card), **out}


def dispute_charge(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    tx = ctx.get("transaction", a["transaction_id"])
    reason = a["reason"]
    require_queue(tx.transaction_id, a[QUEUE])
    require(not tx.disputed, "this transaction is already disputed")
    require(tx.status != "declined", "declined transactions were never charged")
    if reason == "wrong_cash_amount":
        require(tx.kind == "atm_withdrawal", "wrong_cash_amount applies to ATM withdrawals only")
    elif reason == "refund_missing":
        require(tx.kind == "refund", "refund_missing applies to refunds only")
    else:
        require(tx.kind != "refund", "refunds cannot be disputed for this reason")
    if reason == "wrong_exchange_rate":
        require(tx.original_currency is not None, "not a foreign-currency transaction")
    elif reason == "reverted_payment":
        require(tx.status == "reverted", "this payment was not reverted")
    elif reason == "duplicate":
        twins = [
            t
            for t in ctx.cust.transactions
            if t is not tx and t.merchant == tx.merchant and abs(t.amount - tx.amount) < 0.005
        ]
        require(bool(twins), "no other transaction with the same merchant and amount")
    tx.disputed = True
    case = Case(ctx.world.derived_id("case", tx.transaction_id, reason), "dispute", tx.transaction_id, reason)
    ctx.cust.cases.append(case)
    return {"transaction": view(tx), "case": view(case)}


def transfer_support(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    action = a["action"]
    if action in ("timing_info", "account_details_info"):
        out = ctx.info(action)
        if action == "account_details_info":
            out["info"]["account_number"] = ctx.cust.account.account_id
        return out
    if action == "approve_beneficiary":
        ben = ctx.get("beneficiary", a["beneficiary_id"])
        require(ben.status != "blocked", "this beneficiary is blocked for security reasons; a human must review")
        require(ben.status == "pending_review", "this beneficiary is already allowed")
        ben.status = "allowed"
        return {"beneficiary": view(ben)}
    tr = ctx.get("transfer", a["transfer_id"])
    if QUEUE in a:
        require_queue(tr.transfer_id, a[QUEUE])
    require(tr.direction == "out", "only outgoing transfers can be handled here")
    if action == "cancel":
        require(tr.status == "pending", f"only pending transfers can be cancelled (status {tr.status})")
        tr.status = "cancelled"
        ctx.cust.account.balance = round(ctx.cust.account.balance + tr.amount, 2)
    elif action == "trace":
        require(tr.status in ("pending", "completed"), f"cannot trace a {tr.status} transfer")
        require(not tr.trace_opened, "a trace is already open for this transfer")
        tr.trace_opened = True
    elif action == "retry":
        require(tr.status == "failed", f"only failed transfers can be retried (status {tr.status})")
        require(ctx.cust.account.balance >= tr.amount, "insufficient balance to retry the transfer")
        tr.status, tr.retries = "pending", tr.retries + 1
        ctx.cust.account.balance = round(ctx.cust.account.balance - tr.amount, 2)
    elif action == "explain_decline":
        require(tr.status == "declined", f"transfer was not declined (status {tr.status})")
        out = ctx.info(action, tr.transfer_id)
        out["info"] = {"explanation": DECLINE_EXPLANATIONS["transfer"]}
        return {"transfer": view(tr), **out}
    else:  # pragma: no cover
        raise ToolError(f"unknown action {action!r}")
    return {"transfer": view(tr), "balance": ctx.cust.account.balance}


def top_up_support(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    action = a["action"]
    if action in ("limits_info", "card_top_up_info", "cash_cheque_info"):
        return ctx.info(action)
    if action == "configure_auto":
        threshold, amount = a["threshold"], a["amount"]
        require(0 <= threshold <= 10000, "threshold must be between 0 and 10000")
        require(10 <= amount <= 1000, "automatic top-up amount must be between 10 and 1000")
        auto = ctx.cust.auto_top_up
        auto.enabled, auto.threshold, auto.amount = True, float(threshold), float(amount)
        return {"auto_top_up": view(auto)}
    tu = ctx.get("top_up", a["top_up_id"])
    if action == "trace":
        require(tu.status in ("pending", "reverted"), f"cannot trace a {tu.status} top-up")
        require(not tu.trace_opened, "a trace is already open for this top-up")
        tu.trace_opened = True
    elif action == "retry":
        require(tu.status == "failed", f"only failed top-ups can be retried (status {tu.status})")
        tu.status, tu.retries = "pending", tu.retries + 1
    elif action == "verify":
        require(tu.status == "awaiting_verification", f"top-up does not need verification (status {tu.status})")
        tu.status = "completed"
        ctx.cust.account.balance = round(ctx.cust.account.balance + tu.amount, 2)
    else:  # pragma: no cover
        raise ToolError(f"unknown action {action!r}")
    return {"top_up": view(tu), "balance": ctx.cust.account.balance}


def cash_services(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    action = a["action"]
    if action == "atm_info":
        return ctx.info(action)
    if action == "report_retained":
        card: Card = ctx.get("card", a["card_id"])
        require(card.kind == "physical", "only physical cards can be retained by an ATM")
        require(card.status in ("active", "frozen"), f"card is {card.status}")
        card.status = "blocked"
        new = issue_card(ctx, "physical", replacing=card)
        return {"card": view(card), "new_card": view(new)}
    tx = ctx.get("transaction", a["transaction_id"])
    require(tx.kind == "atm_withdrawal", "not an ATM withdrawal")
    if action == "trace_withdrawal":
        require(tx.status == "pending", f"withdrawal is not pending (status {tx.status})")
        require(not tx.trace_opened, "a trace is already open for this withdrawal")
        tx.trace_opened = True
        return {"transaction": view(tx)}
    if action == "explain_decline":
        require(tx.status == "declined", f"withdrawal was not declined (status {tx.status})")
        out = ctx.info(action, tx.transaction_id)
        out["info"] = {"explanation": DECLINE_EXPLANATIONS["cash"]}
        return {"transaction": view(tx), **out}
    raise ToolError(f"unknown action {action!r}")  # pragma: no cover


def identity_verification(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    action, cust = a["action"], ctx.cust
    if action in ("age_policy_info", "why_verify_info"):
        return ctx.info(action)
    if action == "start_verification":
        require(cust.id_verification != "failed", "the last verification failed; request a manual review")
        require(cust.id_verification == "not_started", f"verification is already {cust.id_verification}")
        cust.id_verification = "pending"
    elif action == "manual_review":
        require(cust.id_verification == "failed", f"no failed verification to review ({cust.id_verification})")
        cust.id_verification = "in_review"
    elif action == "request_source_of_funds":
        require(cust.source_of_funds == "not_requested", "source of funds was already requested")
        cust.source_of_funds = "requested"
    return {"id_verification": cust.id_verification, "source_of_funds": cust.source_of_funds}


def _valid_detail(name: str, value: str) -> bool:
    if name == "email":
        return "@" in value and "." in value.split("@")[-1] and " " not in value
    if name == "phone":
        return sum(ch.isdigit() for ch in value) >= 7
    if name == "postcode":
        return 5 <= len(value.replace(" ", "")) <= 8 and value.replace(" ", "").isalnum()
    return len(value) >= 5  # address


def account_settings(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    action, cust = a["action"], ctx.cust
    if action == "update":
        name, value = a["field"], a["value"]
        require(_valid_detail(name, value), f"{value!r} is not a valid {name}")
        require(getattr(cust, name) != value, f"{name} is already {value!r}")
        setattr(cust, name, value)
        return {"updated": {name: value}}
    if action == "reset_passcode":
        require(not cust.passcode_reset_pending, "a passcode reset is already pending")
        cust.passcode_reset_pending = True
    elif action == "lock_app_access":
        require(cust.app_access == "active", "app access is already locked")
        cust.app_access = "locked"
    elif action == "close_account":
        require(cust.account.status == "open", "the account is already closed")
        cust.account.status = "closed"
    return {
        "app_access": cust.app_access,
        "passcode_reset_pending": cust.passcode_reset_pending,
        "account_status": cust.account.status,
    }


def fees_and_rates(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    return ctx.info(a["topic"])


HANDLERS = {
    "card_services": card_services,
    "dispute_charge": dispute_charge,
    "payment_details": payment_details,
    "transfer_support": transfer_support,
    "top_up_support": top_up_support,
    "cash_services": cash_services,
    "identity_verification": identity_verification,
    "account_settings": account_settings,
    "fees_and_rates": fees_and_rates,
}
