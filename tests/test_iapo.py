"""IAPO's credit (train/iapo.py): the paper's invariants, a hand-computed graph, edges read from real episodes'
event logs, and the trainer hook that turns per-token weights into (B, T) advantages."""

from __future__ import annotations

import random
import re

import pytest

from sparring.agents.clarify import confirm_question
from sparring.agents.scripted import CooperativeCustomer, ExpertAgent
from sparring.data.synthetic import generate_utterances, utterance_frame
from sparring.lm.chat import ParsedCall, known_intents, render_agent_message
from sparring.lm.policies import TurnOutput, TurnRequest
from sparring.lm.tokenizer import train_tokenizer
from sparring.rollout import run_episodes
from sparring.train.iapo import (
    InfluenceGraph,
    action_runs,
    credit_summary,
    failure_weights,
    first_action_mask,
    group_normalized,
    iapo_token_weights,
    influence_graph,
    make_credit_trainer,
    routing_weights,
    token_weights,
)
from sparring.world.scenarios import sample_scenarios
from sparring.world.vocab import INTENT_SPECS, TOOLS


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(generate_utterances(3, 0)["text"].to_list(), 700, sorted(known_intents()))


@pytest.fixture(scope="module")
def scenarios():
    return sample_scenarios(utterance_frame(1, 7), 12, seed=2)


def random_graph(rng: random.Random) -> InfluenceGraph:
    n = rng.randint(1, 6)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    return InfluenceGraph(
        [rng.randint(1, 40) for _ in range(n)],
        support={p for p in pairs if rng.random() < 0.3},
        failed={p for p in pairs if rng.random() < 0.2},
        errors=[int(rng.random() < 0.3) for _ in range(n)],
        direct=[rng.randint(0, 2) for _ in range(n)],
    )


def test_advantage_mass_is_conserved_and_the_sign_kept():
    rng = random.Random(0)
    for _ in range(200):
        graph = random_graph(rng)
        total = sum(graph.lengths)
        for weights in routing_weights(graph, 0.05, 0.25):
            assert all(w > 0 for w in weights)  # Â·w has Â's sign
            assert sum(L * w for L, w in zip(graph.lengths, weights, strict=True)) == pytest.approx(total)


def test_constant_features_fall_back_to_uniform_grpo():
    assert routing_weights(InfluenceGraph([3, 7, 2]), 0.05, 0.25) == ([1.0] * 3, [1.0] * 3)
    same = InfluenceGraph([3, 7], direct=[1, 1])  # equal features, nonzero
    assert routing_weights(same, 0.05, 0.25) == (pytest.approx([1.0, 1.0]), pytest.approx([1.0, 1.0]))


def test_a_hand_built_graph_gets_the_hand_computed_weights():
    """a_0 (2 tokens) supplied what a_2 (5 tokens, 1 direct input) used; a_1 (3 tokens) erred.
    φ⁺ = [ln 2, 0, ln 3], φ⁻ = [0, ln 2, 0]; their length-weighted z-scores clip at ±0.25 except φ⁺_0 (0.011);
    worked by hand: m⁺ = [0.938, 0.723, 1.191], m⁻ = [0.837, 1.380, 0.837], and with β₊ = 0.05 the error-bearing
    a_1's share of a success shrinks by exp(−0.05 ln 2) before renormalizing."""
    graph = InfluenceGraph([2, 3, 5], support={(0, 2)}, errors=[0, 1, 0], direct=[0, 0, 1])
    w_pos, w_neg = routing_weights(graph, 0.05, 0.25)
    assert w_pos == pytest.approx([0.9449, 0.7031, 1.2001], abs=2e-4)
    assert w_neg == pytest.approx([0.8371, 1.3801, 0.8371], abs=2e-4)


def test_token_weights_follow_the_sides_own_runs():
    own = [0, 1, 1, 0, 0, 1, 1, 1, 0]
    assert token_weights(own, [2.0, 0.5]) == [1.0, 2.0, 2.0, 1.0, 1.0, 0.5, 0.5, 0.5, 1.0]
    assert first_action_mask(own) == [0, 1, 1, 0, 0, 0, 0, 0, 0]
    assert group_normalized([1, 0, 0.5, 0.5], 2) == pytest.approx([0.7070, -0.7070, 0.0, 0.0], abs=1e-3)


