"""The banking domain's code (``module`` in banking.yaml): the world's state, generator, identity tool, tools'
effects and planting, which live in :mod:`sparring.world` where they were written first."""

from sparring.world.bank import COLLECTIONS, Customer
from sparring.world.bank_identity import account_view
from sparring.world.bank_identity import lookup_account as identify
from sparring.world.generate import generate_world
from sparring.world.handlers import HANDLERS
from sparring.world.planting import make_slots, plant
from sparring.world.state import World

__all__ = [
    "COLLECTIONS", "HANDLERS", "Customer", "World", "account_view", "generate_world", "identify",
    "identity_of", "make_slots", "plant",
]  # fmt: skip


def identity_of(world: World, customer_id: str) -> dict[str, str]:
    """What the customer can tell the agent to be identified: id, name, date of birth, postcode, a card's ending."""
    cust = world.customers[customer_id]
    return {
        "customer_id": cust.customer_id,
        "full_name": cust.full_name,
        "date_of_birth": cust.date_of_birth,
        "postcode": cust.postcode,
        "card_last4": next(c.last4 for c in cust.cards if c.kind == "physical"),
    }
