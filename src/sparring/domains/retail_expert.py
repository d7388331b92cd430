"""The retail domain's expert: the calls that resolve a scenario, found the way an agent could find them (the
customer's words in ``scenario.slots``, matched against what the read tools return), never by peeking at the world."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparring.domains.retail_tools import ADDRESS_FIELDS
from sparring.world.session import Session
from sparring.world.tools import ToolCall, execute
from sparring.world.vocab import INTENT_SPECS

if TYPE_CHECKING:
    from sparring.domains.retail_state import RetailWorld
    from sparring.world.scenarios import Scenario


def lookup_call(identity: dict[str, str]) -> ToolCall:
    """The identifying call: the customer's email (tau2's default lookup)."""
    return ToolCall("find_user_id", {"email": identity["email"]})


def expert_calls(scenario: Scenario, world: RetailWorld) -> list[ToolCall]:
    """What a perfect agent calls for ``scenario`` from ``world`` (not modified): find the customer, read what the
    resolution needs (the order, the product's variants, the payment methods), then the resolving call. The ids it
    passes are read off those results, matched against what the customer said (``scenario.slots``)."""
    session, s, spec = Session(), scenario.slots, INTENT_SPECS[scenario.intent]
    calls: list[ToolCall] = []  # the reads made so far, in order

    def read(call: ToolCall) -> dict[str, Any]:
        result = execute(world, session, call)
        if not result["ok"]:
            raise ValueError(f"expert {call.name} failed for {scenario.scenario_id}: {result['error']}")
        calls.append(call)
        return result

    user_id = read(lookup_call(scenario.identity))["user_id"]
    if spec.tool == "policy_info":
        return [*calls, ToolCall("policy_info", {"topic": spec.action})]
    if spec.tool == "modify_user_address":
        return [*calls, ToolCall("modify_user_address", {"user_id": user_id, **_address_args(s)})]
    if spec.tool == "get_product_details":
        listing = read(ToolCall("list_all_product_types"))["products"]
        return [*calls, ToolCall("get_product_details", {"product_id": listing[s["product"]]})]
    order = read(ToolCall("get_order_details", {"order_id": s["order_id"]}))
    if spec.tool == "get_order_details":
        return calls
    args: dict[str, Any] = {"order_id": s["order_id"]}
    if spec.tool == "cancel_pending_order":
        args["reason"] = s["reason"]
    elif spec.tool == "modify_pending_order_address":
        args.update(_address_args(s))
    elif spec.tool == "return_delivered_order_items":
        args["item_ids"] = [_item_id(order, s["items"][i]) for i in sorted(s["return"])]
        args["payment_method_id"] = _method_id(read, user_id, order, s["refund_to"])
    elif spec.tool in ("exchange_delivered_order_items", "modify_pending_order_items"):
        old_id = _item_id(order, s["items"][s["change"]])
        old = next(i for i in order["items"] if i["item_id"] == old_id)
        product = read(ToolCall("get_product_details", {"product_id": old["product_id"]}))
        new = next(v for v in product["variants"].values() if v["options"] == s["new_options"])
        args.update(item_ids=[old["item_id"]], new_item_ids=[new["item_id"]])
        args["payment_method_id"] = _method_id(read, user_id, order, s["pay_with"])
    elif spec.tool == "modify_pending_order_payment":
        args["payment_method_id"] = _method_id(read, user_id, order, s["pay_with"])
    return [*calls, ToolCall(spec.tool, args)]


def _address_args(slots: dict[str, Any]) -> dict[str, str]:
    return {k: slots[k] for k in ADDRESS_FIELDS if slots[k]}  # an empty second line is left out


def _item_id(order: dict[str, Any], described: dict[str, Any]) -> str:
    hits = [
        i["item_id"]
        for i in order["items"]
        if i["name"] == described["product"] and i["options"] == described["options"]
    ]
    if len(hits) != 1:
        raise ValueError(f"{len(hits)} items of order {order['order_id']} match {described}; the expert needs one")
    return hits[0]


def _method_id(read: Any, user_id: str, order: dict[str, Any], which: str) -> str:
    """The payment method the customer named: the order's original one, or theirs of a kind (read off the user)."""
    if which == "original":
        return order["payment_history"][0]["payment_method_id"]
    methods = read(ToolCall("get_user_details", {"user_id": user_id}))["payment_methods"]
    return next(m["id"] for m in methods.values() if m["source"] == which)