def test_edges_come_from_the_event_log_of_real_episodes(tok, scenarios):
    """The expert copying an id out of lookup_account's table: an E⁺ edge from the lookup to the call that used
    it. Naming the object "described": an edge from the agent message that asked to the call that used the answer."""
    by_refs = {}
    for refs in ("id", "described"):
        episodes = run_episodes(scenarios, ExpertAgent(refs=refs), CooperativeCustomer(), seed=0, tokenizer=tok)
        by_refs[refs] = [(ep, influence_graph(ep, "agent", ep.agent_mask)) for ep in episodes]
    for refs, played in by_refs.items():
        for ep, graph in played:
            calls = {c.name: c for c in ep.log.tool_calls()}
            agent_turns = [e for e in ep.log.events if getattr(e, "role", None) == "agent"]
            assert len(graph.lengths) == len(agent_turns) and sum(graph.errors) == 0
            for name, call in calls.items():
                kinds = {p.source.kind for p in call.provenance.values() if p.source is not None}
                wanted = {"id": "result_field", "described": "described"}[refs]
                if wanted in kinds:  # the call that used the lookup's table or the customer's description
                    j = next(i for i, t in enumerate(agent_turns) if name in t.text)
                    assert any(b == j for _, b in graph.support), (refs, name, graph.support)
    assert any(graph.support for _, graph in by_refs["id"]) and any(g.support for _, g in by_refs["described"])


def test_a_dependent_read_chains_lookup_read_and_act(tok):
    """Item 4: a dispute quotes the case queue only payment_details shows, so the expert's episode holds the chain
    lookup -> read -> act, with an E⁺ edge from the read to the act, and IAPO credits the read above the plain
    messages on a success."""
    dependent = [s for s in sample_scenarios(utterance_frame(1, 7), 120, seed=2) if INTENT_SPECS[s.intent].quotes_queue]
    assert dependent
    for refs in ("id", "described"):
        episodes = run_episodes(dependent, ExpertAgent(refs=refs), CooperativeCustomer(), seed=0, tokenizer=tok)
        for ep in episodes:
            assert ep.outcome.strict_pass
            names = [c.name for c in ep.log.tool_calls()]
            assert names.index("lookup_account") < names.index("payment_details") < names.index(ep.scenario.tool)
            graph = influence_graph(ep, "agent", ep.agent_mask)
            actions = [e.text for e in ep.log.events if getattr(e, "role", None) == "agent"]
            read = next(i for i, text in enumerate(actions) if "payment_details" in text)
            act = next(i for i, text in enumerate(actions) if ep.scenario.tool in text)
            assert (read, act) in graph.support
            if refs == "id":  # the read took its id from the lookup's table: a chain of two edges
                lookup = next(i for i, text in enumerate(actions) if "lookup_account" in text)
                assert (lookup, read) in graph.support
            w_pos, _ = routing_weights(graph, beta_plus=0.05, clip=0.25)
            plain = [i for i in range(len(actions)) if all(i not in edge for edge in graph.support)]
            assert plain and all(w_pos[read] > w_pos[i] for i in plain)


