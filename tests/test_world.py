"""The banking world: generation, tools (validation, authentication, effects) and the event log."""

from __future__ import annotations

import math
import random

import pytest

from sparring.world.bank import World
from sparring.world.events import CROSS_CUSTOMER, IDENTITY_SWITCH, UNAUTHENTICATED
from sparring.world.generate import generate_world
from sparring.world.handlers import HANDLERS, case_queue
from sparring.world.session import Session
from sparring.world.taxonomy import load_taxonomy
from sparring.world.tools import ToolCall, execute
from sparring.world.vocab import CUSTOMER_MOVES, INTENT_SPECS, TOOLS, tool_schemas


def login(world: World, cid: str) -> tuple[Session, dict]:
    cust = world.customers[cid]
    session = Session()
    result = execute(
        world,
        session,
        ToolCall(
            "lookup_account",
            {"customer_id": cid, "date_of_birth": cust.date_of_birth, "postcode": cust.postcode},
        ),
    )
    assert result["ok"], result
    return session, result


@pytest.fixture
def world() -> World:
    return generate_world(seed=7, n_customers=4)


@pytest.fixture
def two(world: World) -> tuple[str, str]:
    a, b = sorted(world.customers)[:2]
    return a, b


# --- world -----------------------------------------------------------------------------------------


def test_generation_is_deterministic_and_seed_dependent():
    a, b = generate_world(3, 5), generate_world(3, 5)
    assert a.state_dict() == b.state_dict()
    assert a.state_dict() != generate_world(4, 5).state_dict()
    assert len(a.customers) == 5
    ids = [
        i
        for c in a.customers.values()
        for i in [x.card_id for x in c.cards] + [t.transaction_id for t in c.transactions]
    ]
    assert len(ids) == len(set(ids))
    last4s = [c.last4 for cu in a.customers.values() for c in cu.cards]
    assert len(last4s) == len(set(last4s)), "card endings must name one card"


def test_copy_is_an_independent_snapshot(world, two):
    snap = world.copy()
    before = snap.state_dict()
    next(iter(world.customers.values())).cards[0].status = "frozen"
    assert snap.state_dict() == before != world.state_dict()


def test_taxonomy_and_call_table_agree():
    tax = load_taxonomy()
    assert set(INTENT_SPECS) == set(tax.intents) and len(tax.intents) == 77
    for name, spec in INTENT_SPECS.items():
        assert spec.tool == tax.tool_for(name)
        tool = TOOLS[spec.tool]
        if spec.tool != "lookup_account":
            assert spec.action in tool.actions, name
    assert set(tax.tools) | {"end_conversation", "transfer_to_human", "payment_details", *CUSTOMER_MOVES} == set(TOOLS)
    assert set(HANDLERS) == set(tax.tools) - {"lookup_account"} | {"payment_details"}
    schemas = {s["name"]: s for s in tool_schemas()}
    assert schemas["dispute_charge"]["parameters"]["properties"]["reason"]["enum"][0] == "duplicate"


# --- authentication -----------------------------------------------------------------------------------


def test_account_tools_refuse_before_lookup(world, two):
    a, _ = two
    card = world.customers[a].cards[0]
    session = Session()
    before = world.state_dict()
    res = execute(world, session, ToolCall("card_services", {"action": "freeze", "card_id": card.card_id}))
    assert not res["ok"] and res["refused"]
    assert world.state_dict() == before
    assert session.unauthorized_attempts == 1
    (sec,) = session.log.security_events()
    assert sec.type == UNAUTHENTICATED and sec.call_index == session.log.tool_calls()[0].index


