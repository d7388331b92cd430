"""A scripted perfect agent: the calls that resolve a scenario, found the way an agent could find them.

The expert knows only what the customer would say (``scenario.identity`` and ``scenario.slots``:
merchant, amount, card ending...) and what ``lookup_account`` returns; it finds the object to act on
by matching the customer's description against the lookup result, never by peeking at the world.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparring.world.bank import World
from sparring.world.described import one_meant
from sparring.world.session import Session
from sparring.world.tools import ToolCall, execute
from sparring.world.vocab import INTENT_SPECS, QUEUE, TARGETS, resolving_args

if TYPE_CHECKING:
    from sparring.world.scenarios import Scenario


def lookup_call(identity: dict[str, str]) -> ToolCall:
    """The identifying call: customer id plus date of birth and postcode."""
    return ToolCall(
        "lookup_account",
        {
            "customer_id": identity["customer_id"],
            "date_of_birth": identity["date_of_birth"],
            "postcode": identity["postcode"],
        },
    )


def _matches(target: str, item: dict[str, Any], slots: dict[str, Any]) -> bool:
    def same_amount() -> bool:
        return abs(float(item["amount"]) - float(slots["amount"])) < 0.005

    if target == "card":
        return item["kind"] == slots["card_kind"] and item["last4"] == slots["card_last4"]
    if target == "transaction":
        return item["merchant"] == slots["merchant"] and same_amount()
    if target == "transfer":
        return (
            item["counterparty"] == slots["counterparty"] and item["direction"] == slots["direction"] and same_amount()
        )
    if target == "top_up":
        return item["method"] == slots["method"] and same_amount()
    if target == "beneficiary":
        return item["name"] == slots["beneficiary"]
    raise ValueError(f"unknown target kind {target!r}")


def find_target(view: dict[str, Any], target: str, slots: dict[str, Any]) -> str:
    """Id of the object the customer describes (``slots``) in a ``lookup_account`` result."""
    id_key, listing = TARGETS[target]
    hits = [item for item in view[listing] if _matches(target, item, slots)]
    chosen = one_meant(hits)
    if chosen is None:
        raise ValueError(f"{len(hits)} {target}s in the lookup result match {slots}; the expert needs one")
    return chosen[id_key]


def details_call(target: str, object_ref: str) -> ToolCall:
    """``payment_details`` of the transaction or transfer ``object_ref`` names (its id, or "described")."""
    return ToolCall("payment_details", {"kind": target, TARGETS[target][0]: object_ref})


def expert_calls(scenario: Scenario, world: World) -> list[ToolCall]:
    """What a perfect agent calls for ``scenario`` starting from ``world`` (which is not modified): the lookup,
    ``payment_details`` when the resolving call quotes the payment's case queue, then the resolving call.

    The list excludes the final ``end_conversation``.
    """
    lookup = lookup_call(scenario.identity)
    spec = INTENT_SPECS[scenario.intent]
    if spec.tool == "lookup_account":
        return [lookup]
    if spec.target is None:
        return [lookup, ToolCall(spec.tool, resolving_args(spec, None, scenario.slots))]
    session = Session()  # lookup and details only read; the scratch session is discarded
    view = execute(world, session, lookup)
    if not view["ok"]:
        raise ValueError(f"expert lookup failed for {scenario.scenario_id}: {view['error']}")
    target_id = find_target(view, spec.target, scenario.slots)
    if not spec.quotes_queue:
        return [lookup, ToolCall(spec.tool, resolving_args(spec, target_id, scenario.slots))]
    details = details_call(spec.target, target_id)
    record = execute(world, session, details)
    if not record["ok"]:
        raise ValueError(f"expert payment_details failed for {scenario.scenario_id}: {record['error']}")
    return [lookup, details, ToolCall(spec.tool, resolving_args(spec, target_id, scenario.slots, record[QUEUE]))]
