"""The banking domain's identity tool, ``lookup_account``: who the customer is, checked against the facts they give
(or the caller logged into the app), and the account view it returns."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sparring.world.bank import Customer, World, plain
from sparring.world.calls import Refusal, ToolError
from sparring.world.events import IDENTITY_SWITCH, VERIFICATION_FAILED, VERIFICATION_LOCKED
from sparring.world.session import MAX_VERIFICATION_FAILURES, Session
from sparring.world.vocab import DOMAIN

VERIFICATION_FACTS = DOMAIN.identity.facts
FACTS_NEEDED = DOMAIN.identity.facts_needed
# "two of date_of_birth, postcode, card_last4": how the refusals name what identifies a customer.
_NEEDED_WORD = dict(enumerate("zero one two three four five six".split())).get(FACTS_NEEDED, str(FACTS_NEEDED))
_FACTS_WANTED = f"{_NEEDED_WORD} of {', '.join(VERIFICATION_FACTS)}"


def _norm_name(s: str) -> str:
    return " ".join(s.split()).casefold()


def _norm_postcode(s: str) -> str:
    return "".join(s.split()).upper()


def _norm_date(s: str) -> str | None:
    s = " ".join(s.replace(",", " ").split())
    for fmt in (
        "%Y-%m-%d",
        "%d/%m/%Y",
        "%d-%m-%Y",
        "%d.%m.%Y",
        "%d %B %Y",
        "%d %b %Y",
        "%B %d %Y",
        "%b %d %Y",
    ):
        try:
            return datetime.strptime(s, fmt).date().isoformat()
        except ValueError:
            continue
    return None


def _fact_matches(cust: Customer, fact: str, value: str) -> bool:
    if fact == "date_of_birth":
        return _norm_date(value) == cust.date_of_birth
    if fact == "postcode":
        return _norm_postcode(value) == _norm_postcode(cust.postcode)
    return any(c.last4 == value.strip() for c in cust.cards)


def lookup_account(world: World, session: Session, a: dict[str, Any]) -> dict[str, Any]:
    """Identify the customer (binding the session) and return their account view (or the part ``show`` names)."""
    a = dict(a)
    show = a.pop("show", "all")
    return _part(_identify(world, session, a), show)


def _part(view: dict[str, Any], show: str) -> dict[str, Any]:
    """``show``'s part of an account view: its listing (or the profile and account) under the customer's name.

    A tab of ~150 tokens instead of the whole account (~600): what the agent reads stays near what it decided."""
    if show == "all":
        return view
    keys = ("profile", "account") if show == "profile" else (show,)
    return {"customer_id": view["customer_id"], "full_name": view["full_name"], **{k: view[k] for k in keys}}


def _identify(world: World, session: Session, a: dict[str, Any]) -> dict[str, Any]:
    if not a:
        # In-app verification: the chat runs in the logged-in caller's app session, so no typed facts are
        # needed; a knowledge check (arguments) stays for anyone else, and is what a social engineer must pass.
        session.customer_id = session.customer_id or session.caller_id
        if session.customer_id is None:
            raise ToolError(
                f"lookup_account needs customer_id or full_name, plus {_FACTS_WANTED} "
                "(no caller is logged into the app)"
            )
        return account_view(world.customers[session.customer_id])
    if session.verification_failures >= MAX_VERIFICATION_FAILURES:
        raise Refusal("too many failed verification attempts; transfer to a human", VERIFICATION_LOCKED)
    if "customer_id" not in a and "full_name" not in a:
        raise ToolError("lookup_account needs customer_id or full_name")
    facts = {k: a[k] for k in VERIFICATION_FACTS if k in a}
    if len(facts) < FACTS_NEEDED:
        raise ToolError(f"{_NEEDED_WORD} verification facts are needed: {_FACTS_WANTED}")
    by_id = world.customer(a["customer_id"].upper()) if "customer_id" in a else None
    by_name = None
    if "full_name" in a:
        by_name = next(
            (c for c in world.customers.values() if _norm_name(c.full_name) == _norm_name(a["full_name"])),
            None,
        )
    claimed = by_id if "customer_id" in a else by_name
    if claimed is not None and session.customer_id not in (None, claimed.customer_id):
        raise Refusal(
            "this conversation is already verified for another customer",
            IDENTITY_SWITCH,
            {"claimed": claimed.customer_id},
        )
    consistent = "customer_id" not in a or "full_name" not in a or by_id is by_name
    if claimed is None or not consistent or not all(_fact_matches(claimed, k, v) for k, v in facts.items()):
        raise Refusal(
            "verification failed: the details do not match our records",
            VERIFICATION_FAILED,
            {"customer_id": a.get("customer_id"), "facts": sorted(facts)},
        )
    session.customer_id = claimed.customer_id
    return account_view(claimed)


def account_view(cust: Customer) -> dict[str, Any]:
    """What the agent sees after identification (everything but the date of birth)."""
    return {
        "customer_id": cust.customer_id,
        "full_name": cust.full_name,
        "profile": {
            "address": cust.address,
            "postcode": cust.postcode,
            "email": cust.email,
            "phone": cust.phone,
            "id_verification": cust.id_verification,
            "source_of_funds": cust.source_of_funds,
            "app_access": cust.app_access,
            "passcode_reset_pending": cust.passcode_reset_pending,
            "auto_top_up": plain(cust.auto_top_up),
        },
        "account": plain(cust.account),
        "cards": [plain(c) for c in cust.cards],
        "transactions": [plain(t) for t in sorted(cust.transactions, key=lambda t: t.date, reverse=True)],
        "transfers": [plain(t) for t in cust.transfers],
        "top_ups": [plain(t) for t in cust.top_ups],
        "beneficiaries": [plain(b) for b in cust.beneficiaries],
        "cases": [plain(c) for c in cust.cases],
        "service_notes": list(cust.service_notes),
    }
