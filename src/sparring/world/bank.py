"""The banking domain's state: customers, their account, cards, transactions, transfers, top-ups.

The state is plain dataclasses so it deep-copies cheaply and serialises canonically through
:meth:`Customer.state_dict`, which the outcome check compares (by :class:`sparring.world.state.World`). Session
logs live elsewhere (:mod:`sparring.world.session`), so the state holds only facts about the bank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from sparring.world.state import Owner, World, plain, short_id

__all__ = ["COLLECTIONS", "World", "plain", "short_id"]  # World and plain: re-exported where they were always read

CARD_STATUSES = ("active", "frozen", "blocked", "lost", "expiring", "not_activated", "ordered", "replaced")
TX_KINDS = ("card_payment", "atm_withdrawal", "direct_debit", "refund")
TX_STATUSES = ("posted", "pending", "declined", "reverted")
TRANSFER_STATUSES = ("pending", "failed", "declined", "completed", "cancelled")
TOP_UP_METHODS = ("card", "bank_transfer", "cash", "cheque")
TOP_UP_STATUSES = ("pending", "failed", "reverted", "completed", "awaiting_verification")
BENEFICIARY_STATUSES = ("allowed", "pending_review", "blocked")
ID_VERIFICATION_STATUSES = ("verified", "not_started", "pending", "failed", "in_review")

# kind -> (attribute on Customer, id attribute on the object)
COLLECTIONS: dict[str, tuple[str, str]] = {
    "card": ("cards", "card_id"),
    "transaction": ("transactions", "transaction_id"),
    "transfer": ("transfers", "transfer_id"),
    "top_up": ("top_ups", "top_up_id"),
    "beneficiary": ("beneficiaries", "beneficiary_id"),
    "case": ("cases", "case_id"),
}


@dataclass
class Card:
    card_id: str
    kind: str  # physical | virtual | disposable
    status: str  # one of CARD_STATUSES
    last4: str
    expiry: str  # MM/YY
    pin_blocked: bool = False
    contactless_enabled: bool = True
    linked_in_app: bool = True
    wallets: list[str] = field(default_factory=list)
    delivery_traced: bool = False
    pin_changes: int = 0
    replaced_by: str | None = None


@dataclass
class Transaction:
    transaction_id: str
    kind: str  # one of TX_KINDS
    merchant: str
    amount: float  # in the account currency; refunds are credits, everything else a debit
    currency: str
    date: str
    status: str = "posted"
    card_id: str | None = None
    original_amount: float | None = None  # set for foreign-currency transactions
    original_currency: str | None = None
    exchange_rate: float | None = None
    duplicate: bool = False
    unrecognized: bool = False
    disputed: bool = False
    trace_opened: bool = False


@dataclass
class Transfer:
    transfer_id: str
    direction: str  # out | in
    counterparty: str
    amount: float
    currency: str
    date: str
    status: str
    beneficiary_id: str | None = None
    trace_opened: bool = False
    retries: int = 0


@dataclass
class TopUp:
    top_up_id: str
    method: str  # one of TOP_UP_METHODS
    amount: float
    currency: str
    date: str
    status: str
    trace_opened: bool = False
    retries: int = 0


@dataclass
class Beneficiary:
    beneficiary_id: str
    name: str
    account_last4: str
    status: str = "allowed"


@dataclass
class Case:
    case_id: str
    kind: str  # dispute
    target_id: str
    reason: str
    status: str = "open"


@dataclass
class Account:
    account_id: str
    currency: str
    balance: float
    status: str = "open"


@dataclass
class AutoTopUp:
    enabled: bool = False
    threshold: float | None = None
    amount: float | None = None


@dataclass
class Customer(Owner):
    COLLECTIONS: ClassVar[dict[str, tuple[str, str]]] = COLLECTIONS

    customer_id: str
    full_name: str
    date_of_birth: str  # YYYY-MM-DD
    postcode: str
    address: str
    email: str
    phone: str
    account: Account
    cards: list[Card] = field(default_factory=list)
    transactions: list[Transaction] = field(default_factory=list)
    transfers: list[Transfer] = field(default_factory=list)
    top_ups: list[TopUp] = field(default_factory=list)
    beneficiaries: list[Beneficiary] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    id_verification: str = "verified"
    source_of_funds: str = "not_requested"
    app_access: str = "active"
    passcode_reset_pending: bool = False
    auto_top_up: AutoTopUp = field(default_factory=AutoTopUp)
    # Informational resolutions ("tool:action[:target]") recorded on the customer's file; a set in spirit.
    service_notes: list[str] = field(default_factory=list)

    def object_ids(self) -> set[str]:
        """The ids of everything this customer owns: the account and every object."""
        return {self.account.account_id} | super().object_ids()

    def state_dict(self) -> dict[str, Any]:
        """Canonical JSON-able view: lists sorted by id.

        Hand-rolled rather than ``asdict`` because the outcome check calls it a lot. Floats are
        compared exactly: every tool rounds money to cents when it changes it.
        """
        raw = dict(vars(self))
        raw["account"] = dict(vars(self.account))
        raw["auto_top_up"] = dict(vars(self.auto_top_up))
        raw["service_notes"] = list(self.service_notes)
        for attr, key in COLLECTIONS.values():
            raw[attr] = sorted((dict(vars(o)) for o in getattr(self, attr)), key=lambda o, k=key: o[k])
        for card in raw["cards"]:
            card["wallets"] = list(card["wallets"])  # the only list inside a leaf object
        return raw