class FailsThenRetries:
    """An agent that calls the resolving tool before verifying (refused), looks up, retries it, and ends."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        out = []
        for r in requests:
            tool = r.scenario.tool
            plan = [ParsedCall(tool, {}), ParsedCall("lookup_account", {}), ParsedCall(tool, {})]
            done = sum(m["role"] == "assistant" for m in r.messages)
            call = plan[done] if done < len(plan) else ParsedCall("end_conversation", {"resolution": "done"})
            out.append(TurnOutput(render_agent_message("One moment.", call)))
        return out


def test_a_refused_call_is_an_error_whose_retry_is_a_failed_use(tok, scenarios):
    episodes = run_episodes(scenarios[:4], FailsThenRetries(), CooperativeCustomer(), seed=0, tokenizer=tok)
    for ep in episodes:
        graph = influence_graph(ep, "agent", ep.agent_mask)
        assert graph.errors[0] == 1 and (0, 2) in graph.failed
        w_pos, w_neg = iapo_token_weights(graph, ep.agent_mask, 0.05, 0.25)
        (refused, _), (lookup, _), *_ = action_runs(ep.agent_mask)
        assert w_neg[refused] > w_neg[lookup]  # a failure's blame goes to the error that was repeated
        assert w_pos[refused] < w_pos[lookup]  # a success spares it (β₊)


def test_the_trainer_hook_returns_per_token_advantages():
    import torch

    from sparring.hf_door import TOKEN_CREDIT

    class Base:
        def _generate_and_score_completions(self, inputs):
            return {"advantages": torch.tensor([2.0, -1.0, 0.5]), "completion_ids": torch.zeros(3, 4)}

    trainer = make_credit_trainer(Base)()
    credit = [
        ("iapo", [1.5, 0.5, 1.0], [9.0, 9.0, 9.0]),
        ("iapo", [9.0, 9.0], [0.5, 1.5]),
        ("mt_grpo", [1.0, 0.0, 0.0, 0.0], 3.0),
    ]
    rows = [{TOKEN_CREDIT: c} for c in credit]  # the rollout's token_credit field, as TRL merges it into the rows
    advantages = trainer._generate_and_score_completions(rows)["advantages"]
    assert advantages.tolist() == [[3.0, 1.0, 2.0, 2.0], [-0.5, -1.5, -1.0, -1.0], [3.5, 0.5, 0.5, 0.5]]
    assert trainer._generate_and_score_completions([{}, {}, {}])["advantages"].dim() == 1  # no credit: (B,)


class EvenTokens:
    """A reward with spread for a random tiny model: the share of its own tokens with even ids (episode and turn)."""

    def score(self, episodes):
        out = []
        for ep in episodes:
            own = [t for t, m in zip(ep.token_ids, ep.agent_mask, strict=True) if m]
            share = sum(t % 2 == 0 for t in own) / max(1, len(own))
            out.append({"agent_reward": share, "agent_first_turn_reward": share})
        return out


@pytest.mark.parametrize("credit", ["iapo", "mt_grpo"])
def test_every_credit_choice_trains_through_trls_loss(tok, scenarios, credit, monkeypatch):
    import torch

    import sparring.train.grpo as grpo
    from sparring.lm.models import build_model
    from sparring.settings import GRPOSettings, ModelSpec

    built = []
    real = grpo.credit_batch
    monkeypatch.setattr(grpo, "credit_batch", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    spec = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    model = build_model(spec, tok)
    before = [p.detach().clone() for p in model.parameters()]
    settings = GRPOSettings(num_generations=4, scenarios_per_step=1, max_steps=2, max_new_tokens=6, max_turns=2,
                            max_calls_per_turn=1, learning_rate=1e-2, credit=credit)  # fmt: skip
    result = grpo.train_side(model, tok, "agent", CooperativeCustomer(), scenarios[:4], EvenTokens(), settings)
    assert len(built) == 2 and all(len(batch) == 4 and batch[0][0] == credit for batch in built)
    assert any(not torch.equal(a, b) for a, b in zip(before, result.model.parameters(), strict=True))


def _actions(ep) -> list[str]:
    return [e.text for e in ep.log.events if getattr(e, "role", None) == "agent"]


def test_a_lookup_supports_every_account_level_call_made_on_its_identity(tok, scenarios):
    """The world refuses account-level tools before ``lookup_account``: the action whose lookup identified the
    customer supplied what every later one used, the id-free acts (card_acceptance's) included."""
    episodes = run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), seed=0, tokenizer=tok)
    checked = 0
    for ep in episodes:
        graph, actions = influence_graph(ep, "agent", ep.agent_mask), _actions(ep)
        lookup = next(i for i, text in enumerate(actions) if "lookup_account" in text)
        for call in ep.log.tool_calls():
            if call.ok and TOOLS[call.name].needs_identity and call.name != "lookup_account":
                j = next(i for i, text in enumerate(actions) if f"<call>{call.name}" in text)
                assert (lookup, j) in graph.support, (call.name, graph.support)
                checked += 1
    assert checked >= len(episodes)  # every expert episode acts on the identity at least once


def test_a_confirmed_intent_supports_the_act_on_it(tok, scenarios):
    """The expert confirms before acting; the customer's yes is what the act on that intent used (E⁺)."""
    episodes = run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), seed=0, tokenizer=tok)
    confirmed = 0
    for ep in episodes:
        graph, actions = influence_graph(ep, "agent", ep.agent_mask), _actions(ep)
        asks = [i for i, text in enumerate(actions) if "confirm_request" in text]
        if not asks:
            continue
        act = next(i for i, text in enumerate(actions) if f"<call>{ep.scenario.tool}" in text)
        assert (asks[0], act) in graph.support and not graph.failed and not any(graph.errors)
        confirmed += 1
    assert confirmed  # the fixture's scenarios hold confirmations


