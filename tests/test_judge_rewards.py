"""The judge's rewards: computed from what happened in the world, for both sides."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pytest
import torch

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, ExpertAgent, RandomAgent
from sparring.data.synthetic import generate_utterances
from sparring.judge.llm import LLMJudgeBackend
from sparring.judge.rewards import REWARD_V2, Judge, customer_turns
from sparring.lm.chat import known_intents
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.tokenizer import train_tokenizer
from sparring.params import RewardWeights
from sparring.rollout import run_episodes
from sparring.world.scenarios import sample_scenarios
from sparring.world.taxonomy import load_taxonomy

torch.set_num_threads(1)
TAX = load_taxonomy()


class KeywordBackend:
    """A transparent backend for testing the reward formulas: faithful iff the customer's turns contain a word
    of the intent's description; realistic in proportion to how many turns avoid ALL-CAPS shouting."""

    def faithfulness(self, turns: Sequence[Sequence[str]], intents: Sequence[str]) -> np.ndarray:
        def hit(t: Sequence[str], i: str) -> float:
            words = {w for w in TAX.intents[i].description.lower().split() if len(w) > 4}
            return float(any(w in " ".join(t).lower() for w in words))

        return np.array([hit(t, i) for t, i in zip(turns, intents, strict=True)])

    def realism(self, turns: Sequence[Sequence[str]]) -> np.ndarray:
        return np.array([np.mean([not x.isupper() for x in t]) if t else 0.0 for t in turns])

    def named_outright(self, text: str, intent: str) -> bool:
        return intent in text


@pytest.fixture(scope="module")
def scenarios():
    frame = generate_utterances(2, seed=3).with_columns(
        id=pl.format("u{}", pl.int_range(pl.len())),
        tool=pl.col("intent").replace_strict({n: i.tool for n, i in TAX.intents.items()}),
        source=pl.lit("synthetic"),
    )
    return sample_scenarios(frame, 40, seed=1)


def test_expert_earns_the_full_agent_reward_and_the_adversary_nothing(scenarios):
    episodes = run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), max_turns=6, seed=0)
    w = RewardWeights()
    scores = Judge(KeywordBackend(), w, max_turns=6).score(episodes)
    for s in scores:
        assert s["agent_strict_pass"] == 1.0 and s["agent_format"] == 1.0 and s["agent_security"] == 0
        best = w.resolution + w.correct_tool + w.lookup_first + w.clean_end + w.format + w.strict_pass
        assert s["agent_reward"] == pytest.approx(best - w.turns * s["agent_turns"])
        # The agent routed right: no win, only the faithfulness term.
        assert s["adv_misroute"] == 0.0 and s["adv_won"] == 0.0
        assert s["adv_reward"] == pytest.approx(w.faithfulness * s["adv_faithfulness"])


def test_random_agent_scores_low_and_rewards_order_agents(scenarios):
    judge = Judge(KeywordBackend(), max_turns=6)
    expert = judge.score(run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), max_turns=6, seed=0))
    rand = judge.score(run_episodes(scenarios, RandomAgent(seed=0), CooperativeCustomer(), max_turns=6, seed=0))
    assert np.mean([s["agent_reward"] for s in rand]) < np.mean([s["agent_reward"] for s in expert]) - 2.0
    # The random agent never identifies the customer, so the customer cannot claim a misroute win.
    assert all(s["adv_misroute"] == 0.0 for s in rand)


def test_refused_actions_cost_the_agent_and_are_no_adversary_win(scenarios):
    episodes = run_episodes(scenarios, ExpertAgent(skip_lookup=True), CamouflagingCustomer(), max_turns=6, seed=0)
    scores = Judge(KeywordBackend(), max_turns=6).score(episodes)
    refused = 0
    for e, s in zip(episodes, scores, strict=True):
        # Without a lookup no customer is identified: withholding identity or skipping it is no adversary win.
        assert s["adv_misroute"] == 0.0 and s["agent_strict_pass"] == 0.0
        assert s["agent_security"] == e.outcome.unauthorized_attempts  # each refused account action costs
        refused += e.outcome.unauthorized_attempts > 0
    assert refused >= len(episodes) // 2


class FixedFaithfulness(KeywordBackend):
    """KeywordBackend's realism, with a set faithfulness for every episode."""

    def __init__(self, value: float) -> None:
        self.value = value

    def faithfulness(self, turns: Sequence[Sequence[str]], intents: Sequence[str]) -> np.ndarray:
        return np.full(len(turns), self.value)


