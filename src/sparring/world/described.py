"""Objects named by the customer's own words: the ``"described"`` reference.

Any object argument (``card_id``, ``transaction_id``, ...) may be the id ``lookup_account`` listed, or
``"described"``: the object the customer's messages identify, as a support console that highlights the
payment a caller has just read out. A tiny agent trained from scratch routes well but never learned to copy an
id out of a table (DA0: 0 of 45 ids right, even with the table cut to the one right row), so without this
reference every object-level resolution failed on the copy, not on the decision the training is about.

The customer must still say enough: an object is described by a message that mentions all of its naming facts
(below). The latest customer message that describes exactly one object decides; one that describes none
or several leaves the agent to ask again or to name the id. Of two identical charges, the one flagged as the
duplicate is the one meant (:func:`one_meant`, which the expert's :func:`sparring.world.expert.find_target` uses too).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sparring.world.text import find_in_text
from sparring.world.vocab import DESCRIBED

if TYPE_CHECKING:
    from sparring.world.events import TurnEvent

__all__ = ["DESCRIBED", "describing_turn", "mentions", "one_meant"]


def mentions(kind: str, item: dict[str, Any], text: str) -> bool:
    """Whether ``text`` names the object ``item`` (a plain dict of ``kind``) by all of its naming facts:
    a card by its kind and last four digits together ("physical card ending 1234"), a transaction by merchant
    and amount, a transfer by counterparty and amount, a top-up by method and amount, a beneficiary by name."""
    if kind == "card":
        pattern = rf"\b{re.escape(item['kind'])}\s+card\s+ending\s+(?:in\s+)?{re.escape(item['last4'])}\b"
        return re.search(pattern, text, re.IGNORECASE) is not None
    facts = {
        "transaction": ("merchant", "amount"),
        "transfer": ("counterparty", "amount"),
        "top_up": ("method", "amount"),
        "beneficiary": ("name",),
    }.get(kind)
    if facts is None:
        return False
    return all(
        find_in_text(str(item[f]).replace("_", " ") if f == "method" else item[f], text) is not None for f in facts
    )


def one_meant(hits: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The one object a description means among the ``hits`` that fit it: the only one, or of identical charges
    the one flagged as the duplicate; None when the description is ambiguous."""
    if len(hits) == 1:
        return hits[0]
    flagged = [i for i in hits if i.get("duplicate")]
    return flagged[0] if len(flagged) == 1 else None


def describing_turn(kind: str, items: Sequence[dict[str, Any]], turns: Sequence[TurnEvent]) -> tuple[Any, Any]:
    """(the described object of ``items``, the customer message that described it), from the latest customer
    message in ``turns`` that mentions any; raises ValueError (a message for the agent) when none does or the
    latest is ambiguous."""
    noun = kind.replace("_", " ")
    for turn in reversed([t for t in turns if t.role == "customer"]):
        hits = [i for i in items if mentions(kind, i, turn.text)]
        if hits:
            chosen = one_meant(hits)
            if chosen is None:
                raise ValueError(
                    f"the customer's words fit {len(hits)} {noun}s; ask which one, or name its id from lookup_account"
                )
            return chosen, turn
    raise ValueError(f"the customer has not described a {noun} on their account; ask them, or name its id")