class ActsOnARefusedIntent:
    """An agent that looks up, confirms another intent than the customer's, hears a no, acts on it anyway, ends."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        out = []
        for r in requests:
            spec = INTENT_SPECS[WRONG[r.scenario.intent]]
            act = ParsedCall(spec.tool, {TOOLS[spec.tool].selector: spec.action} if spec.action else {})
            plan = [ParsedCall("lookup_account", {}), ParsedCall("confirm_request", {"intent": spec.intent}), act]
            done = sum(m["role"] == "assistant" for m in r.messages)
            call = plan[done] if done < len(plan) else ParsedCall("end_conversation", {"resolution": "done"})
            words = confirm_question(spec.intent) if done == 1 else "One moment."  # the words a customer answers
            out.append(TurnOutput(render_agent_message(words, call)))
        return out


WRONG: dict[str, str] = {}  # intent -> an id-free intent of another tool (filled by the `wrong` fixture)


@pytest.fixture
def wrong(scenarios) -> dict[str, str]:
    """For each scenario's intent, an intent of another tool whose act needs no object id or slot."""
    id_free = [s for s in INTENT_SPECS.values() if s.target is None and not s.slot_args and s.tool != "lookup_account"]
    for s in scenarios:
        WRONG[s.intent] = next(o.intent for o in id_free if o.tool != INTENT_SPECS[s.intent].tool)
    return WRONG


def test_a_refused_confirmation_is_an_error_and_acting_on_it_repeats_it(tok, scenarios, wrong):
    """The customer's no to a confirmation is the paper's explicit rejection (e_i = 1), and the act on the refused
    intent that follows is a failed use of it (E⁻): on a failure IAPO blames the confirmation above the lookup."""
    episodes = run_episodes(scenarios[:6], ActsOnARefusedIntent(), CooperativeCustomer(), seed=0, tokenizer=tok)
    for ep in episodes:
        graph = influence_graph(ep, "agent", ep.agent_mask)
        assert ep.log.tool_calls()[2].ok and not ep.outcome.state_match  # the world ran the act; not the goal's
        assert graph.errors[:3] == [0, 1, 1] and (1, 2) in graph.failed and (0, 2) in graph.support
        _, w_neg = routing_weights(graph, 0.05, 0.25)
        assert w_neg[1] > w_neg[0]
    blamed = failure_weights([influence_graph(ep, "agent", ep.agent_mask) for ep in episodes], 0.05, 0.25)
    assert blamed["share_with_error"] == 1 and blamed["w_neg_erring"] > 1 > blamed["w_neg_other"]


def test_what_the_graph_held_is_summed_over_episodes(tok, scenarios):
    """credit_summary over the expert's episodes: the identity and confirmation edges (≥ 1 E⁺ per episode), no
    error, so a failure's blame would stay uniform (w⁻ = 1) while a success is routed (w⁺ moves some actions)."""
    episodes = run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), seed=0, tokenizer=tok)
    held = credit_summary([influence_graph(ep, "agent", ep.agent_mask) for ep in episodes], 0.05, 0.25)
    assert held["episodes"] == len(episodes) and held["support_edges_per_episode"] >= 1
    assert held["failed_edges_per_episode"] == held["erring_actions_per_episode"] == 0
    assert held["share_actions_reweighted_neg"] == 0 < held["share_actions_reweighted_pos"] <= 1
    assert 0 < held["top_action_mass_mean"] <= held["top_action_mass_max"] < 1