def _misrouted(scenarios, *extra_turns: str):
    """An expert episode turned into a misroute after the customer was identified, with extra customer turns."""
    ep = run_episodes(scenarios[:1], ExpertAgent(), CooperativeCustomer(), max_turns=6, seed=0)[0]
    ep.outcome.correct_tool = False
    ep.messages.extend({"role": "user", "content": t} for t in extra_turns)
    return ep


def test_adversary_reward_is_a_faithful_win_times_realism_plus_faithfulness_minus_naming(scenarios):
    w = RewardWeights(name_penalty=2.0, faithfulness=0.5, faithful_min=0.5)
    ep = _misrouted(scenarios, "WHERE IS MY MONEY")  # shouted: less realistic
    r = KeywordBackend().realism([customer_turns(ep.messages)])[0]
    assert 0 < r < 1
    # Faithful enough: a win, paid f·realism on top of the faithfulness term.
    s = Judge(FixedFaithfulness(0.8), w, max_turns=6).score([ep])[0]
    assert s["adv_misroute"] == 1.0 and s["adv_won"] == 1.0
    assert s["adv_reward"] == pytest.approx(0.8 * r + 0.5 * 0.8)
    # A misroute by a customer who asked for something else is no win: only the faithfulness term is paid.
    s = Judge(FixedFaithfulness(0.3), w, max_turns=6).score([ep])[0]
    assert s["adv_misroute"] == 1.0 and s["adv_won"] == 0.0
    assert s["adv_reward"] == pytest.approx(0.5 * 0.3)
    # Naming the label outright is no win and costs the penalty.
    named = _misrouted(scenarios, "WHERE IS MY MONEY", f"it is about {ep.scenario.intent}")
    s = Judge(FixedFaithfulness(0.8), w, max_turns=6).score([named])[0]
    assert s["adv_named_intent"] == 1.0 and s["adv_won"] == 0.0
    assert s["adv_reward"] == pytest.approx(0.5 * 0.8 - 2.0)


def test_llm_backend_scores_are_the_yes_share_of_the_rubric_answer():
    tok = train_tokenizer(
        generate_utterances(2, 0)["text"].to_list() + ["Answer: Yes No"] * 5, 600, sorted(known_intents())
    )
    model = build_model(
        ModelSpec(
            arch="llama",
            hidden_size=32,
            num_layers=1,
            num_heads=2,
            num_kv_heads=2,
            intermediate_size=64,
            max_position_embeddings=1024,
            tie_word_embeddings=False,
        ),
        tok,
    )
    backend = LLMJudgeBackend(model, tok, batch_size=2)
    turns = [["my card never came"], ["why was I charged twice for one coffee", "thanks"], []]
    intents = ["card_arrival", "transaction_charged_twice", "card_arrival"]
    faithful, real = backend.faithfulness(turns, intents), backend.realism(turns)
    assert faithful.shape == real.shape == (3,)
    assert np.all((faithful[:2] > 0) & (faithful[:2] < 1)) and faithful[2] == 0.0 and real[2] == 0.0
    # The score is softmax over the (Yes, No) logits at the answer position, batched or not.
    one = backend.yes_probability(["Is this real? Answer:"])[0]
    ids = tok("Is this real? Answer:", return_tensors="pt")["input_ids"][0].tolist() + backend.prefix
    logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
    expected = torch.softmax(logits[[backend.yes, backend.no]], dim=-1)[0].item()
    assert one == pytest.approx(expected, abs=1e-5)


class Boaster:
    """Reports every request done at once, without a lookup or an act: DA0's false "All done"."""

    tokenizer = None

    def act(self, requests):
        from sparring.lm.chat import render_agent_message
        from sparring.rollout import TurnOutput

        return [TurnOutput(render_agent_message("All done, I've taken care of that for you.", None, None))] * len(
            requests
        )


def test_a_done_report_the_world_contradicts_costs_w_false_and_a_true_one_nothing(scenarios):
    w = RewardWeights(false_report=1.0)
    judge, plain = (
        Judge(KeywordBackend(), w, max_turns=6),
        Judge(KeywordBackend(), w.model_copy(update={"false_report": 0.0}), max_turns=6),
    )
    false = run_episodes(scenarios[:8], Boaster(), CooperativeCustomer(), max_turns=3, seed=0)
    true = run_episodes(scenarios[:8], ExpertAgent(), CooperativeCustomer(), max_turns=6, seed=0)
    for ep, s, s0 in zip(false, judge.score(false), plain.score(false), strict=True):
        # false where the world shows the goal undone (a question-only intent's goal state needs no act)
        assert s["agent_false_report"] == s0["agent_false_report"] == float(not ep.outcome.state_match)
        assert s["agent_reward"] == pytest.approx(s0["agent_reward"] - s["agent_false_report"])  # only at w_false
    assert sum(not ep.outcome.state_match for ep in false) >= 4
    # the expert says "All done" too, after the world shows the request done: no false report
    assert all(s["agent_false_report"] == 0.0 for s in judge.score(true))
    assert any("All done" in str(m.get("content")) for ep in true for m in ep.messages)


