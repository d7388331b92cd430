"""LM agent vs LM customer (two tiny random-init transformers): masks, logprobs, views, drop-out, determinism."""

from __future__ import annotations

import polars as pl
import pytest
import torch

from sparring.agents.openings import ContinuesUtterance, OpensWithUtterance
from sparring.data.synthetic import generate_utterances
from sparring.lm import policies
from sparring.lm.chat import ASSISTANT, END_OF_TURN, INTENT, USER, known_intents
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.policies import LMPolicy, TurnOutput, TurnRequest
from sparring.lm.tokenizer import customer_banned_ids
from sparring.metrics import episode_metrics
from sparring.rollout import RolloutStats, run_episodes
from sparring.train.grpo import side_sample
from sparring.world.scenarios import sample_scenarios
from sparring.world.taxonomy import load_taxonomy

torch.set_num_threads(1)
SPEC = ModelSpec(
    hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=128, tie_word_embeddings=False
)
MAX_NEW = 16


@pytest.fixture(scope="module")
def scenarios():
    tools = {name: i.tool for name, i in load_taxonomy().intents.items()}
    frame = generate_utterances(1, 5).with_columns(
        id=pl.format("lm-{}", pl.int_range(pl.len())),
        tool=pl.col("intent").replace_strict(tools),
        source=pl.lit("synthetic"),
    )
    return sample_scenarios(frame, 10, seed=1)


@pytest.fixture(scope="module")
def models(tok):
    return build_model(SPEC, tok), build_model(SPEC, tok, seed=1)


class Recording:
    """Wraps a policy; records every output per episode, and can make chosen episodes end or call a tool."""

    def __init__(self, inner: LMPolicy, script: dict[tuple[int, int], str] | None = None) -> None:
        self.inner, self.tokenizer, self.script = inner, inner.tokenizer, script or {}
        self.outputs: dict[int, list[TurnOutput]] = {}

    def release(self, keys) -> None:
        self.inner.release(keys)

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        lm = [r for r in requests if (r.key[1], r.turn) not in self.script]
        generated = iter(self.inner.act(lm) if lm else [])
        outs = [
            TurnOutput(self.script[(r.key[1], r.turn)]) if (r.key[1], r.turn) in self.script else next(generated)
            for r in requests
        ]
        for r, o in zip(requests, outs, strict=True):
            self.outputs.setdefault(r.key[1], []).append(o)
        return outs


def rollout(tok, models, scenarios, seed=0, script=None, reuse_kv=True, stats=None, kv="bfloat16"):
    opts = {"max_new_tokens": MAX_NEW, "reuse_kv": reuse_kv, "kv_cache_dtype": kv}
    agent = Recording(LMPolicy(models[0], tok, "agent", **opts), script)
    customer = Recording(LMPolicy(models[1], tok, "customer", **opts))
    eps = run_episodes(scenarios, agent, customer, max_turns=3, seed=seed, stats=stats)
    return eps, agent, customer


def segments(ids: list[int], marker: int, end: int) -> list[range]:
    """Content positions of every turn opened by ``marker``, walking turn by turn (marker, content, end):
    generated content may itself hold role-marker tokens, never ``<|end|>`` (generation stops there)."""
    out, i = [], 0
    while i < len(ids):
        stop = ids.index(end, i + 1)
        if ids[i] == marker:
            out.append(range(i + 1, stop))
        i = stop + 1
    return out


@pytest.fixture(scope="module")
def run(tok, models, scenarios):
    stats = RolloutStats()
    eps, agent, customer = rollout(tok, models, scenarios, stats=stats)
    return eps, agent, customer, stats


def test_runs_to_completion_with_consistent_views(run, tok, scenarios):
    eps, agent, customer, stats = run
    assert len(eps) == len(scenarios) and all(e.rounds == 3 and e.outcome is not None for e in eps)
    assert stats.batch_sizes == [("customer", 10), ("agent", 10)] * 3  # random LMs never call a tool
    assert agent.inner.batch_sizes == customer.inner.batch_sizes == [10, 10, 10]
    m = episode_metrics(eps)
    assert m["strict_pass"] == 0.0 and m["mean_turns"] == 6.0
    for e in eps:
        assert tok.decode(e.token_ids, skip_special_tokens=False) == tok.apply_chat_template(e.messages, tokenize=False)
        assert tok.decode(e.customer_token_ids, skip_special_tokens=False) == tok.apply_chat_template(
            e.customer_messages, tokenize=False
        )
        assert [t.role for t in e.log.turns()] == ["customer", "agent"] * 3