class ReportsDoneWithoutActing:
    """An agent that looks up, reports the request done without acting (DA0's largest failure), and ends."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        out = []
        for r in requests:
            done = sum(m["role"] == "assistant" for m in r.messages)
            if done == 0:
                out.append(TurnOutput(render_agent_message("One moment.", ParsedCall("lookup_account", {}))))
            elif done == 1:
                out.append(TurnOutput(render_agent_message("All done, I've taken care of that for you.", None)))
            else:
                end = ParsedCall("end_conversation", {"resolution": "done"})
                out.append(TurnOutput(render_agent_message("Goodbye!", end)))
        return out


def test_a_done_report_the_world_contradicts_is_an_error(tok, scenarios):
    """ "All done" with no act, in an episode whose world state never matched the goal, is a rule failure the
    world can check (the judge's false_report): e_i = 1 there, so a failure's blame goes to the false report; the
    expert's true report is no error (test_a_confirmed_intent_supports_the_act_on_it)."""
    episodes = run_episodes(scenarios[:6], ReportsDoneWithoutActing(), CooperativeCustomer(), seed=0, tokenizer=tok)
    for ep in episodes:
        assert not ep.outcome.state_match
        graph = influence_graph(ep, "agent", ep.agent_mask)
        assert graph.errors[:2] == [0, 1]
        _, w_neg = routing_weights(graph, 0.05, 0.25)
        assert w_neg[1] == max(w_neg) > w_neg[0]


class ActsOnAnotherIntent:
    """An agent that looks up, acts on another intent than the customer's (a misroute the world accepts), reports
    it done, and ends."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        out = []
        for r in requests:
            spec = INTENT_SPECS[WRONG[r.scenario.intent]]
            act = ParsedCall(spec.tool, {TOOLS[spec.tool].selector: spec.action})
            plan = [("One moment.", ParsedCall("lookup_account", {})), ("One moment.", act)]
            plan += [("All done, I've taken care of that for you.", None)]
            done = sum(m["role"] == "assistant" for m in r.messages)
            words, call = plan[done] if done < len(plan) else ("Goodbye!", ParsedCall("end_conversation", {}))
            out.append(TurnOutput(render_agent_message(words, call)))
        return out


def test_a_misrouted_act_is_an_error_its_report_repeats(tok, scenarios, wrong):
    """An act the world accepted in an episode whose state never matched the goal changed the wrong thing: e_i = 1
    at the act, and the "done" report that relied on it is a failed use (E⁻), so a failure's blame falls on the
    act above the lookup (before, it fell on the report and spared the act)."""
    episodes = run_episodes(scenarios[:6], ActsOnAnotherIntent(), CooperativeCustomer(), seed=0, tokenizer=tok)
    for ep in episodes:
        graph = influence_graph(ep, "agent", ep.agent_mask)
        assert ep.log.tool_calls()[1].ok and not ep.outcome.state_match
        assert graph.errors[:3] == [0, 1, 1] and (1, 2) in graph.failed and (0, 1) in graph.support
        _, w_neg = routing_weights(graph, 0.05, 0.25)
        assert w_neg[1] == max(w_neg) > w_neg[0] and w_neg[2] >= w_neg[0]  # the clip (c) may level the rest


class FreezesACard:
    """An agent that looks up, freezes the customer's card (an act no intent resolves with), reports it done and
    ends: the wrong call the first graph missed, for it is no intent's resolving call."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        out = []
        for r in requests:
            done = sum(m["role"] == "assistant" for m in r.messages)
            card = re.search(r"card_\d+", str(r.messages[-1].get("content")))
            plan = [("One moment.", ParsedCall("lookup_account", {"show": "cards"}))]
            plan += [("One moment.", ParsedCall("card_services", {"action": "freeze", "card_id": card and card[0]}))]
            plan += [("All done, I've taken care of that for you.", None)]
            words, call = plan[done] if done < len(plan) else ("Goodbye!", ParsedCall("end_conversation", {}))
            out.append(TurnOutput(render_agent_message(words, call)))
        return out


def test_an_act_no_intent_asks_for_is_an_error_its_report_repeats(tok, scenarios):
    """A call the world accepted on a tool intents resolve with, though no intent's action (freezing a card), in an
    episode whose state never matched the goal: e_i = 1 at it and E⁻ to the report, as for a misroute."""
    episodes = run_episodes(scenarios[:6], FreezesACard(), CooperativeCustomer(), seed=0, tokenizer=tok)
    for ep in episodes:
        calls = ep.log.tool_calls()
        assert (calls[1].name, calls[1].arguments["action"], calls[1].ok) == ("card_services", "freeze", True)
        assert not ep.outcome.state_match and ("card_services", "freeze") not in {
            (s.tool, s.action) for s in INTENT_SPECS.values()
        }
        graph = influence_graph(ep, "agent", ep.agent_mask)
        assert graph.errors[:3] == [0, 1, 1] and (1, 2) in graph.failed
        _, w_neg = routing_weights(graph, 0.05, 0.25)
        assert w_neg[1] == max(w_neg) > w_neg[0]


class ClosesWithNothingDone:
    """An agent that looks up and closes the case without acting or saying it is done."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        done = [sum(m["role"] == "assistant" for m in r.messages) for r in requests]
        look, close = ParsedCall("lookup_account", {}), ParsedCall("end_conversation", {"resolution": "closed"})
        return [TurnOutput(render_agent_message("One moment." if d == 0 else "Goodbye.", look if d == 0 else close))
                for d in done]  # fmt: skip


def test_a_close_that_leaves_the_case_unresolved_is_the_error_when_nothing_else_erred(tok, scenarios):
    """No act, no report, no refusal: the close is the one action that left the case unresolved, so a failure's
    blame goes there (before, such an episode held no erring action and w⁻ stayed 1 everywhere)."""
    episodes = run_episodes(scenarios[:6], ClosesWithNothingDone(), CooperativeCustomer(), seed=0, tokenizer=tok)
    for ep in episodes:
        assert not ep.outcome.state_match and ep.log.tool_calls()[-1].name == "end_conversation"
        graph = influence_graph(ep, "agent", ep.agent_mask)
        assert graph.errors == [0, 1]
        _, w_neg = routing_weights(graph, 0.05, 0.25)
        assert w_neg[1] > 1 > w_neg[0]
