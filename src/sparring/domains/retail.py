"""The retail domain's code (``module`` in retail.yaml): an online shop's state, its generator, each intent's
problem planted into a customer's orders; the expert that resolves it as an agent could is
:mod:`sparring.domains.retail_expert`.

The state is :mod:`sparring.domains.retail_state` (tau2's data model); the tools' effects are
:mod:`sparring.domains.retail_tools`.
"""

from __future__ import annotations

import itertools
import random
import re
from functools import cache
from typing import Any

from sparring.domains.retail_state import (
    COLLECTIONS,
    Address,
    Customer,
    Item,
    Order,
    Payment,
    PaymentMethod,
    Product,
    RetailWorld,
    Variant,
)
from sparring.domains.retail_tools import CANCEL_REASONS, HANDLERS, identify
from sparring.world.state import World, plain
from sparring.world.vocab import DOMAIN

__all__ = [
    "COLLECTIONS", "HANDLERS", "Customer", "RetailWorld", "generate_world", "identify", "identity_of",
    "make_slots", "plant",
]  # fmt: skip

ORDER_STATUSES = ("pending", "processed", "delivered", "cancelled")
# Which orders an intent's resolving call accepts (tau2's preconditions), and what the customer knows of it.
NEEDS_STATUS = {
    "cancel_order": "pending",
    "change_order_address": "pending",
    "change_order_payment": "pending",
    "change_order_items": "pending",
    "return_items": "delivered",
    "exchange_items": "delivered",
    "order_status": "processed",
}


# ------------------------------------------------------------------------------------------------ generator


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randrange(10 ** (n - 1), 10**n))


@cache
def catalogue() -> tuple[Product, ...]:
    """The shop's products, every combination of their options a variant; fixed for the domain (seeded by name)."""
    products = []
    for name, spec in sorted(DOMAIN.generator_data("products").items()):
        rng = random.Random(f"product:{name}")
        low, high = spec["price"]
        variants = {}
        for values in itertools.product(*spec["options"].values()):
            item_id = _digits(rng, 10)
            options = dict(zip(spec["options"], values, strict=True))
            variants[item_id] = Variant(item_id, options, rng.random() < 0.85, round(rng.uniform(low, high), 2))
        products.append(Product(_digits(rng, 10), name, variants))
    return tuple(products)


def _address(rng: random.Random) -> Address:
    city, state, zip3 = rng.choice(DOMAIN.generator_data("cities"))
    suite = rng.choice(("", f"Apt {rng.randint(1, 40)}", f"Suite {rng.randint(100, 999)}"))
    street = f"{rng.randint(1, 999)} {rng.choice(DOMAIN.generator_data('streets'))}"
    return Address(street, suite, city, state, "USA", f"{zip3}{rng.randint(0, 99):02d}")


def _customer(rng: random.Random, taken: set[str]) -> Customer:
    gen = DOMAIN.generator_data
    while True:
        first, last = rng.choice(gen("first_names")), rng.choice(gen("last_names"))
        user_id = f"{first.lower()}_{last.lower()}_{rng.randint(100, 9999)}"
        if user_id not in taken and not any(t.startswith(f"{first.lower()}_{last.lower()}_") for t in taken):
            break
    email = f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@{rng.choice(gen('email_domains'))}"
    cust = Customer(user_id, first, last, email, _address(rng))
    cust.payment_methods.append(
        PaymentMethod(f"credit_card_{_digits(rng, 7)}", "credit_card", rng.choice(gen("card_brands")), _digits(rng, 4))
    )
    if rng.random() < 0.5:
        cust.payment_methods.append(PaymentMethod(f"paypal_{_digits(rng, 7)}", "paypal"))
    if rng.random() < 0.5:
        cust.payment_methods.append(
            PaymentMethod(f"gift_card_{_digits(rng, 7)}", "gift_card", balance=float(rng.randint(0, 150)))
        )
    return cust


