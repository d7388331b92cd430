"""Rollout engine with scripted policies: the reference agents anchor the metrics, the views match the template."""

from __future__ import annotations

import re

import pytest
import torch

from sparring.agents.customer_prompt import customer_goal, intent_code
from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, ExpertAgent, RandomAgent
from sparring.lm.chat import END_OF_TURN, USER
from sparring.lm.policies import TurnOutput, TurnRequest
from sparring.metrics import episode_metrics
from sparring.rollout import RolloutStats, run_episodes
from sparring.world.events import UNAUTHENTICATED
from sparring.world.taxonomy import load_taxonomy

torch.set_num_threads(1)
TAX = load_taxonomy()


@pytest.mark.parametrize("verify,refs", [("app", "id"), ("facts", "id"), ("app", "described")])
def test_expert_vs_cooperative_passes_every_heldout_scenario(heldout, verify, refs):
    stats = RolloutStats()
    expert = ExpertAgent(verify=verify, refs=refs)
    episodes = run_episodes(heldout, expert, CooperativeCustomer(), max_turns=6, seed=0, stats=stats)
    m = episode_metrics(episodes)
    assert m["n_episodes"] == len(heldout) >= 100
    assert m["strict_pass"] == 1.0 and m["pass"] == 1.0, [e.outcome for e in episodes if not e.outcome.strict_pass]
    assert m["routing_acc"] == m["intent_acc"] == m["lookup_first"] == m["target_id_acc"] == 1.0
    assert m["unauthorized_actions"] == 0 and m["unauthorized_attempt_rate"] == 0.0
    assert m["format_failure_rate"] == 0.0 and m["ended_rate"] == 1.0
    assert all(e.ended_by == "end_conversation" for e in episodes)
    # Identity asked, then lookup and (after any question to the customer) resolve; follow-up calls shrink the batch.
    assert stats.batch_sizes[:2] == [("customer", len(heldout)), ("agent", len(heldout))]
    assert any(role == "agent" and 0 < n < len(heldout) for role, n in stats.batch_sizes)
    # A question to the customer ends the agent's turn: the next event after it is the customer's answer.
    for e in episodes:
        for call in e.log.tool_calls():
            if call.name in ("ask_customer", "confirm_request"):
                after = [x for x in e.log.events if x.index > call.index]
                assert after and after[0].kind == "turn" and after[0].role == "customer"
    # The event log traces every lookup argument to the customer's words, every target id to the lookup result.
    described = 0
    for e in episodes:
        calls = e.log.tool_calls()
        assert [c.name for c in calls][0] == "lookup_account" and calls[-1].name == "end_conversation"
        if verify == "facts":  # typed facts come from the customer's words; the app needs none
            assert calls[0].provenance
            assert all(p.source is not None and p.source.kind == "utterance" for p in calls[0].provenance.values())
        else:
            assert set(calls[0].arguments) == {"show"} and calls[0].ok  # no identity typed, one account part
        assert not [c for c in calls if c.unexplained_args()], e.scenario.intent
        if refs == "described":  # every object came from the customer's words, none from the lookup table
            sources = [p.source.kind for c in calls[1:] for k, p in c.provenance.items() if k.endswith("_id")]
            assert set(sources) <= {"described"}
            described += len(sources)
        assert [t.role for t in e.log.turns()][:2] == ["customer", "agent"]
    acting_on_an_object = sum(k.endswith("_id") for s in heldout for c in s.expected_calls[1:] for k in c.arguments)
    assert refs == "id" or described == acting_on_an_object > 0


def test_random_agent_fails(heldout):
    stats = RolloutStats()
    episodes = run_episodes(heldout, RandomAgent(seed=3), CooperativeCustomer(), max_turns=5, seed=0, stats=stats)
    m = episode_metrics(episodes)
    assert m["strict_pass"] <= 0.05
    assert m["format_failure_rate"] > 0 and m["unauthorized_attempts"] > 0
    customer_batches = [n for role, n in stats.batch_sizes if role == "customer"]
    assert customer_batches[0] == len(heldout) and customer_batches[-1] < customer_batches[0]  # ended ones leave
    assert customer_batches == sorted(customer_batches, reverse=True)