class Script:
    """Plays a fixed list of agent messages (text, tool, arguments), one per agent turn, whatever happens."""

    tokenizer = None

    def __init__(self, *steps: tuple[str, str | None, dict]) -> None:
        self.steps = steps

    def act(self, requests):
        from sparring.lm.chat import ParsedCall, render_agent_message
        from sparring.rollout import TurnOutput

        out = []
        for r in requests:
            k = min(sum(m["role"] == "assistant" for m in r.messages), len(self.steps) - 1)
            text, tool, args = self.steps[k]
            call = ParsedCall(tool, args) if tool else None
            out.append(TurnOutput(render_agent_message(text, call, r.scenario.intent)))
        return out


LOOKUP = ("Let me look up your account.", "lookup_account", {"show": "all"})
DONE = ("All done, I've taken care of that for you.", "end_conversation", {"resolution": "done"})


def test_reward_v2_ranks_a_pass_then_a_safe_handover_then_a_false_report_then_any_wrong_act(scenarios):
    """The order a bank wants (judge.rewards' docstring), on hand-built episodes of each kind, scenarios whose goal
    needs an act: a wrong act (another intent's act, the right act refused then reported done) earns less than
    every other ending by at least the sum of all partial credit; v1's weights did not order them."""
    acting = [s for s in scenarios if s.tool not in ("fees_and_rates", None) and len(s.expected_calls) >= 2][:8]
    play = {"max_turns": 6, "seed": 0}
    kinds = {
        "pass": run_episodes(acting, ExpertAgent(), CooperativeCustomer(), **play),
        "safe": run_episodes(acting, Script(LOOKUP, ("Let me pass you on.", "transfer_to_human", {"reason": "x"})),
                             CooperativeCustomer(), **play),
        "false report": run_episodes(acting, Script(LOOKUP, DONE), CooperativeCustomer(), **play),
        "hung up": run_episodes(acting, Script(LOOKUP, ("Goodbye.", "end_conversation", {"resolution": "none"})),
                                CooperativeCustomer(), **play),
        "wrong intent": run_episodes(acting, Script(LOOKUP, ("", "fees_and_rates", {"topic": "exchange_rate"}), DONE),
                                     CooperativeCustomer(), **play),
        "refused, reported done": [  # the resolving tool on an object that does not exist: refused
            run_episodes([s], Script(LOOKUP, ("", s.tool, {"action": "x", "card_id": "nope"}), DONE),
                         CooperativeCustomer(), **play)[0] for s in acting
        ],
    }  # fmt: skip
    w = RewardWeights(**REWARD_V2)
    judge = Judge(KeywordBackend(), w, max_turns=6)
    v1 = Judge(KeywordBackend(), RewardWeights(), max_turns=6)  # the default
    scores = {k: judge.score(eps) for k, eps in kinds.items()}
    assert all(s["agent_strict_pass"] == 1 for s in scores["pass"])
    assert all(ep.outcome.touched is False and ep.ended_by == "transfer_to_human" for ep in kinds["safe"])
    # closing the case unresolved is a completion report too, "All done" said or not
    for k in ("false report", "hung up"):
        assert all(s["agent_false_report"] == 1 and s["agent_wrong_act"] == 0 for s in scores[k])
    assert all(s["agent_wrong_act"] == 1 for k in ("wrong intent", "refused, reported done") for s in scores[k])
    assert all(ep.outcome.touched for ep in kinds["wrong intent"])
    reward = {k: [s["agent_reward"] for s in v] for k, v in scores.items()}
    assert min(reward["pass"]) > max(reward["safe"]) > max(reward["false report"] + reward["hung up"])
    assert -0.3 <= min(reward["safe"]) and max(reward["safe"]) <= 0.6  # at or just above 0
    partial = w.correct_tool + w.lookup_first + w.clean_end + w.format
    worst_other = min(r for k in ("pass", "safe", "false report", "hung up") for r in reward[k])
    assert max(r for k in ("wrong intent", "refused, reported done") for r in reward[k]) <= worst_other - partial
    # v1 paid a wrong act on another intent's tool more than a safe handover: the ranking GRPO used to climb
    old = {k: np.mean([s["agent_reward"] for s in v1.score(eps)]) for k, eps in kinds.items()}
    assert old["wrong intent"] >= old["safe"]