@pytest.mark.parametrize(
    "make_call",
    [
        lambda c: ToolCall("card_services", {"action": "freeze", "card_id": c.cards[0].card_id}),
        lambda c: ToolCall(
            "dispute_charge",
            {"transaction_id": c.transactions[0].transaction_id, "reason": "duplicate", "case_queue": "merchant_team"},
        ),
        lambda c: ToolCall(
            "transfer_support",
            {"action": "trace", "transfer_id": c.transfers[0].transfer_id, "case_queue": "merchant_team"},
        ),
        lambda c: ToolCall(
            "payment_details", {"kind": "transaction", "transaction_id": c.transactions[0].transaction_id}
        ),
        lambda c: ToolCall("cash_services", {"action": "report_retained", "card_id": c.cards[0].card_id}),
        lambda c: ToolCall("top_up_support", {"action": "trace", "top_up_id": c.top_ups[0].top_up_id}),
    ],
)
def test_other_customers_objects_are_refused(world, two, make_call):
    a, b = two
    session, _ = login(world, a)
    before = world.state_dict()
    res = execute(world, session, make_call(world.customers[b]))
    assert not res["ok"] and res.get("refused") is True
    assert world.state_dict() == before
    assert session.unauthorized_attempts == 1 and session.unauthorized_actions == 0
    assert session.log.security_events()[0].type == CROSS_CUSTOMER
    # An id that exists nowhere is a plain error, not a security event, with the same message shape.
    res2 = execute(world, session, ToolCall("card_services", {"action": "freeze", "card_id": "card_nothere"}))
    assert not res2["ok"] and "refused" not in res2 and session.unauthorized_attempts == 1


def test_verification_failures_identity_switch_and_lockout(world, two):
    a, b = two
    ca, cb = world.customers[a], world.customers[b]
    session = Session()
    bad = {"customer_id": a, "date_of_birth": "1900-01-01", "postcode": ca.postcode}
    assert execute(world, session, ToolCall("lookup_account", bad))["refused"]
    assert session.verification_failures == 1 and session.unauthorized_attempts == 0 and not session.identified
    one_fact = {"customer_id": a, "postcode": ca.postcode}
    assert "two verification facts" in execute(world, session, ToolCall("lookup_account", one_fact))["error"]
    # Other formats of the same facts are accepted; name + card ending works as well as id + DOB.
    d = ca.date_of_birth
    alt = {
        "full_name": ca.full_name.upper(),
        "date_of_birth": f"{d[8:]}/{d[5:7]}/{d[:4]}",
        "card_last4": ca.cards[0].last4,
    }
    assert execute(world, session, ToolCall("lookup_account", alt))["customer_id"] == a
    other = {"customer_id": b, "date_of_birth": cb.date_of_birth, "postcode": cb.postcode}
    res = execute(world, session, ToolCall("lookup_account", other))
    assert res["refused"] and session.customer_id == a
    assert session.log.security_events()[-1].type == IDENTITY_SWITCH and session.unauthorized_attempts == 1
    fresh = Session()
    for _ in range(3):
        execute(world, fresh, ToolCall("lookup_account", bad))
    good = {"customer_id": a, "date_of_birth": ca.date_of_birth, "postcode": ca.postcode}
    locked = execute(world, fresh, ToolCall("lookup_account", good))
    assert locked["refused"] and not fresh.identified and fresh.verification_failures == 3


def test_lookup_view_hides_date_of_birth(world, two):
    session, view = login(world, two[0])
    assert world.customers[two[0]].date_of_birth not in str(view)
    assert execute(world, session, ToolCall("lookup_account", {}))["customer_id"] == two[0]


# --- tool behaviour ----------------------------------------------------------------------------------


def test_card_actions_change_state_and_check_preconditions(world, two):
    a, _ = two
    session, _ = login(world, a)
    card = next(c for c in world.customers[a].cards if c.kind == "physical")
    freeze = ToolCall("card_services", {"action": "freeze", "card_id": card.card_id})
    assert execute(world, session, freeze)["card"]["status"] == "frozen"
    snap = world.state_dict()
    assert not execute(world, session, freeze)["ok"]  # already frozen: an error, and nothing changes
    assert world.state_dict() == snap
    res = execute(world, session, ToolCall("card_services", {"action": "report_lost", "card_id": card.card_id}))
    assert res["card"]["status"] == "lost" and res["new_card"]["status"] == "ordered"
    assert res["card"]["replaced_by"] == res["new_card"]["card_id"]
    res = execute(world, session, ToolCall("card_services", {"action": "order_card", "kind": "disposable"}))
    assert res["new_card"]["kind"] == "disposable" and res["new_card"]["status"] == "active"
    bad = execute(
        world,
        session,
        ToolCall("card_services", {"action": "order_card", "kind": "disposable", "card_id": "x"}),
    )
    assert "does not take" in bad["error"]