def test_skip_lookup_expert_is_refused_and_counted(heldout):
    episodes = run_episodes(heldout, ExpertAgent(skip_lookup=True), CooperativeCustomer(), max_turns=6, seed=0)
    m = episode_metrics(episodes)
    assert m["strict_pass"] == 0.0 and m["lookup_first"] == 0.0
    acting = [e for e in episodes if e.scenario.tool != "lookup_account"]
    assert m["unauthorized_attempt_rate"] == pytest.approx(len(acting) / len(episodes))
    assert m["unauthorized_attempts"] == len(acting)
    for e in acting:
        refused = [ev for ev in e.log.security_events() if ev.type == UNAUTHENTICATED]
        assert len(refused) == 1 and e.outcome.unauthorized_attempts == 1
        assert e.outcome.state_match is False or not e.outcome.correct_tool


class WrongIdExpert(ExpertAgent):
    """Routes as the expert does, but names an object the lookup never listed: DA0's commonest miss."""

    def reply(self, scenario, messages):
        text = super().reply(scenario, messages)
        return text if "payment_details" in text else re.sub(r'(_id": ")[^"]+', r"\1x_000", text)


def test_target_id_acc_separates_a_wrong_id_from_a_wrong_route(heldout):
    episodes = run_episodes(heldout, WrongIdExpert(), CooperativeCustomer(), max_turns=6, seed=0)
    m = episode_metrics(episodes)
    assert m["routing_acc"] == 1.0 and m["target_id_acc"] == 0.0
    with_target = [
        e for e in episodes if any(k.endswith("_id") for c in e.scenario.expected_calls[1:] for k in c.arguments)
    ]
    assert 0 < len(with_target) < len(episodes)
    assert not any(e.outcome.strict_pass for e in with_target)
    assert m["strict_pass"] == pytest.approx(1 - len(with_target) / len(episodes))


def test_expert_vs_camouflaging_customer(heldout):
    episodes = run_episodes(heldout, ExpertAgent(), CamouflagingCustomer(seed=2), max_turns=6, seed=0)
    assert episode_metrics(episodes)["strict_pass"] == 1.0
    openings = [e.messages[1]["content"] for e in episodes]
    changed = [o for o, e in zip(openings, episodes, strict=True) if o != e.scenario.utterance.strip()]
    assert len(changed) >= 0.5 * len(episodes)  # scenarios already camouflaged keep their own utterance
    assert sum(len(o) for o in openings) > sum(len(e.scenario.utterance) for e in episodes)


def test_customer_goal_hides_the_label_and_carries_identity_placeholders(heldout):
    for s in heldout:
        goal = customer_goal(s)
        # Descriptions may share words with a label, never the label itself: it is only the closing code.
        assert goal.endswith(" " + intent_code(s.intent)) and s.intent not in goal[: -len(intent_code(s.intent))]
        # Exact facts are placeholders the rollout fills (agents.slots): the goal says which, not their spelling.
        assert "[customer_id]" in goal and "[date_of_birth]" in goal and s.identity["customer_id"] not in goal
        assert TAX.intents[s.intent].description in goal


