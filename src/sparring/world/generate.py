"""Deterministic random generation of ordinary bank customers (no scenario-specific facts).

Everything is drawn from one ``random.Random(seed)``, so a seed fully determines the world.
Background customers are deliberately unremarkable (posted payments, completed transfers, active
cards) so that the facts a scenario plants are the only anomalies an agent has to find.
"""

from __future__ import annotations

import pickle
import random
from datetime import date, timedelta
from functools import lru_cache

from sparring.world.bank import (
    Account,
    Beneficiary,
    Card,
    Customer,
    TopUp,
    Transaction,
    Transfer,
    World,
    short_id,
)
from sparring.world.vocab import DOMAIN

BASE_DATE = DOMAIN.today  # "today" in the simulated world

# The names, places and merchants ordinary customers are drawn from: the domain file's generator section.
FIRST_NAMES: list[str] = list(DOMAIN.generator_data("first_names"))
LAST_NAMES: list[str] = list(DOMAIN.generator_data("last_names"))
STREETS: tuple[str, ...] = tuple(DOMAIN.generator_data("streets"))
CITIES: tuple[str, ...] = tuple(DOMAIN.generator_data("cities"))
MERCHANTS: tuple[str, ...] = tuple(DOMAIN.generator_data("merchants"))
DIRECT_DEBITS: tuple[str, ...] = tuple(DOMAIN.generator_data("direct_debits"))
ATM_PLACES: tuple[str, ...] = tuple(DOMAIN.generator_data("atm_places"))
FOREIGN: dict[str, float] = dict(DOMAIN.generator_data("foreign_rates"))  # units per GBP


def iso(days_ago: int) -> str:
    return (BASE_DATE - timedelta(days=days_ago)).isoformat()


def money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


class IdPool:
    """Unique random ids and card numbers for one world under construction."""

    def __init__(self, rng: random.Random, taken: set[str] | None = None):
        self.rng = rng
        self.taken: set[str] = set(taken or ())

    def new(self, prefix: str) -> str:
        while True:
            candidate = short_id(prefix, self.rng)
            if candidate not in self.taken:
                self.taken.add(candidate)
                return candidate

    def digits(self, prefix: str, n: int) -> str:
        while True:
            candidate = f"{prefix}{self.rng.randrange(10**n):0{n}d}"
            if candidate not in self.taken:
                self.taken.add(candidate)
                return candidate

    def last4(self) -> str:
        # Card numbers are unique across the world so "the card ending 1234" names exactly one card.
        return self.digits("", 4)


def postcode(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPRSTUWXY"
    return (
        f"{rng.choice(letters)}{rng.choice(letters)}{rng.randint(1, 29)} "
        f"{rng.randint(1, 9)}{rng.choice(letters)}{rng.choice(letters)}"
    )


def new_card(ids: IdPool, rng: random.Random, kind: str, status: str = "active") -> Card:
    expiry = f"{rng.randint(1, 12):02d}/{rng.randint(26, 29)}"
    return Card(card_id=ids.new("card"), kind=kind, status=status, last4=ids.last4(), expiry=expiry)


def _customer(ids: IdPool, rng: random.Random, used_names: set[str]) -> Customer:
    """One generated customer, with a name no other customer has.

    Over 60 lines: every account object in turn."""
    while True:
        full_name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        if full_name not in used_names:
            used_names.add(full_name)
            break
    first, last = full_name.lower().split()
    dob = date(1950, 1, 1) + timedelta(days=rng.randrange(365 * 55))
    account = Account(account_id=ids.digits("ACC", 8), currency="GBP", balance=money(rng, 40, 6000))
    cust = Customer(
        customer_id=ids.digits("C", 6),
        full_name=full_name,
        date_of_birth=dob.isoformat(),
        postcode=postcode(rng),
        address=f"{rng.randint(1, 180)} {rng.choice(STREETS)}, {rng.choice(CITIES)}",
        email=f"{first}.{last}{rng.randint(1, 99)}@example.com",
        phone=f"+44 7{rng.randint(100, 999)} {rng.randint(100000, 999999)}",
        account=account,
    )
    physical = new_card(ids, rng, "physical")
    cust.cards.append(physical)
    if rng.random() < 0.5:
        cust.cards.append(new_card(ids, rng, "virtual"))
    for _ in range(rng.randint(5, 9)):
        roll = rng.random()
        if roll < 0.7:
            kind, merchant, low, high = "card_payment", rng.choice(MERCHANTS), 2, 180
        elif roll < 0.85:
            kind, merchant, low, high = "direct_debit", rng.choice(DIRECT_DEBITS), 10, 120
        else:
            kind, merchant, low, high = "atm_withdrawal", f"ATM {rng.choice(ATM_PLACES)}", 10, 200
        cust.transactions.append(
            Transaction(
                transaction_id=ids.new("tx"),
                kind=kind,
                merchant=merchant,
                amount=float(rng.randrange(low, high, 10)) if kind == "atm_withdrawal" else money(rng, low, high),
                currency="GBP",
                date=iso(rng.randint(3, 40)),
                card_id=None if kind == "direct_debit" else physical.card_id,
            )
        )
    for _ in range(rng.randint(1, 3)):
        ben = Beneficiary(ids.new("ben"), _other_name(rng, full_name), ids.digits("", 4))
        cust.beneficiaries.append(ben)
        cust.transfers.append(
            Transfer(
                ids.new("tr"),
                "out",
                ben.name,
                money(rng, 10, 400),
                "GBP",
                iso(rng.randint(3, 40)),
                "completed",
                beneficiary_id=ben.beneficiary_id,
            )
        )
    if rng.random() < 0.6:
        cust.transfers.append(
            Transfer(
                ids.new("tr"),
                "in",
                _other_name(rng, full_name),
                money(rng, 20, 900),
                "GBP",
                iso(rng.randint(3, 40)),
                "completed",
            )
        )
    for _ in range(rng.randint(1, 2)):
        cust.top_ups.append(
            TopUp(
                ids.new("tu"),
                rng.choice(("card", "bank_transfer")),
                float(rng.randrange(20, 300, 10)),
                "GBP",
                iso(rng.randint(3, 40)),
                "completed",
            )
        )
    return cust


def _other_name(rng: random.Random, not_this: str) -> str:
    while True:
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        if name != not_this:
            return name


def generate_world(seed: int, n_customers: int = 6) -> World:
    """Build the world for ``seed`` with ``n_customers`` customers (at least 2, so there is someone else)."""
    if not isinstance(n_customers, int) or n_customers < 2:
        raise ValueError(f"n_customers must be an int >= 2, got {n_customers!r}")
    # Scenario worlds are rebuilt several times (sampling, rollout, outcome check): cache the pickle.
    return pickle.loads(_generated(seed, n_customers))


@lru_cache(maxsize=512)
def _generated(seed: int, n_customers: int) -> bytes:
    return pickle.dumps(_build(seed, n_customers), protocol=pickle.HIGHEST_PROTOCOL)


def _build(seed: int, n_customers: int) -> World:
    rng = random.Random(seed)
    ids = IdPool(rng)
    used_names: set[str] = set()
    world = World(seed=seed)
    for _ in range(n_customers):
        cust = _customer(ids, rng, used_names)
        world.customers[cust.customer_id] = cust
    return world
