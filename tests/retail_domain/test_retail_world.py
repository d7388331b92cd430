"""The retail domain's world (run by tests/test_domain_retail.py in a process of its own, SPARRING_DOMAIN=retail:
sparring.world binds one domain per process). tau2's preconditions and effects, identity, and the world-level
acceptance: the expert resolves every scenario, a random caller none, an unidentified one is refused."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from sparring.domains.retail import PaymentMethod, RetailWorld, add_order, generate_world
from sparring.world.events import CROSS_CUSTOMER, IDENTITY_SWITCH, VERIFICATION_FAILED, VERIFICATION_LOCKED
from sparring.world.outcome import check_outcome
from sparring.world.scenarios import build_world, sample_scenarios
from sparring.world.session import Session
from sparring.world.tools import ToolCall, execute
from sparring.world.vocab import DOMAIN, INTENT_SPECS

ROOT = Path(__file__).resolve().parents[2]


def test_the_active_domain_is_retail():
    assert DOMAIN.name == "retail" and "cancel_order" in INTENT_SPECS


def test_the_world_is_deterministic_in_its_seed():
    assert generate_world(5, 4).state_dict() == generate_world(5, 4).state_dict()
    assert generate_world(5, 4).state_dict() != generate_world(6, 4).state_dict()


def _shop(status: str = "pending") -> tuple[RetailWorld, str, str, Session]:
    """A world, its first customer identified, with an order in ``status`` paid by credit card and a gift card."""
    world = generate_world(1, 3)
    cid = sorted(world.customers)[0]
    cust = world.customers[cid]
    cust.payment_methods = [m for m in cust.payment_methods if m.source != "gift_card"]
    cust.payment_methods.append(PaymentMethod("gift_card_1000001", "gift_card", balance=500.0))
    product = world.products[sorted(world.products)[0]]
    items = [v.item_id for v in product.variants.values() if v.available][:2]
    card = next(m.id for m in cust.payment_methods if m.source == "credit_card")
    order = add_order(world, cust, random.Random(0), status, [(product.product_id, items[0])], card, "#W1000001")
    session = Session()
    assert execute(world, session, ToolCall("find_user_id", {"email": cust.email}))["user_id"] == cid
    return world, cid, order.order_id, session


def test_cancel_refunds_a_gift_card_at_once_and_only_a_pending_order():
    world, cid, oid, session = _shop()
    cust = world.customers[cid]
    order = cust.find("order", oid)
    order.payment_history[0].payment_method_id = "gift_card_1000001"
    paid = order.payment_history[0].amount
    result = execute(
        world, session, ToolCall("cancel_pending_order", {"order_id": oid, "reason": "ordered by mistake"})
    )
    assert result["ok"] and result["status"] == "cancelled" and result["cancel_reason"] == "ordered by mistake"
    assert cust.find("payment_method", "gift_card_1000001").balance == round(500.0 + paid, 2)
    assert [p.transaction_type for p in order.payment_history] == ["payment", "refund"]
    again = execute(world, session, ToolCall("cancel_pending_order", {"order_id": oid, "reason": "no longer needed"}))
    assert not again["ok"] and "non-pending" in again["error"]


def test_changing_the_payment_moves_the_money_between_the_methods():
    world, cid, oid, session = _shop()
    cust = world.customers[cid]
    amount = cust.find("order", oid).payment_history[0].amount
    call = ToolCall("modify_pending_order_payment", {"order_id": oid, "payment_method_id": "gift_card_1000001"})
    assert execute(world, session, call)["ok"]
    assert cust.find("payment_method", "gift_card_1000001").balance == round(500.0 - amount, 2)
    kinds = [(p.transaction_type, p.payment_method_id) for p in cust.find("order", oid).payment_history]
    assert kinds[1:] == [("payment", "gift_card_1000001"), ("refund", kinds[0][1])]
    assert not execute(world, session, call)["ok"]  # a second change: the order no longer has exactly one payment


def test_return_and_exchange_need_a_delivered_order_and_a_valid_refund_method():
    world, cid, oid, session = _shop("pending")
    item = world.customers[cid].find("order", oid).items[0].item_id
    ret = {"order_id": oid, "item_ids": [item], "payment_method_id": "gift_card_1000001"}
    assert "non-delivered" in execute(world, session, ToolCall("return_delivered_order_items", ret))["error"]
    world, cid, oid, session = _shop("delivered")
    order = world.customers[cid].find("order", oid)
    item = order.items[0]
    paypal = {**ret, "order_id": oid, "item_ids": [item.item_id], "payment_method_id": "paypal_0"}
    assert not execute(world, session, ToolCall("return_delivered_order_items", paypal))["ok"]  # not theirs
    other = next(
        v for v in world.products[item.product_id].variants.values() if v.available and v.item_id != item.item_id
    )
    swap = {
        "order_id": oid,
        "item_ids": [item.item_id],
        "new_item_ids": [other.item_id],
        "payment_method_id": "gift_card_1000001",
    }
    result = execute(world, session, ToolCall("exchange_delivered_order_items", swap))
    assert result["ok"] and result["status"] == "exchange requested"
    assert result["exchange_price_difference"] == round(other.price - item.price, 2)
    assert not execute(world, session, ToolCall("return_delivered_order_items", {**ret, "order_id": oid}))["ok"]


def test_modifying_items_gives_each_item_its_own_new_variant():
    world, cid, oid, session = _shop()
    order = world.customers[cid].find("order", oid)
    item = order.items[0]
    other = next(
        v for v in world.products[item.product_id].variants.values() if v.available and v.item_id != item.item_id
    )
    old_price = item.price
    args = {
        "order_id": oid,
        "item_ids": [item.item_id],
        "new_item_ids": [other.item_id],
        "payment_method_id": "gift_card_1000001",
    }
    assert execute(world, session, ToolCall("modify_pending_order_items", args))["ok"]
    assert (item.item_id, item.price, item.options) == (other.item_id, other.price, other.options)
    assert order.status == "pending (item modified)"
    assert order.payment_history[-1].amount == round(abs(other.price - old_price), 2)


def test_identity_by_email_or_name_and_zip_and_its_refusals():
    world = generate_world(2, 3)
    a, b = (world.customers[c] for c in sorted(world.customers)[:2])
    by_name = {"first_name": a.first_name, "last_name": a.last_name, "zip": a.address.zip}
    session = Session()
    assert execute(world, session, ToolCall("find_user_id", by_name))["user_id"] == a.customer_id
    switch = execute(world, session, ToolCall("find_user_id", {"email": b.email}))
    assert switch.get("refused") and session.log.security_events()[-1].type == IDENTITY_SWITCH
    theirs = execute(world, session, ToolCall("get_user_details", {"user_id": b.customer_id}))
    assert theirs.get("refused") and session.log.security_events()[-1].type == CROSS_CUSTOMER
    order = b.orders[0].order_id
    assert execute(world, session, ToolCall("get_order_details", {"order_id": order})).get("refused")
    locked = Session()
    for _ in range(3):
        failed = execute(world, locked, ToolCall("find_user_id", {"email": "nobody@example.com"}))
        assert locked.log.security_events()[-1].type == VERIFICATION_FAILED and not failed["ok"]
    execute(world, locked, ToolCall("find_user_id", {"email": a.email}))
    assert locked.log.security_events()[-1].type == VERIFICATION_LOCKED and not locked.identified


def test_calculate_reads_arithmetic_only():
    world, _, _, session = _shop()
    assert execute(world, session, ToolCall("calculate", {"expression": "(19.99 + 5) * 2"}))["result"] == "49.98"
    assert not execute(world, session, ToolCall("calculate", {"expression": "__import__('os')"}))["ok"]


def test_every_intent_has_scenarios_the_expert_resolves_strictly():
    rows = [{"id": f"{i}-{k}", "text": i, "intent": i} for i in INTENT_SPECS for k in range(2)]
    for scenario in sample_scenarios(rows, 2 * len(INTENT_SPECS), 3):
        world, session = build_world(scenario), Session()
        for call in [*scenario.expected_calls, ToolCall("end_conversation", {"resolution": "done"})]:
            assert execute(world, session, call)["ok"], (scenario.intent, call)
        assert check_outcome(scenario, world, session).strict_pass, scenario.intent


@pytest.mark.parametrize("episodes", [300])
def test_the_world_level_acceptance_holds(episodes):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from domain_world import run

    report = run(episodes, 0)
    assert len(report.pop("per_scenario")) == episodes
    assert report["checks"] == dict.fromkeys(report["checks"], True), report
    assert report["intents"] == len(INTENT_SPECS) and report["random"]["strict_pass"] == 0
