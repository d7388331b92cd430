"""Scenario sampling, planted worlds, the expert and the outcome check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import sparring
from sparring.world.events import CROSS_CUSTOMER, UNAUTHENTICATED
from sparring.world.expert import expert_calls
from sparring.world.handlers import CASE_QUEUES
from sparring.world.outcome import check_outcome
from sparring.world.scenarios import Scenario, build_world, check_disjoint, sample_scenarios, unplayed_scenarios
from sparring.world.session import Session
from sparring.world.taxonomy import load_taxonomy
from sparring.world.tools import ToolCall, execute
from sparring.world.vocab import INTENT_SPECS

TAX = load_taxonomy()
END = ToolCall("end_conversation", {"resolution": "resolved"})


def utterances(split: str, per_intent: int = 2) -> pl.DataFrame:
    rows = [
        {"id": f"{split}-{i:02d}-{j}", "text": f"[{split}] I need help: {intent.replace('_', ' ')} ({j})",
         "intent": intent, "tool": TAX.tool_for(intent), "style": "original", "source": "banking77"}
        for i, intent in enumerate(sorted(TAX.intents)) for j in range(per_intent)
    ]  # fmt: skip
    return pl.DataFrame(rows)


@pytest.fixture(scope="module")
def train() -> list[Scenario]:
    return sample_scenarios(utterances("train"), n=231, seed=5)


def test_unplayed_scenarios_open_with_what_no_played_scenario_did_and_skip_what_they_are_told():
    rows = utterances("train", per_intent=4)
    played = sample_scenarios(rows, n=154, seed=5)  # two rounds of the 77 intents: half the openings
    leaving = next(t for t in rows["text"] if t not in {s.utterance for s in played})
    gym = unplayed_scenarios(rows, played, 100, 7, skip=lambda text: text == leaving)
    assert len(gym) == 100 and not {s.utterance for s in gym} & {s.utterance for s in played}
    assert leaving not in {s.utterance for s in gym} and len({s.utterance for s in gym}) == 100
    again = unplayed_scenarios(rows, played, 100, 7, skip=lambda text: text == leaving)
    assert [s.to_dict() for s in again] == [s.to_dict() for s in gym]


def run(scenario: Scenario, calls: list[ToolCall]):
    world = build_world(scenario)
    session = Session()
    results = [execute(world, session, c) for c in calls]
    return world, session, results


def test_sampling_covers_every_intent_and_follows_the_taxonomy(train):
    assert len(train) == 231
    assert {s.intent for s in train} == set(TAX.intents)
    assert all(s.tool == TAX.tool_for(s.intent) for s in train)
    assert len({s.scenario_id for s in train}) == 231
    assert all(s.expected_calls[0].name == "lookup_account" for s in train)
    assert {s.persona for s in train} == {
        "cooperative",
        "vague",
        "impatient",
        "camouflaging",
        "social_engineering",
    }
    se = next(s for s in train if s.persona == "social_engineering")
    assert se.slots["other_customer_id"] != se.customer_id


def test_expert_then_end_passes_strictly_for_every_scenario(train):
    for s in train:
        world = build_world(s)
        start = world.state_dict()
        calls = expert_calls(s, world)
        assert calls == s.expected_calls and world.state_dict() == start
        session = Session()
        results = [execute(world, session, c) for c in [*calls, END]]
        assert all(r["ok"] for r in results), (s.intent, results)
        out = check_outcome(s, world, session)
        assert out.strict_pass and out.passed, (s.intent, out)
        assert out.unauthorized_attempts == 0 and out.unauthorized_actions == 0
        if s.tool != "lookup_account":
            # The resolving call really changed something (or recorded the explanation).
            assert world.state_dict() != start, s.intent


def one_per_intent(scenarios: list[Scenario]) -> list[Scenario]:
    return list({s.intent: s for s in scenarios}.values())


def test_skipping_lookup_is_refused_and_fails(train):
    for s in one_per_intent(train):
        if s.tool == "lookup_account":
            continue
        world, session, results = run(s, [s.expected_calls[-1], END])
        assert results[0]["refused"]
        assert session.log.security_events()[0].type == UNAUTHENTICATED
        out = check_outcome(s, world, session)
        assert not out.strict_pass and not out.lookup_first and not out.correct_tool and not out.state_match
        assert out.unauthorized_attempts == 1


def test_wrong_tool_is_not_correct_tool(train):
    for s in one_per_intent(train):
        wrong = (
            ToolCall("identity_verification", {"action": "why_verify_info"})
            if s.tool == "fees_and_rates"
            else ToolCall("fees_and_rates", {"topic": "card_network"})
        )
        world, session, results = run(s, [s.expected_calls[0], wrong, END])
        assert results[1]["ok"]
        out = check_outcome(s, world, session)
        assert not out.strict_pass and not out.state_match
        assert out.correct_tool == (s.tool == "lookup_account") and out.lookup_first and out.state_diff


def test_acting_on_another_customer_is_refused_and_changes_nothing(train):
    s = next(s for s in train if s.intent == "transaction_charged_twice")
    world = build_world(s)
    other = next(c for cid, c in world.customers.items() if cid != s.customer_id)
    session = Session()
    execute(world, session, s.expected_calls[0])
    before = world.state_dict()
    for call in (
        ToolCall(
            "dispute_charge",
            {
                "transaction_id": other.transactions[0].transaction_id,
                "reason": "duplicate",
                "case_queue": "merchant_team",
            },
        ),
        ToolCall("card_services", {"action": "report_lost", "card_id": other.cards[0].card_id}),
    ):
        assert execute(world, session, call)["refused"]
    assert world.state_dict() == before
    assert session.unauthorized_attempts == 2 and session.unauthorized_actions == 0
    assert {e.type for e in session.log.security_events()} == {CROSS_CUSTOMER}
    for call in s.expected_calls[1:]:
        execute(world, session, call)
    execute(world, session, END)
    out = check_outcome(s, world, session)
    assert out.strict_pass and out.unauthorized_attempts == 2  # still solved; the attempts are reported


def test_extra_changes_and_calls_after_end_are_caught(train):
    s = next(s for s in train if s.intent == "cancel_transfer")
    spare = next(c for c in build_world(s).customers[s.customer_id].cards if c.status == "active")
    freeze = ToolCall("card_services", {"action": "freeze", "card_id": spare.card_id})
    world, session, _ = run(s, [*s.expected_calls, freeze, END])
    out = check_outcome(s, world, session)
    assert out.correct_tool and out.clean_end and not out.state_match and not out.strict_pass
    assert any(spare.card_id in d or "status" in d for d in out.state_diff)
    world, session, results = run(s, [*s.expected_calls, END, freeze])
    assert not results[-1]["ok"]
    out = check_outcome(s, world, session)
    assert out.state_match and not out.clean_end and not out.strict_pass
    world, session, _ = run(s, [*s.expected_calls])  # no end_conversation at all
    assert not check_outcome(s, world, session).clean_end
    assert check_outcome(s, world, session).to_dict()["pass"] is True


def test_sampling_and_worlds_are_deterministic(train):
    again = sample_scenarios(utterances("train"), n=90, seed=5)  # a prefix of the same draw
    assert [s.to_dict() for s in again] == [s.to_dict() for s in train[:90]]
    assert build_world(train[3]).state_dict() == build_world(again[3]).state_dict()
    other = sample_scenarios(utterances("train"), n=30, seed=6)
    assert [s.scenario_id for s in other] != [s.scenario_id for s in train[:30]]
    # Row order of the input does not matter; a list of dicts works like a frame.
    shuffled = utterances("train").sample(fraction=1.0, shuffle=True, seed=1).to_dicts()
    assert [s.to_dict() for s in sample_scenarios(shuffled, n=20, seed=5)] == [s.to_dict() for s in train[:20]]
    assert Scenario.from_dict(json.loads(json.dumps(train[0].to_dict()))) == train[0]


def test_determinism_across_processes_and_hash_seeds(train):
    code = (
        "import json,sys;from sparring.world.scenarios import sample_scenarios, build_world;"
        "rows=json.loads(sys.stdin.read());s=sample_scenarios(rows,n=5,seed=5);"
        "print(json.dumps([x.to_dict() for x in s]+[build_world(s[0]).state_dict()]))"
    )
    rows = json.dumps(utterances("train").to_dicts())
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            input=rows,
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "", "PYTHONPATH": str(Path(sparring.__file__).parents[1])},
        ).stdout  # fmt: skip
        for seed in ("1", "2")
    ]
    assert outs[0] == outs[1]
    assert json.loads(outs[0])[:5] == [s.to_dict() for s in train[:5]]


def test_train_and_heldout_are_disjoint(train):
    heldout = sample_scenarios(utterances("test"), n=77, seed=5)
    check_disjoint(train, heldout)
    assert not {s.utterance_id for s in train} & {s.utterance_id for s in heldout}
    assert not {s.scenario_id for s in train} & {s.scenario_id for s in heldout}
    assert all(s.utterance.startswith("[test]") for s in heldout)
    with pytest.raises(ValueError, match="overlap"):
        check_disjoint(train, train[:3])


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError):
        sample_scenarios(pl.DataFrame({"id": ["a"], "text": ["x"]}), n=1, seed=0)
    with pytest.raises(ValueError):
        sample_scenarios(utterances("train", 1), n=1, seed=0, personas={"pirate": 1.0})
    unknown = [{"id": "u1", "text": "hello", "intent": "not_an_intent"}]
    with pytest.raises(ValueError):
        sample_scenarios(unknown, n=1, seed=0)
    only = sample_scenarios(utterances("train", 1), n=10, seed=0, personas={"impatient": 1.0})
    assert {s.persona for s in only} == {"impatient"}


def test_the_cooperative_simulator_plays_every_scenario_cooperatively(train):
    from sparring.agents.scripted import CooperativeCustomer, ExpertAgent
    from sparring.evaluate.agent import evaluate_agent
    from sparring.world.scenarios import as_cooperative

    class Recording(CooperativeCustomer):
        def __init__(self) -> None:
            super().__init__()
            self.personas: dict[str, str] = {}

        def act(self, requests):
            self.personas.update({r.scenario.scenario_id: r.scenario.persona for r in requests})
            return super().act(requests)

    scenarios = train[:30]
    assert len({s.persona for s in scenarios}) > 2  # the fixture mixes personas
    coop, other = Recording(), Recording()
    metrics = evaluate_agent(ExpertAgent(), scenarios, {"coop": coop, "other": other})
    assert set(coop.personas.values()) == {"cooperative"} and len(coop.personas) == len(scenarios)
    assert other.personas == {s.scenario_id: s.persona for s in scenarios}
    assert metrics["strict_pass_coop"] == metrics["strict_pass_other"] == 1.0  # only an LM customer reads personas
    forced = as_cooperative(scenarios)
    assert [{**s.to_dict(), "persona": None} for s in forced] == [{**s.to_dict(), "persona": None} for s in scenarios]
    assert scenarios[0] is not forced[0] and {s.persona for s in scenarios} != {"cooperative"}  # inputs untouched


def test_a_dispute_quotes_the_case_queue_only_payment_details_shows(train):
    """Issue 28, item 4: the read's field feeds the act. The lookup does not show the queue; the read does and
    changes nothing; a wrong queue is refused with a message naming the read, and changes nothing either."""
    s = next(s for s in train if INTENT_SPECS[s.intent].quotes_queue and s.tool == "dispute_charge")
    lookup, details, act = s.expected_calls
    assert details.name == "payment_details" and act.arguments["case_queue"] in CASE_QUEUES
    world, session = build_world(s), Session()
    assert "case_queue" not in json.dumps(execute(world, session, lookup))
    before = world.state_dict()
    assert execute(world, session, details)["case_queue"] == act.arguments["case_queue"]
    assert world.state_dict() == before
    wrong = next(q for q in CASE_QUEUES if q != act.arguments["case_queue"])
    refused = execute(world, session, ToolCall(act.name, {**act.arguments, "case_queue": wrong}))
    assert not refused["ok"] and "payment_details" in refused["error"] and world.state_dict() == before
    assert execute(world, session, act)["ok"] and world.state_dict() != before
