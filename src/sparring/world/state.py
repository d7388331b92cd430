"""The world every domain shares: its customers by id, with the copy, state and id helpers the tools and the outcome
check read. A domain's customer type (``sparring.world.bank.Customer``, ``sparring.domains.retail.Customer``) says
what a customer owns: ``COLLECTIONS`` (kind -> (attribute, id field)), ``find``, ``object_ids`` and
``state_dict``; a domain whose world holds more than its customers (retail's product catalogue) subclasses
:class:`World`.
"""

from __future__ import annotations

import hashlib
import pickle
import random
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_SCALARS = (str, int, bool, type(None))


def short_id(prefix: str, rng: random.Random) -> str:
    """An object id candidate such as ``tx_042``: three digits, so an agent names an object with one token
    of the tokenizer (digits are pre-split in threes) rather than copying eight hex characters."""
    return f"{prefix}_{rng.randrange(1000):03d}"


def plain(obj: Any, ndigits: int | None = None) -> Any:
    """Dataclasses/lists/dicts as plain JSON-able data (a faster ``asdict``), optionally rounding floats."""
    kind = type(obj)
    if kind in _SCALARS:  # fast path: most values are scalars
        return obj
    if kind is float:
        return obj if ndigits is None else round(obj, ndigits)
    if kind is list or kind is tuple:
        return [plain(v, ndigits) for v in obj]
    if kind is dict:
        return {k: plain(v, ndigits) for k, v in obj.items()}
    names = _FIELD_NAMES.get(kind)
    if names is None and is_dataclass(obj) and not isinstance(obj, type):
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(obj))
    if names is None:
        return obj
    return {n: plain(getattr(obj, n), ndigits) for n in names}


class Owner:
    """What every domain's customer type shares (a base of its dataclass): finding what it owns by kind
    (``COLLECTIONS``: kind -> (attribute, id field)), the ids of all of it, and informational notes recorded once."""

    COLLECTIONS: ClassVar[dict[str, tuple[str, str]]] = {}
    service_notes: list[str]

    def find(self, kind: str, obj_id: Any) -> Any | None:
        """The object of ``kind`` with id ``obj_id`` owned by this customer, or None."""
        attr, key = self.COLLECTIONS[kind]
        for obj in getattr(self, attr):
            if getattr(obj, key) == obj_id:
                return obj
        return None

    def object_ids(self) -> set[str]:
        """The ids of every object this customer owns."""
        return {getattr(o, key) for attr, key in self.COLLECTIONS.values() for o in getattr(self, attr)}

    def add_note(self, note: str) -> None:
        # Idempotent and sorted so repeating an explanation does not change the state.
        if note not in self.service_notes:
            self.service_notes.append(note)
            self.service_notes.sort()


@dataclass
class World:
    """The whole world. ``seed`` records how it was generated; it is not part of the compared state."""

    seed: int
    customers: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> World:
        """An independent deep copy (a snapshot that later tool calls do not touch)."""
        # pickle round-trips plain dataclasses several times faster than copy.deepcopy.
        return pickle.loads(pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL))

    def __deepcopy__(self, memo: dict) -> World:
        return self.copy()

    def state_dict(self) -> dict[str, Any]:
        """Canonical, comparable state of every customer, keyed by customer id."""
        return {"customers": {cid: self.customers[cid].state_dict() for cid in sorted(self.customers)}}

    def customer(self, customer_id: Any) -> Any | None:
        """The customer with this id, or None (also for non-string ids)."""
        return self.customers.get(customer_id) if isinstance(customer_id, str) else None

    def owner_of(self, obj_id: Any) -> str | None:
        """Id of the customer who owns the object with id ``obj_id`` (any kind), or None."""
        for cid, cust in self.customers.items():
            for kind in cust.COLLECTIONS:
                if cust.find(kind, obj_id) is not None:
                    return cid
        return None

    def all_ids(self) -> set[str]:
        """Every id in the world: customers and everything they own."""
        ids: set[str] = set(self.customers)
        for cust in self.customers.values():
            ids |= cust.object_ids()
        return ids

    def derived_id(self, prefix: str, *parts: str) -> str:
        """A new id determined by ``parts`` (not by call order), unique in this world.

        Tools create objects with derived ids so that replaying the same logical actions gives the
        same ids, which keeps state comparison meaningful.
        """
        taken = self.all_ids()
        salt = 0
        while True:
            digest = hashlib.sha1("|".join((*parts, str(salt))).encode()).hexdigest()[:8]
            candidate = f"{prefix}_{digest}"
            if candidate not in taken:
                return candidate
            salt += 1

    def random_id(self, prefix: str, rng: random.Random) -> str:
        """A new random id, unique in this world (used while generating and planting)."""
        taken = self.all_ids()
        while True:
            candidate = short_id(prefix, rng)
            if candidate not in taken:
                return candidate