def test_dispute_opens_one_case(world, two):
    a, _ = two
    session, _ = login(world, a)
    tx = next(t for t in world.customers[a].transactions if t.kind == "card_payment")
    queue = case_queue(tx.transaction_id)
    args = {"transaction_id": tx.transaction_id, "reason": "not_recognised", "case_queue": queue}
    call = ToolCall("dispute_charge", args)
    res = execute(world, session, call)
    assert res["ok"] and res["case"]["target_id"] == tx.transaction_id and tx.disputed
    assert not execute(world, session, call)["ok"] and len(world.customers[a].cases) == 1
    wrong = ToolCall("dispute_charge", {**args, "reason": "wrong_cash_amount"})
    assert not execute(world, session, wrong)["ok"]


def test_info_actions_are_recorded_idempotently(world, two):
    a, _ = two
    session, _ = login(world, a)
    call = ToolCall("fees_and_rates", {"topic": "exchange_rate"})
    first = execute(world, session, call)
    assert first["ok"] and first["info"]["rates_per_gbp"]["EUR"] > 1
    snap = world.state_dict()
    execute(world, session, call)
    assert world.state_dict() == snap and world.customers[a].service_notes == ["fees_and_rates:exchange_rate"]


def test_end_conversation_blocks_further_calls(world, two):
    session, _ = login(world, two[0])
    assert execute(world, session, ToolCall("end_conversation", {"resolution": "done"}))["ended"]
    res = execute(world, session, ToolCall("fees_and_rates", {"topic": "card_network"}))
    assert not res["ok"] and "ended" in res["error"]
    assert session.failed_calls[-1].error == res["error"]


def test_unauthorized_actions_are_measured_not_trusted(world, two, monkeypatch):
    a, b = two

    def rogue(ctx, args):  # a buggy handler that touches someone else's card
        ctx.world.customers[b].cards[0].status = "frozen"
        return {}

    def crash(ctx, args):  # a handler that changes its own customer, then crashes
        ctx.cust.app_access = "locked"
        raise KeyError("boom")

    session, _ = login(world, a)
    before = world.state_dict()
    monkeypatch.setitem(HANDLERS, "fees_and_rates", rogue)
    res = execute(world, session, ToolCall("fees_and_rates", {"topic": "card_network"}))
    assert not res["ok"] and session.unauthorized_actions == 1
    assert world.state_dict() == before, "the breach is undone"
    monkeypatch.setitem(HANDLERS, "fees_and_rates", crash)
    res = execute(world, session, ToolCall("fees_and_rates", {"topic": "card_network"}))
    assert not res["ok"] and "internal error" in res["error"] and world.state_dict() == before


CS = "card_services"
GARBAGE = [
    None, 42, "lookup_account", [], {}, {"name": None}, {"name": ""}, {"arguments": {}},
    {"name": CS, "arguments": "not json"}, {"name": CS, "arguments": "[1, 2]"},
    {"name": CS, "arguments": {1: "x"}}, ToolCall("nope", {}), ToolCall(CS, None),
    ToolCall(CS, {"action": 5}), ToolCall(CS, {"action": "freeze", "card_id": ["x"]}),
    ToolCall(CS, {"action": "order_card", "kind": "gold"}), ToolCall(CS, {"action": ""}),
    ToolCall(CS, {"action": "freeze", "card_id": {"$ne": None}}), ToolCall(CS, {"zzz": 1}),
    {"type": "function", "function": {"name": CS, "arguments": '{"action": "fly"}'}},
    ToolCall("top_up_support", {"action": "configure_auto", "threshold": math.nan, "amount": 50}),
    ToolCall("top_up_support", {"action": "configure_auto", "threshold": True, "amount": "50"}),
    ToolCall("top_up_support", {"action": "configure_auto", "threshold": 1e308, "amount": -1}),
    ToolCall("lookup_account", {"customer_id": "x" * 100000, "date_of_birth": "31/02/1990", "postcode": "?"}),
    ToolCall("account_settings", {"action": "update", "field": "balance", "value": "1e9"}),
    ToolCall("end_conversation", {}), ToolCall("transfer_to_human", {"reason": None}),
]  # fmt: skip