def _variant(rng: random.Random, product: Product) -> Variant:
    return rng.choice(list(product.variants.values()))


def add_order(world: RetailWorld, cust: Customer, rng: random.Random, status: str, lines: list[tuple[str, str]],
              method_id: str, order_id: str | None = None) -> Order:  # fmt: skip
    """An order of ``lines`` (product id, item id) in ``status``, paid in one payment by ``method_id``."""
    items = []
    for product_id, item_id in lines:
        product = world.products[product_id]
        variant = product.variants[item_id]
        items.append(Item(product.name, product_id, item_id, variant.price, dict(variant.options)))
    total = round(sum(i.price for i in items), 2)
    shipped = status in ("processed", "delivered")
    fulfillments = [{"tracking_id": [_digits(rng, 12)], "item_ids": [i.item_id for i in items]}] if shipped else []
    order = Order(
        order_id or _new_order_id(world, rng),
        Address(**plain(cust.address)),
        items,
        status,
        fulfillments,
        [Payment("payment", total, method_id)],
    )
    cust.orders.append(order)
    return order


def _new_order_id(world: World, rng: random.Random) -> str:
    taken = world.all_ids()
    while True:
        candidate = f"#W{_digits(rng, 7)}"
        if candidate not in taken:
            return candidate


def generate_world(seed: int, n_customers: int = 6) -> RetailWorld:
    """``n_customers`` customers, each with one to three payment methods and one to three past orders, and the
    shop's catalogue. Deterministic in ``seed``."""
    rng = random.Random(f"retail:{seed}")
    world = RetailWorld(seed, products={p.product_id: _copy(p) for p in catalogue()})
    products = sorted(world.products)
    for _ in range(n_customers):
        cust = _customer(rng, set(world.customers))
        world.customers[cust.customer_id] = cust
        for _ in range(rng.randint(1, 3)):
            picks = rng.sample(products, rng.randint(1, 3))
            lines = [(pid, _variant(rng, world.products[pid]).item_id) for pid in picks]
            method = rng.choice([m for m in cust.payment_methods if m.source != "gift_card"])
            add_order(world, cust, rng, rng.choice(ORDER_STATUSES), lines, method.id)
    return world


def _copy(product: Product) -> Product:
    variants = {k: Variant(v.item_id, dict(v.options), v.available, v.price) for k, v in product.variants.items()}
    return Product(product.product_id, product.name, variants)


def identity_of(world: World, customer_id: str) -> dict[str, str]:
    """What the customer can tell the agent to be found: their user id, name, email and zip code."""
    cust = world.customers[customer_id]
    return {
        "customer_id": cust.customer_id,
        "full_name": cust.full_name,
        "email": cust.email,
        "first_name": cust.first_name,
        "last_name": cust.last_name,
        "zip": cust.address.zip,
    }


# ------------------------------------------------------------------------------------------ slots and planting


def named_product(world: RetailWorld, opening: str) -> str | None:
    """The id of the catalogue product the customer's opening names first ("the lamp", "my running shoes"), if any:
    each product is named by its name's last word, singular or plural."""
    found = [
        (hit.start(), pid)
        for pid, product in world.products.items()
        if (hit := re.search(rf"\b{re.escape(product.name.lower().split()[-1].split('-')[-1].rstrip('s'))}s?\b",
                             opening.lower()))
    ]  # fmt: skip
    return min(found)[1] if found else None