def test_masks_and_logprobs(run, tok):
    eps, agent, customer, _ = run
    user, asst, end = (tok.convert_tokens_to_ids(t) for t in (USER, ASSISTANT, END_OF_TURN))
    for idx, e in enumerate(eps):
        n = len(e.token_ids)
        assert len(e.agent_mask) == len(e.customer_mask) == len(e.agent_logprobs) == n
        assert not any(a and c for a, c in zip(e.agent_mask, e.customer_mask, strict=True))
        user_pos = {i for seg in segments(e.token_ids, user, end) for i in seg}
        assert all(e.agent_mask[i] == 0 for i in user_pos)  # no customer token is ever the agent's
        assert {i for i, c in enumerate(e.customer_mask) if c} == user_pos
        generated = agent.outputs[idx]
        assert sum(e.agent_mask) == sum(len(o.token_ids) for o in generated)
        own = [e.token_ids[i] for i, a in enumerate(e.agent_mask) if a]
        assert own == [t for o in generated for t in o.token_ids]  # the very ids generated, in order
        turns = {i for seg in segments(e.token_ids, asst, end) for i in range(seg.start, seg.stop + 1)}
        assert {i for i, a in enumerate(e.agent_mask) if a} <= turns  # content and end of assistant turns only
        for mask, lps in ((e.agent_mask, e.agent_logprobs), (e.customer_self_mask, e.customer_logprobs)):
            assert all(lp <= 0 for lp in lps)
            assert all(lp == 0 for lp, m in zip(lps, mask, strict=True) if not m)
            assert sum(1 for lp, m in zip(lps, mask, strict=True) if m and lp < 0) >= 0.9 * sum(mask)
        assert sum(e.customer_self_mask) == sum(len(o.token_ids) for o in customer.outputs[idx])


def _logprob_gaps(episodes, model) -> list[float]:
    """|rollout logprob - teacher-forced float32 logprob| at every agent token with a logprob."""
    gaps = []
    for e in episodes:
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([e.token_ids])).logits[0].float(), -1)
        gaps += [
            abs(logp[i - 1, e.token_ids[i]].item() - lp)
            for i, (m, lp) in enumerate(zip(e.agent_mask, e.agent_logprobs, strict=True))
            if m and lp != 0
        ]
    return gaps


def test_logprobs_match_a_teacher_forced_forward_pass(tok, models, scenarios):
    eps = rollout(tok, models, scenarios[:3], kv="auto")[0]  # the cache in the model's float32
    gaps = _logprob_gaps(eps, models[0])
    assert len(gaps) > 30 and max(gaps) < 1e-4


def test_a_bfloat16_cache_is_bfloat16_and_moves_logprobs_little(run, models):
    assert run[1].inner.kv_dtype == run[2].inner.kv_dtype == torch.bfloat16  # asked for, for a float32 model
    eps = run[0][:3]
    gaps = _logprob_gaps(eps, models[0])
    # Narrowed for real (float32 agrees to 1e-4, above), yet within a few thousandths of a nat.
    assert len(gaps) > 30 and 1e-4 < max(gaps) < 1e-2 and sum(gaps) / len(gaps) < 2e-3


def test_the_default_cache_is_the_models_on_a_cpu_and_bfloat16_on_a_gpu(tok, models):
    """On CPUs a bfloat16 cache made decoding slower, with bfloat16 arithmetic in hardware or without it
    (docs/results.md); on a GPU it halves the bytes each step reads."""
    assert policies.default_kv_cache_dtype("cpu") == "auto"
    assert LMPolicy(models[0], tok, "agent").kv_dtype is None  # None: the model's own float32
    assert policies.default_kv_cache_dtype("cuda") == "bfloat16"