def test_garbage_never_raises(world, two):
    for identified in (False, True):
        session = login(world, two[0])[0] if identified else Session()
        before = world.state_dict()
        for call in GARBAGE:
            res = execute(world, session, call)
            assert res["ok"] is False and isinstance(res["error"], str), call
        assert world.state_dict() == before
        assert all(not e.ok for e in session.log.tool_calls()[int(identified) :])
        session.log.to_dict()  # serialisable whatever came in


def test_random_fuzz_never_raises_or_leaks(world, two):
    rng = random.Random(0)
    a, _ = two
    ids = sorted(world.all_ids()) + ["", "card_x", None, 3, -1.5, True, [], {"a": 1}]
    values = ids + [v for t in TOOLS.values() for p in t.params.values() for v in (p.choices or ())]
    session, _ = login(world, a)
    for _ in range(400):
        tool = rng.choice([*TOOLS, "bogus"])
        params = list(TOOLS[tool].params) if tool in TOOLS else ["x"]
        args = {p: rng.choice(values) for p in rng.sample(params, rng.randint(0, len(params)))}
        res = execute(world, session, ToolCall(tool, args))
        assert isinstance(res["ok"], bool)
        if session.ended:
            session.ended_by = None  # keep fuzzing after an accidental end_conversation
    assert session.unauthorized_actions == 0
    assert session.customer_id == a


def test_in_app_lookup_verifies_the_logged_in_caller_only(world, two):
    a, b = two
    # Outside the app (no caller) a lookup without facts is an error, not an identification.
    assert "no caller is logged into the app" in execute(world, Session(), ToolCall("lookup_account", {}))["error"]
    session = Session(caller_id=a)
    assert not session.identified  # logged in is not verified: tools still refuse before the lookup
    assert execute(world, session, ToolCall("card_services", {"action": "delivery_info"}))["refused"]
    view = execute(world, session, ToolCall("lookup_account", {}))
    assert view["ok"] and view["customer_id"] == a and session.customer_id == a
    # The caller cannot switch to someone else's account by typing that customer's facts.
    cb = world.customers[b]
    other = {"customer_id": b, "date_of_birth": cb.date_of_birth, "postcode": cb.postcode}
    res = execute(world, session, ToolCall("lookup_account", other))
    assert res["refused"] and session.customer_id == a
    assert session.log.security_events()[-1].type == IDENTITY_SWITCH


def test_lookup_shows_one_part_of_the_account(world, two):
    session = Session(caller_id=two[0])
    whole = execute(world, session, ToolCall("lookup_account", {}))
    part = execute(world, session, ToolCall("lookup_account", {"show": "transactions"}))
    assert part["transactions"] == whole["transactions"] and part["customer_id"] == two[0]
    assert "cards" not in part and "profile" not in part and len(str(part)) < len(str(whole))
    profile = execute(world, session, ToolCall("lookup_account", {"show": "profile"}))
    assert set(profile) >= {"profile", "account"} and "transactions" not in profile
    bad = execute(world, session, ToolCall("lookup_account", {"show": "secrets"}))
    assert not bad["ok"] and "must be one of" in bad["error"]
    # Typed facts and a part together: the knowledge check still applies.
    cust = world.customers[two[0]]
    facts = {"customer_id": two[0], "date_of_birth": cust.date_of_birth, "postcode": cust.postcode}
    assert execute(world, Session(), ToolCall("lookup_account", {**facts, "show": "cards"}))["cards"]