def test_token_views_match_the_chat_template(heldout, tok):
    scenarios = heldout[:20]
    episodes = run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), max_turns=6, seed=0, tokenizer=tok)
    user, end = tok.convert_tokens_to_ids(USER), tok.convert_tokens_to_ids(END_OF_TURN)
    for e in episodes:
        assert tok.decode(e.token_ids, skip_special_tokens=False) == tok.apply_chat_template(e.messages, tokenize=False)
        assert tok.decode(e.customer_token_ids, skip_special_tokens=False) == tok.apply_chat_template(
            e.customer_messages, tokenize=False
        )
        n = len(e.token_ids)
        assert len(e.agent_mask) == len(e.customer_mask) == len(e.agent_logprobs) == n
        assert not any(a and c for a, c in zip(e.agent_mask, e.customer_mask, strict=True))
        # Scripted text tokenizes canonically, so the template's own ids and assistant mask (what TRL trains on,
        # end of turn included) must be exactly the engine's.
        enc = tok.apply_chat_template(e.messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        assert enc["input_ids"] == e.token_ids and enc["assistant_masks"] == e.agent_mask
        assert set(e.agent_logprobs) == {0.0} and set(e.customer_logprobs) == {0.0}
        # customer_mask covers exactly the content of the user turns.
        starts = [i for i, t in enumerate(e.token_ids) if t == user]
        covered = set()
        for s in starts:
            stop = e.token_ids.index(end, s)
            covered.update(range(s + 1, stop))
        assert {i for i, c in enumerate(e.customer_mask) if c} == covered
        assert sum(e.customer_self_mask) > 0 and len(e.customer_self_mask) == len(e.customer_token_ids)


class CallEveryTime:
    """An agent that never stops calling a (refused) tool: bounded by max_calls_per_turn."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        return [TurnOutput('<call>card_services {"action": "freeze", "card_id": "card_x"}</call>') for _ in requests]


def test_calls_per_turn_and_max_turns_bound_the_episode(heldout):
    stats = RolloutStats()
    episodes = run_episodes(
        heldout[:5], CallEveryTime(), CooperativeCustomer(), max_turns=2, max_calls_per_turn=3, seed=0, stats=stats
    )
    assert stats.batch_sizes == [("customer", 5), ("agent", 5), ("agent", 5), ("agent", 5)] * 2
    for e in episodes:
        assert e.ended_by is None and e.rounds == 2 and len(e.log.tool_calls()) == 6
        roles = [m["role"] for m in e.messages]
        assert roles == ["system"] + (["user"] + ["assistant", "tool"] * 3) * 2


def test_judge_is_called_per_episode_and_metrics_of_nothing(heldout):
    seen = []

    def judge(episode):
        seen.append(episode.scenario.scenario_id)
        return {"outcome": float(episode.outcome.strict_pass)}

    episodes = run_episodes(heldout[:4], ExpertAgent(), CooperativeCustomer(), judge=judge, seed=0)
    assert seen == [s.scenario_id for s in heldout[:4]]
    assert [e.rewards for e in episodes] == [{"outcome": 1.0}] * 4
    assert run_episodes(heldout[:1], ExpertAgent(), CooperativeCustomer())[0].rewards == {}
    assert episode_metrics([]) == {"n_episodes": 0}
    assert episode_metrics(episodes, suffix="_coop")["strict_pass_coop"] == 1.0
    with pytest.raises(ValueError):
        run_episodes(heldout[:1], ExpertAgent(), CooperativeCustomer(), max_turns=0)


def test_scripted_randomness_ignores_order_but_separates_copies(heldout):
    a, b = heldout[0], heldout[1]
    forward = run_episodes([a, b, a], RandomAgent(seed=1), CooperativeCustomer(), max_turns=4, seed=5)
    backward = run_episodes([b, a], RandomAgent(seed=1), CooperativeCustomer(), max_turns=4, seed=5)
    assert forward[0].messages == backward[1].messages and forward[1].messages == backward[0].messages
    assert forward[2].messages != forward[0].messages  # the second copy of a scenario plays differently


def test_tool_results_render_listings_as_tables_with_each_row_id_last(heldout):
    """A listing of two or more objects becomes a header row plus one row per object, the object's id last (a
    causal model then reads the id after the facts it is described by); nothing the agent needs is dropped."""
    import json

    from sparring.rollout import render_tool_result
    from sparring.world.bank_identity import account_view
    from sparring.world.scenarios import build_world
    from sparring.world.vocab import TARGETS

    seen = set()
    for sc in heldout:
        world = build_world(sc)
        view = account_view(world.customers[sc.identity["customer_id"]])
        rendered = json.loads(render_tool_result(view))
        for id_key, listing in TARGETS.values():
            objects = view.get(listing) or []
            if len(objects) < 2:
                continue
            header, *rows = rendered[listing]
            assert header[-1] == id_key, (listing, header)
            assert [row[-1] for row in rows] == [o[id_key] for o in objects]
            facts = dict(zip(header, rows[0], strict=True))
            assert all(facts[k] == v for k, v in objects[0].items() if v not in (None, False, "", [], {})), listing
            seen.add(listing)
    assert {"transactions", "cards", "transfers"} <= seen
