"""Event log and argument provenance: where each tool-call argument came from."""

from __future__ import annotations

import json

import pytest

from sparring.world.bank import World
from sparring.world.events import UNAUTHENTICATED
from sparring.world.generate import generate_world
from sparring.world.session import Session
from sparring.world.tools import ToolCall, execute


@pytest.fixture
def world() -> World:
    return generate_world(seed=11, n_customers=3)


def test_provenance_points_at_lookup_field_and_utterance(world):
    cid = sorted(world.customers)[0]
    cust = world.customers[cid]
    session = Session()
    log = session.log
    text = f"Hi, my customer number is {cid}, born {cust.date_of_birth}, postcode {cust.postcode.lower()}."
    t0 = log.add_turn("customer", text)
    log.add_turn("agent", "Let me look that up.")
    lookup_args = {"customer_id": cid, "date_of_birth": cust.date_of_birth, "postcode": cust.postcode}
    view = execute(world, session, ToolCall("lookup_account", lookup_args))
    lookup_ev = log.tool_calls()[0]
    assert lookup_ev.after_turn == 1
    for name, value in lookup_args.items():
        src = lookup_ev.provenance[name].source
        assert src is not None and src.kind == "utterance" and src.event_index == t0.index and src.turn == 0
        start, end = src.span
        assert text[start:end].casefold() == value.casefold()

    log.add_turn("customer", "There's a payment I never made.")
    k, tx = next((i, t) for i, t in enumerate(view["transactions"]) if t["kind"] == "card_payment")
    details = ToolCall("payment_details", {"kind": "transaction", "transaction_id": tx["transaction_id"]})
    queue = execute(world, session, details)["case_queue"]
    details_ev = log.tool_calls()[-1]
    src = details_ev.provenance["transaction_id"].source
    assert src.kind == "result_field" and src.event_index == lookup_ev.index
    assert src.path == ("transactions", k, "transaction_id")
    args = {"transaction_id": tx["transaction_id"], "reason": "not_recognised", "case_queue": queue}
    assert execute(world, session, ToolCall("dispute_charge", args))["ok"]
    ev = log.tool_calls()[-1]
    # The read's result feeds the act: the id it repeats and the case queue only it showed (issue 28's data flow).
    assert ev.provenance["transaction_id"].source.event_index == details_ev.index
    src = ev.provenance["case_queue"].source
    assert src.kind == "result_field" and src.event_index == details_ev.index and src.path == ("case_queue",)
    assert ev.provenance["reason"].source.kind == "vocabulary"  # a choice no result stated
    assert details_ev.provenance["transaction_id"].source.path_str == f"transactions[{k}].transaction_id"
    assert ev.unexplained_args() == []

    # A made-up id has no provenance, and the call fails.
    made_up = ToolCall("card_services", {"action": "freeze", "card_id": "card_0badf00d"})
    assert not execute(world, session, made_up)["ok"]
    ev = log.tool_calls()[-1]
    assert ev.provenance["card_id"].source is None and ev.unexplained_args() == ["card_id"]
    assert ev.provenance["action"].source.kind == "vocabulary"

    # Free text is labelled as such.
    execute(world, session, ToolCall("end_conversation", {"resolution": "Dispute opened."}))
    assert log.tool_calls()[-1].provenance["resolution"].source.kind == "free_text"

    # Everything serialises to JSON.
    data = json.loads(json.dumps(log.to_dict()))
    kinds = [e["kind"] for e in data["events"]]
    assert kinds == ["turn", "turn", "tool_call", "turn", "tool_call", "tool_call", "tool_call", "tool_call"]
    assert data["events"][4]["provenance"]["transaction_id"]["source"]["path"] == [
        "transactions",
        k,
        "transaction_id",
    ]


def test_numbers_match_by_value_and_agent_text_is_not_a_source(world):
    cid = sorted(world.customers)[1]
    cust = world.customers[cid]
    session = Session()
    log = session.log
    ident = {"customer_id": cid, "date_of_birth": cust.date_of_birth, "postcode": cust.postcode}
    execute(world, session, ToolCall("lookup_account", ident))
    log.add_turn("agent", "Shall I top up 75 when you drop below 15?")  # agent words ground nothing
    log.add_turn("customer", "Yes: top up £40.00 whenever it falls under 20, please. Not 150.")
    execute(
        world,
        session,
        ToolCall("top_up_support", {"action": "configure_auto", "threshold": 20, "amount": "40"}),
    )
    ev = log.tool_calls()[-1]
    assert ev.provenance["threshold"].source.kind == "utterance"
    text = log.turns()[-1].text
    s, e = ev.provenance["amount"].source.span
    assert text[s:e] == "40.00"
    execute(
        world,
        session,
        ToolCall("top_up_support", {"action": "configure_auto", "threshold": 15, "amount": 75}),
    )
    ev = log.tool_calls()[-1]
    assert ev.provenance["threshold"].source is None and ev.provenance["amount"].source is None
    # A number inside a longer number or an id does not count ("15" is not in "150").
    assert all(c.kind != "utterance" for c in ev.provenance["threshold"].candidates)


def test_security_events_follow_their_call(world):
    session = Session()
    card = next(iter(world.customers.values())).cards[0]
    execute(world, session, ToolCall("card_services", {"action": "freeze", "card_id": card.card_id}))
    call, sec = session.log.events
    assert sec.kind == "security" and sec.type == UNAUTHENTICATED and sec.call_index == call.index
    assert sec.to_dict()["counted"] is True
    # The id was not seen by the agent: hallucinated even though it exists in the world.
    assert call.provenance["card_id"].source is None