def test_generated_messages_have_clean_edges_and_stop_once(run, tok):
    end = tok.convert_tokens_to_ids(END_OF_TURN)
    for rec in run[1:3]:
        for outs in rec.outputs.values():
            for o in outs:
                assert o.text == o.text.strip()
                assert end not in o.token_ids[:-1] and (o.token_ids[-1] == end or len(o.token_ids) == MAX_NEW)


def test_finished_episodes_drop_out_and_calls_act_again(tok, models, scenarios):
    # Scripted interjections inside LM episodes: episodes 0-4 end in round 2; episode 5 calls a tool first.
    script = {(i, 3): '<call>end_conversation {"resolution": "done"}</call>' for i in range(5)}
    script[(5, 1)] = '<call>lookup_account {"customer_id": "C000000"}</call>'
    stats = RolloutStats()
    eps, agent, customer = rollout(tok, models, scenarios, script=script, stats=stats)
    assert stats.batch_sizes == [
        ("customer", 10), ("agent", 10), ("agent", 1),
        ("customer", 10), ("agent", 10),
        ("customer", 5), ("agent", 5),
    ]  # fmt: skip
    assert customer.inner.batch_sizes == [10, 10, 5]
    assert [e.ended_by for e in eps[:5]] == ["end_conversation"] * 5 and eps[5].ended_by is None
    assert [m["role"] for m in eps[5].messages[:5]] == ["system", "user", "assistant", "tool", "assistant"]
    for e in eps:
        assert tok.decode(e.token_ids, skip_special_tokens=False) == tok.apply_chat_template(e.messages, tokenize=False)


def test_deterministic_given_the_seed(tok, models, scenarios, run):
    again = rollout(tok, models, scenarios)[0]
    assert [e.token_ids for e in again] == [e.token_ids for e in run[0]]
    assert [e.agent_logprobs for e in again] == [e.agent_logprobs for e in run[0]]
    other = rollout(tok, models, scenarios, seed=1)[0]
    assert [e.token_ids for e in other] != [e.token_ids for e in run[0]]


def test_kv_reuse_generates_what_full_prefill_generates(tok, models, scenarios):
    greedy, prefilled = {}, {}
    for reuse in (True, False):
        # float32: this compares cache bookkeeping; a bfloat16 cache rounds differently along the two paths
        opts = {"max_new_tokens": MAX_NEW, "greedy": True, "reuse_kv": reuse, "kv_cache_dtype": "auto"}
        agent = LMPolicy(models[0], tok, "agent", **opts)
        customer = LMPolicy(models[1], tok, "customer", **opts)
        greedy[reuse] = run_episodes(scenarios[:6], agent, customer, max_turns=3, seed=0)
        prefilled[reuse] = agent.prefill_tokens + customer.prefill_tokens
        assert not agent._kv and not customer._kv  # released when the episodes ended
    # Only new tokens are pre-filled (and the shared system prompt once), yet the same tokens come out.
    assert sum(prefilled[True]) < 0.4 * sum(prefilled[False])
    assert all(a < b for a, b in zip(prefilled[True], prefilled[False], strict=True))
    assert [e.token_ids for e in greedy[True]] == [e.token_ids for e in greedy[False]]


def test_customer_never_writes_the_intent_code_or_the_agents_markers(run, tok):
    """The goal ends with ``<intent>NAME``; a customer LM is barred from those tokens (the agent is not)."""
    eps, agent, customer, _ = run
    banned = set(customer_banned_ids(tok))
    assert tok.convert_tokens_to_ids(INTENT) in banned and len(banned) > len(known_intents())
    said = [t for outs in customer.outputs.values() for o in outs for t in o.token_ids]
    written = [t for outs in agent.outputs.values() for o in outs for t in o.token_ids]
    assert len(said) > 200 and not banned & set(said)
    assert banned & set(written)  # a random-init model writes them when not barred: the check can fail


