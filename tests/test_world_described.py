"""The "described" object reference: the object the customer's words identify, or a clear refusal."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from sparring.world.bank import Transaction, World, plain
from sparring.world.described import DESCRIBED, mentions
from sparring.world.generate import generate_world
from sparring.world.handlers import case_queue
from sparring.world.session import Session
from sparring.world.tools import ToolCall, execute


@pytest.fixture
def world() -> World:
    return generate_world(seed=11, n_customers=3)


def _identified(world: World) -> tuple[str, Session]:
    cid = sorted(world.customers)[0]
    session = Session(caller_id=cid)
    assert execute(world, session, ToolCall("lookup_account", {"show": "transactions"}))["ok"]
    return cid, session


def _dispute(tx: Transaction, reason: str) -> dict[str, str]:
    """A dispute's reason and the case queue of ``tx`` (what payment_details would have shown)."""
    return {"reason": reason, "case_queue": case_queue(tx.transaction_id)}


def _card_payment(world: World, cid: str) -> Transaction:
    return next(t for t in world.customers[cid].transactions if t.kind == "card_payment")


def test_described_acts_on_the_object_the_customer_named_as_its_id_would(world):
    cid, session = _identified(world)
    tx = _card_payment(world, cid)
    by_id, by_id_session = copy.deepcopy(world), copy.deepcopy(session)
    turn = session.log.add_turn("customer", f"It is the {tx.amount:.2f} GBP card payment at {tx.merchant}, not mine.")
    result = execute(
        world, session, ToolCall("dispute_charge", {"transaction_id": DESCRIBED, **_dispute(tx, "not_recognised")})
    )
    assert result["ok"] and result["transaction"]["transaction_id"] == tx.transaction_id
    assert execute(
        by_id,
        by_id_session,
        ToolCall("dispute_charge", {"transaction_id": tx.transaction_id, **_dispute(tx, "not_recognised")}),
    )["ok"]
    assert plain(world.customers[cid]) == plain(by_id.customers[cid])
    source = session.log.tool_calls()[-1].provenance["transaction_id"].source
    assert source.kind == "described" and source.event_index == turn.index  # IAPO's edge: the message -> the call


def test_without_a_description_the_call_fails_and_changes_nothing(world):
    cid, session = _identified(world)
    before = plain(world.customers[cid])
    session.log.add_turn("customer", "There is a payment I do not recognise.")  # no merchant, no amount
    args = {"transaction_id": DESCRIBED, "reason": "not_recognised", "case_queue": "merchant_team"}
    result = execute(world, session, ToolCall("dispute_charge", args))
    assert not result["ok"] and "has not described a transaction" in result["error"]
    assert plain(world.customers[cid]) == before
    assert session.log.tool_calls()[-1].unexplained_args() == ["transaction_id"]


def test_two_fitting_objects_are_refused_unless_one_is_the_flagged_duplicate(world):
    cid, session = _identified(world)
    cust = world.customers[cid]
    tx = _card_payment(world, cid)
    twin = replace(tx, transaction_id="tx_twin")
    cust.transactions.append(twin)
    session.log.add_turn("customer", f"The {tx.amount:.2f} payment at {tx.merchant} shows up twice.")
    call = ToolCall("dispute_charge", {"transaction_id": DESCRIBED, **_dispute(twin, "duplicate")})
    result = execute(world, session, call)
    assert not result["ok"] and "fit 2 transactions" in result["error"]
    world.customers[cid].find("transaction", "tx_twin").duplicate = True  # a failed call restores a copy
    result = execute(world, session, call)
    assert result["ok"] and result["transaction"]["transaction_id"] == "tx_twin"


def test_the_latest_describing_message_decides(world):
    cid, session = _identified(world)
    first, second = [t for t in world.customers[cid].transactions if t.kind == "card_payment"][:2]
    session.log.add_turn("customer", f"It is the {first.amount:.2f} charge at {first.merchant}.")
    session.log.add_turn("customer", f"Sorry, no: the {second.amount:.2f} one at {second.merchant}.")
    result = execute(
        world, session, ToolCall("dispute_charge", {"transaction_id": DESCRIBED, **_dispute(second, "not_recognised")})
    )
    assert result["ok"] and result["transaction"]["transaction_id"] == second.transaction_id


def test_a_card_is_named_by_its_kind_and_ending_together(world):
    card = plain(world.customers[sorted(world.customers)[0]].cards[0])
    assert mentions("card", card, f"It is about my {card['kind']} card ending {card['last4']}.")
    assert mentions("card", card, f"my {card['kind']} card ending in {card['last4']}")
    # The identity answer's "card ending" names no card: it proves who the caller is.
    assert not mentions("card", card, f"customer id C000001, and my card ending {card['last4']}.")
    assert not mentions("card", card, f"my {card['kind']} card ending 0000")


def test_described_never_reaches_another_customers_objects(world):
    cid, session = _identified(world)
    other = next(c for c in sorted(world.customers) if c != cid)
    tx = _card_payment(world, other)
    before = plain(world.customers[other])
    session.log.add_turn("customer", f"It is the {tx.amount:.2f} GBP card payment at {tx.merchant}.")
    args = {"transaction_id": DESCRIBED, **_dispute(tx, "not_recognised")}
    result = execute(world, session, ToolCall("dispute_charge", args))
    if result["ok"]:  # the caller may own a look-alike payment; it must be theirs, never the other customer's
        assert world.customers[cid].find("transaction", result["transaction"]["transaction_id"]) is not None
    assert plain(world.customers[other]) == before