def make_slots(
    intent: str, world: RetailWorld, customer_id: str, rng: random.Random, opening: str = ""
) -> dict[str, Any]:
    """What the customer knows of ``intent``'s problem: the order (its id, its items by product and options, its
    status) and what they want done to it, or the product, address or policy topic they ask about. A product the
    opening names is the one the problem is about (the order's first item, the one returned or changed, the one
    asked about), so what the customer says first and what the agent finds agree."""
    cust = world.customers[customer_id]
    slots: dict[str, Any] = {}
    named = named_product(world, opening)
    if intent in NEEDS_STATUS:
        picks = rng.sample(sorted(world.products), rng.randint(1, 3))
        if named is not None:  # the named product first, the others after it
            picks = [named, *(p for p in picks if p != named)][: max(1, len(picks))]
        lines = [(pid, _variant(rng, world.products[pid]).item_id) for pid in picks]
        slots.update(order_id=_new_order_id(world, rng), status=NEEDS_STATUS[intent])
        slots["items"] = [_described_item(world, pid, iid) for pid, iid in lines]  # as the customer names them
        slots["paid_with"] = rng.choice([m.source for m in cust.payment_methods if m.source != "gift_card"])
    if intent == "cancel_order":
        slots["reason"] = rng.choice(CANCEL_REASONS)
    elif intent == "return_items":
        slots["return"] = rng.sample(range(len(slots["items"])), rng.randint(1, len(slots["items"])))
        if named is not None and 0 not in slots["return"]:  # the named item is among those returned
            slots["return"] = sorted([0, *slots["return"]])
        slots["refund_to"] = rng.choice(("original", "gift_card"))
    elif intent in ("exchange_items", "change_order_items"):
        which = 0 if named is not None else rng.randrange(len(lines))
        pid, iid = lines[which]
        others = [v for v in world.products[pid].variants.values() if v.available and v.item_id != iid]
        slots.update(change=which, new_options=dict(rng.choice(others).options))
        slots["pay_with"] = rng.choice(("original", "gift_card"))
    elif intent == "change_order_payment":
        slots["pay_with"] = rng.choice([s for s in ("credit_card", "paypal", "gift_card") if s != slots["paid_with"]])
    elif intent in ("change_order_address", "change_default_address"):
        slots.update(plain(_address(rng)))
    elif intent == "product_availability":
        product = world.products[named if named is not None else rng.choice(sorted(world.products))]
        slots.update(product=product.name, options=dict(_variant(rng, product).options))
    return slots


def _described_item(world: RetailWorld, product_id: str, item_id: str) -> dict[str, Any]:
    product = world.products[product_id]
    return {"product": product.name, "options": dict(product.variants[item_id].options)}


def plant(world: RetailWorld, customer_id: str, intent: str, slots: dict[str, Any], rng: random.Random) -> None:
    """Put the scenario's order into the customer's account, and the payment methods its resolution needs: a gift
    card that can pay (a refund to, or a payment from, one), a PayPal account to switch to."""
    cust = world.customers[customer_id]
    if "order_id" not in slots:
        return
    method = _ensure_method(cust, slots["paid_with"], rng)
    lines = [_line_of(world, item) for item in slots["items"]]
    order = add_order(world, cust, rng, slots["status"], lines, method.id, slots["order_id"])
    wanted = {slots.get("refund_to"), slots.get("pay_with")} - {None, "original"}
    for source in sorted(wanted):
        new = _ensure_method(cust, source, rng)
        if new.source == "gift_card":
            new.balance = max(new.balance or 0.0, round(sum(i.price for i in order.items) + 200.0, 0))


def _line_of(world: RetailWorld, item: dict[str, Any]) -> tuple[str, str]:
    """(product id, item id) of the variant the customer names by product and options."""
    product = next(p for p in world.products.values() if p.name == item["product"])
    return product.product_id, next(v.item_id for v in product.variants.values() if v.options == item["options"])


def _ensure_method(cust: Customer, source: str, rng: random.Random) -> PaymentMethod:
    """The customer's first payment method of ``source``, added if they have none."""
    method = next((m for m in cust.payment_methods if m.source == source), None)
    if method is None:
        brand = rng.choice(DOMAIN.generator_data("card_brands")) if source == "credit_card" else None
        balance = 0.0 if source == "gift_card" else None
        method = PaymentMethod(
            f"{source}_{_digits(rng, 7)}", source, brand, _digits(rng, 4) if brand else None, balance
        )
        cust.payment_methods.append(method)
    return method