def test_opens_with_utterance_then_the_lm_writes(tok, models, scenarios):
    """`_coop`'s customer: its first message is the scenario's own utterance, in both views; every later one is
    the LM's (generated ids, logprobs), conditioned on that opening; finished conversations' KV is released."""
    lm = LMPolicy(models[1], tok, "customer", max_new_tokens=MAX_NEW)
    customer = Recording(OpensWithUtterance(lm))
    agent = LMPolicy(models[0], tok, "agent", max_new_tokens=MAX_NEW)
    eps = run_episodes(scenarios, agent, customer, max_turns=3, seed=0)
    for i, ep in enumerate(eps):
        said = [m["content"] for m in ep.messages if m["role"] == "user"]
        own = [m["content"] for m in ep.customer_messages if m["role"] == "assistant"]
        assert said[0] == own[0] == ep.scenario.utterance.strip()
        outs = customer.outputs[i]
        assert outs[0].token_ids is None  # scripted: the rollout encoded it
        assert all(o.token_ids and o.logprobs for o in outs[1:])
        assert own[1:] == [o.text.strip() for o in outs[1:]]  # the customer's own view: what the LM wrote
    assert any(len(customer.outputs[i]) > 1 for i in range(len(eps)))  # the LM did write later turns
    assert lm._kv == {}  # released through the wrapper


def test_continues_utterance_writes_after_the_scenarios_words_which_are_not_its_tokens(tok, models, scenarios):
    """An adversary's first message: the scenario's utterance as a given prefix, then the LM's own words. Both views
    read the whole message; only the generated ids are the customer's (mask 1), with logprobs a teacher-forced
    pass over its view reproduces, so GRPO trains on what it wrote after the utterance and on nothing else."""
    lm = LMPolicy(models[1], tok, "customer", max_new_tokens=MAX_NEW, kv_cache_dtype="auto")
    customer = Recording(ContinuesUtterance(lm))
    agent = LMPolicy(models[0], tok, "agent", max_new_tokens=MAX_NEW)
    eps = run_episodes(scenarios, agent, customer, max_turns=3, seed=0)
    asst, end = (tok.convert_tokens_to_ids(t) for t in (ASSISTANT, END_OF_TURN))
    gaps, went_on = [], []  # went_on: whether what it added after the utterance starts with a space
    for i, ep in enumerate(eps):
        outs, utterance = customer.outputs[i], ep.scenario.utterance.strip()
        prefix = tok.encode(utterance, add_special_tokens=False)
        assert outs[0].prefix_ids == prefix and all(o.prefix_ids is None for o in outs[1:])
        if outs[0].token_ids[0] != end:
            went_on.append(tok.decode(outs[0].token_ids[:1])[:1].isspace())
        said = [m["content"] for m in ep.messages if m["role"] == "user"]
        own = [m["content"] for m in ep.customer_messages if m["role"] == "assistant"]
        assert said[0].startswith(utterance) and own[0].startswith(utterance)
        assert tok.decode(ep.customer_token_ids, skip_special_tokens=False) == tok.apply_chat_template(
            ep.customer_messages, tokenize=False
        )
        first = segments(ep.customer_token_ids, asst, end)[0]
        ids = ep.customer_token_ids
        assert ids[first.start : first.start + len(prefix)] == prefix
        assert not any(ep.customer_self_mask[first.start : first.start + len(prefix)])  # given, not its own
        assert sum(ep.customer_self_mask) == sum(len(o.token_ids) for o in outs)
        sample = side_sample(ep, "customer")
        assert sample["prompt_ids"][-len(prefix) :] == prefix  # GRPO's prompt ends with the utterance
        with torch.no_grad():
            logp = torch.log_softmax(models[1](torch.tensor([ids])).logits[0].float(), -1)
        gaps += [
            abs(logp[j - 1, ids[j]].item() - lp)
            for j, (m, lp) in enumerate(zip(ep.customer_self_mask, ep.customer_logprobs, strict=True))
            if m and lp != 0
        ]
    assert len(gaps) > 30 and max(gaps) < 1e-4
    # The clean-edges rule bans a leading space only where a message starts, not after a given prefix.
    assert any(went_on), went_on
    assert lm._kv == {}  # released through the wrapper
