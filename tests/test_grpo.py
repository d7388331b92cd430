"""Multi-turn GRPO through TRL's rollout_func: masks, logprobs, groups, and a few real training steps."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import torch

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, ExpertAgent
from sparring.data.synthetic import generate_utterances
from sparring.judge.rewards import Judge
from sparring.lm.chat import (
    ASSISTANT,
    END_OF_TURN,
    SYSTEM,
    TOOL,
    USER,
    ParsedCall,
    known_intents,
    render_agent_message,
)
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.policies import LMPolicy, TurnOutput, TurnRequest
from sparring.lm.tokenizer import train_tokenizer
from sparring.seeds import derive_seed
from sparring.settings import GRPOSettings
from sparring.train.grpo import (
    make_batch_func,
    make_rollout_func,
    mean_abs_advantage,
    side_sample,
    train_side,
    zero_spread_groups,
)
from sparring.train.rollout_ahead import AHEAD_FILE, RolloutAhead, joined
from sparring.train.world_reward import ConstantStyle  # fixed faithfulness/realism: the plumbing is under test
from sparring.world.scenarios import sample_scenarios
from sparring.world.taxonomy import load_taxonomy

torch.set_num_threads(1)
SPEC = ModelSpec(
    hidden_size=48, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=96, tie_word_embeddings=False
)
G = 4


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(generate_utterances(3, 0)["text"].to_list(), 700, sorted(known_intents()))


@pytest.fixture(scope="module")
def scenarios():
    tools = {name: i.tool for name, i in load_taxonomy().intents.items()}
    frame = generate_utterances(1, 7).with_columns(
        id=pl.format("g-{}", pl.int_range(pl.len())),
        tool=pl.col("intent").replace_strict(tools),
        source=pl.lit("synthetic"),
    )
    return sample_scenarios(frame, 6, seed=2)


def settings(**kw) -> GRPOSettings:
    base = dict(
        num_generations=G, scenarios_per_step=2, max_steps=20, max_new_tokens=8, max_turns=2, max_calls_per_turn=2
    )
    return GRPOSettings(**{**base, **kw})


class LookupFirst:
    """The agent's first message is a scripted lookup_account call (so tool results enter its view); the rest
    is the LM's. Scripted ids count as the agent's own, as a rollout records them."""

    def __init__(self, inner: LMPolicy) -> None:
        self.inner, self.tokenizer = inner, inner.tokenizer

    def release(self, keys=None) -> None:
        self.inner.release(keys)

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        lm = iter(self.inner.act([r for r in requests if r.turn != 1]) or [])
        out = []
        for r in requests:
            if r.turn == 1:
                call = ParsedCall("lookup_account", {"customer_id": r.scenario.identity["customer_id"]})
                out.append(TurnOutput(render_agent_message("Let me check.", call)))
            else:
                out.append(next(lm))
        return out


def turns(ids: list[int], tok) -> list[tuple[str, range, int]]:
    """(role, content positions, end position) of every turn; generated content never holds <|end|>."""
    marks = {tok.convert_tokens_to_ids(m): r for m, r in ((SYSTEM, "system"), (USER, "user"), (ASSISTANT, "assistant"))}
    marks[tok.convert_tokens_to_ids(TOOL)] = "tool"
    end = tok.convert_tokens_to_ids(END_OF_TURN)
    out, i = [], 0
    while i < len(ids):
        stop = ids.index(end, i + 1)
        out.append((marks[ids[i]], range(i + 1, stop), stop))
        i = stop + 1
    return out


def check_masks(sample: dict, tok, own_role: str = "assistant") -> dict[str, int]:
    """env_mask is 0 on every token outside the side's own turns and 1 on their content; returns role counts."""
    ids = sample["prompt_ids"] + sample["completion_ids"]
    mask = [0] * len(sample["prompt_ids"]) + sample["env_mask"]
    assert len(sample["completion_ids"]) == len(sample["env_mask"]) == len(sample["logprobs"])
    assert mask[len(sample["prompt_ids"])] == 1  # the completion starts at the side's first generated token
    counts: dict[str, int] = {}
    for role, content, end in turns(ids, tok):
        counts[role] = counts.get(role, 0) + 1
        assert mask[content.start - 1] == 0  # role markers are never the side's
        if role == own_role:
            assert all(mask[p] == 1 for p in content)
        else:
            assert not any(mask[p] for p in content) and mask[end] == 0, role
    return counts


def test_agent_completion_masks_out_customer_and_tool_tokens(tok, scenarios):
    model = build_model(SPEC, tok)
    rollout = make_rollout_func(
        "agent", tok, CooperativeCustomer(), scenarios, Judge(ConstantStyle()), settings(), wrap=LookupFirst
    )
    out = rollout([f"{i}|" for i in (0, 1) for _ in range(G)], SimpleNamespace(model=model))
    assert len(out["prompt_ids"]) == 2 * G and len(out["side_reward"]) == 2 * G
    seen: dict[str, int] = {}
    for k in range(2 * G):
        sample = {f: out[f][k] for f in ("prompt_ids", "completion_ids", "env_mask", "logprobs")}
        for role, n in check_masks(sample, tok).items():
            seen[role] = seen.get(role, 0) + n
    assert seen.get("tool", 0) >= 2 * G and seen.get("user", 0) >= 2 * G  # the masks were put to the test


def test_customer_completion_masks_out_agent_tokens(tok, scenarios):
    model = build_model(SPEC, tok)
    rollout = make_rollout_func("customer", tok, ExpertAgent(), scenarios, Judge(ConstantStyle()), settings())
    out = rollout([f"{i}|" for i in (2, 3) for _ in range(G)], SimpleNamespace(model=model))
    for k in range(2 * G):
        sample = {f: out[f][k] for f in ("prompt_ids", "completion_ids", "env_mask", "logprobs")}
        counts = check_masks(sample, tok)
        assert counts.get("user", 0) >= 1 and "tool" not in counts  # the agent's words; tools stay in its view


def test_logprobs_align_with_the_model_and_groups_share_a_scenario(tok, scenarios):
    model = build_model(SPEC, tok)
    s = settings(temperature=0.7)
    rollout = make_rollout_func("agent", tok, CooperativeCustomer(), scenarios, Judge(ConstantStyle()), s)
    out = rollout([f"{i}|" for i in (4, 5) for _ in range(G)], SimpleNamespace(model=model))
    for k in range(2 * G):
        prompt, completion = out["prompt_ids"][k], out["completion_ids"][k]
        mask, logp = torch.tensor(out["env_mask"][k]), torch.tensor(out["logprobs"][k])
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1] / s.temperature
        expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]
        own = mask.bool()
        assert torch.allclose(logp[own], expected[own], atol=2e-3)
        assert (logp[~own] == 0).all()
    for grp in (range(0, G), range(G, 2 * G)):  # one scenario per group: same opening, different samples
        assert len({tuple(out["prompt_ids"][k]) for k in grp}) == 1
        assert len({tuple(out["completion_ids"][k]) for k in grp}) > 1
    assert out["prompt_ids"][0] != out["prompt_ids"][G]


def test_opponent_chooser_gives_each_group_one_opponent(tok, scenarios):
    seen: dict[str, set[int]] = {"coop": set(), "camo": set()}

    class Tagged(CooperativeCustomer):
        def __init__(self, name: str, inner) -> None:
            self.name, self.inner = name, inner

        def act(self, requests):
            seen[self.name].update(r.key[1] for r in requests)
            return self.inner.act(requests)

    opponents = [Tagged("coop", CooperativeCustomer()), Tagged("camo", CamouflagingCustomer())]
    model = build_model(SPEC, tok)
    rollout = make_rollout_func(
        "agent", tok, lambda sc, seed: opponents[seed % 2], scenarios, Judge(ConstantStyle()), settings()
    )
    rollout([f"{i}|" for i in range(4) for _ in range(G)], SimpleNamespace(model=model))
    assert seen["coop"] and seen["camo"] and not seen["coop"] & seen["camo"]
    for g0 in range(0, 4 * G, G):
        group = set(range(g0, g0 + G))
        assert group <= seen["coop"] or group <= seen["camo"]


class EvenTokens:
    """A reward a tiny model can learn in a few steps: the share of the agent's own tokens with even ids."""

    def score(self, episodes):
        out = []
        for ep in episodes:
            own = [t for t, m in zip(ep.token_ids, ep.agent_mask, strict=True) if m]
            out.append({"agent_reward": sum(t % 2 == 0 for t in own) / max(1, len(own))})
        return out


def even_mass(model, prompts: list[list[int]]) -> float:
    with torch.no_grad():
        p = [torch.softmax(model(torch.tensor([q])).logits[0, -1], -1) for q in prompts]
    return float(torch.stack([x[0::2].sum() for x in p]).mean())


# A batch played a step ahead is an update stale: at this toy's lr 3e-2 the clip holds it back, 24 steps reach what
# 16 on-policy do (0.50 -> 0.68, against 0.57 at 16).
@pytest.mark.parametrize(("ahead", "steps"), [(0, 16), (2, 24)], ids=["on_policy", "rollout_ahead"])
def test_grpo_steps_change_weights_and_raise_a_learnable_reward(tok, scenarios, ahead, steps):
    model = build_model(SPEC, tok)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    probe = [side_sample(ep, "agent")["prompt_ids"] for ep in _episodes(model, tok, scenarios)]
    before = even_mass(model, probe)
    s = settings(max_steps=steps, learning_rate=3e-2, loss_type="grpo", rollout_ahead=ahead)
    result = train_side(model, tok, "agent", CooperativeCustomer(), scenarios, EvenTokens(), s, seed=3)
    assert len(result.steps) == steps and result.update_tokens > 0 and result.trained_tokens > 0
    losses = [c["loss"] for c in result.curves if "loss" in c]
    assert losses and all(np.isfinite(losses))
    grads = [c["grad_norm"] for c in result.curves if "grad_norm" in c]
    assert grads and all(np.isfinite(g) and g > 0 for g in grads)
    changed = [k for k, v in result.model.state_dict().items() if not torch.equal(v, start[k])]
    assert "lm_head.weight" in changed
    after = even_mass(result.model, probe)
    assert after > before + 0.1, (before, after)  # 0.50 -> 0.87 when written (rollout_ahead: 0.68)
    assert result.update_tokens_per_s > 0 and result.reward_stats()["reward_last"] >= 0


def _episodes(model, tok, scenarios):
    from sparring.rollout import run_episodes

    agent = LMPolicy(model, tok, "agent", max_new_tokens=4)
    return run_episodes(scenarios, agent, CooperativeCustomer(), max_turns=1, seed=derive_seed(0, "probe"))


class NamesIntent:
    """Scripted agent messages naming the scenario's own intent on even episodes and another one on odd; any
    turn after the first (the window must not reach one) would show in the completion."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        wrong = sorted(known_intents())
        out = []
        for r in requests:
            right = r.scenario.intent
            intent = right if r.key[1] % 2 == 0 else next(i for i in wrong if i != right)
            out.append(TurnOutput(render_agent_message("Please tell me your customer id.", intent=intent)))
        return out


def test_a_first_turn_completion_is_the_agents_first_message_rewarded_on_the_intent_it_names(tok, scenarios):
    s = settings(completion="first_turn", max_turns=4, max_calls_per_turn=3)
    judge = Judge(ConstantStyle())
    rollout = make_rollout_func("agent", tok, CooperativeCustomer(), scenarios, judge, s, wrap=lambda _: NamesIntent())
    out = rollout([f"{i}|" for i in (0, 1) for _ in range(G)], SimpleNamespace(model=build_model(SPEC, tok)))
    w = judge.weights.format
    assert out["side_reward"] == [1.0 + w if k % 2 == 0 else w for k in range(2 * G)]
    for k in range(2 * G):
        sample = {f: out[f][k] for f in ("prompt_ids", "completion_ids", "env_mask", "logprobs")}
        counts = check_masks(sample, tok)
        assert counts["user"] == counts["assistant"] == 1 and "tool" not in counts  # the opening, one agent turn
    with pytest.raises(ValueError, match="first_turn"):
        make_rollout_func("customer", tok, ExpertAgent(), scenarios, judge, s)
    with pytest.raises(ValueError, match="completion"):
        settings(completion="turn")


def test_an_agents_group_shares_the_customers_replies_until_the_agents_samples_differ(tok, scenarios):
    customer = LMPolicy(build_model(SPEC, tok), tok, "customer", max_new_tokens=8)  # untrained: every draw differs
    user = tok.convert_tokens_to_ids(USER)

    def customer_turns(completion: list[int]) -> tuple[int, ...]:
        return tuple(completion[completion.index(user) :]) if user in completion else ()

    def greedy(lm: LMPolicy) -> LMPolicy:  # the agent's LM, greedy: a group's G episodes say the same every turn
        return LMPolicy(lm.model, lm.tokenizer, "agent", max_new_tokens=8, greedy=True)

    for wrap, branches in ((None, True), (greedy, False)):
        rollout = make_rollout_func(
            "agent", tok, customer, scenarios, Judge(ConstantStyle()), settings(max_turns=3), wrap=wrap
        )
        out = rollout([f"{i}|" for i in (0, 1) for _ in range(G)], SimpleNamespace(model=build_model(SPEC, tok)))
        for grp in (range(0, G), range(G, 2 * G)):
            assert len({tuple(out["prompt_ids"][k]) for k in grp}) == 1  # one opening: the agent's same state
            later = [customer_turns(out["completion_ids"][k]) for k in grp]
            assert all(later)  # the customer spoke again in every episode ...
            assert (len(set(later)) > 1) == branches  # ... in its own words only once the agent's words differed


def test_mean_abs_advantage_is_trls_group_normalised_advantage():
    """Two groups of 2: one with spread (Â = ±0.5 / 0.707, TRL's unbiased std), one without (Â = 0)."""
    rewards = [1.0, 0.0, 0.5, 0.5]
    group = mean_abs_advantage(rewards, 2, "group")
    assert group == pytest.approx((2 * 0.5 / (np.std([1.0, 0.0], ddof=1) + 1e-4)) / 4)
    assert mean_abs_advantage(rewards, 2, "none") == pytest.approx(0.25)
    assert mean_abs_advantage([0.3] * 4, 2, "group") == 0.0


def test_dynamic_sampling_replaces_exactly_the_groups_without_spread(tok, scenarios):
    """Scenarios 0 and 1 always score 0.5 (no spread, Â = 0); the rest score the agent's even tokens (spread). With
    dynamic sampling the two dead groups are replaced by fresh groups that spread, and the live ones are untouched."""
    dead_ids = {scenarios[0].scenario_id, scenarios[1].scenario_id}

    class HalfConstant(EvenTokens):
        def score(self, episodes):
            even = super().score(episodes)
            dead = [ep.scenario.scenario_id in dead_ids for ep in episodes]
            return [{"agent_reward": 0.5} if d else r for d, r in zip(dead, even, strict=True)]

    model = build_model(SPEC, tok)
    prompts = [f"{i}|" for i in (0, 1, 2, 3) for _ in range(G)]
    outs, records = {}, {}
    for rounds in (0, 3):
        records[rounds] = []
        rollout = make_rollout_func(
            "agent", tok, CooperativeCustomer(), scenarios, HalfConstant(), settings(dynamic_sampling=rounds),
            record=records[rounds],
        )  # fmt: skip
        outs[rounds] = rollout(prompts, SimpleNamespace(model=model))
    plain, refilled = outs[0], outs[3]
    live = slice(2 * G, 4 * G)
    assert plain["completion_ids"][live] == refilled["completion_ids"][live]
    assert plain["side_reward"][live] == refilled["side_reward"][live]
    assert zero_spread_groups(plain["side_reward"], G) == [0, 1]
    assert zero_spread_groups(refilled["side_reward"], G) == []
    assert plain["prompt_ids"][0] != refilled["prompt_ids"][0] and plain["prompt_ids"][G] != refilled["prompt_ids"][G]
    assert records[0][0]["frac_zero_std_groups"] == 0.5 and records[3][0]["frac_zero_std_groups"] == 0.0
    assert records[3][0]["frac_zero_std_groups_sampled"] == 0.5 and records[3][0]["episodes_played"] > 4 * G
    # the sampling entropy logged is the mean −log p over the agent's own sampled tokens, counted by hand
    for out, record in ((plain, records[0][0]), (refilled, records[3][0])):
        own = [-lp for lps, mask in zip(out["logprobs"], out["env_mask"], strict=True)
               for lp, m in zip(lps, mask, strict=True) if m]  # fmt: skip
        assert own and record["sampled_entropy"] == pytest.approx(sum(own) / len(own)) and record["sampled_entropy"] > 0


def test_a_group_whose_customer_leaves_before_the_agent_speaks_is_played_again(tok, scenarios):
    """A customer who leaves in its opening ends the episode before the agent speaks: no completion to train on.
    Its group is replaced by a fresh one (a training step used to fail on it); the other keeps its scenario."""
    leaver = scenarios[0].scenario_id

    class LeavesAtOnce(CooperativeCustomer):
        def opening(self, request):
            return "Forget it, bye." if request.scenario.scenario_id == leaver else super().opening(request)

    model = build_model(SPEC, tok)
    rollout = make_rollout_func("agent", tok, LeavesAtOnce(), scenarios, Judge(ConstantStyle()), settings())
    out = rollout([f"{i}|" for i in (0, 1) for _ in range(G)], SimpleNamespace(model=model))
    assert all(1 in mask for mask in out["env_mask"])
    first = make_rollout_func("agent", tok, CooperativeCustomer(), scenarios, Judge(ConstantStyle()), settings())
    alone = first([f"{i}|" for i in (0, 1) for _ in range(G)], SimpleNamespace(model=model))
    assert out["prompt_ids"][G:] == alone["prompt_ids"][G:]  # the same scenario, opened the same way
    assert out["prompt_ids"][0] != alone["prompt_ids"][0]  # another scenario in the leaver's place


def test_groups_played_ahead_are_the_weights_of_the_step_before(tok, scenarios):
    """The worker plays call 1's ahead groups with the weights call 0 ran under; the update between reaches only
    the groups played here, and the two parts join as one batch of whole groups."""
    model = build_model(SPEC, tok)
    s = settings(rollout_ahead=1)
    batch = make_batch_func("agent", tok, CooperativeCustomer(), scenarios, Judge(ConstantStyle()), s, seed=5)
    trainer = SimpleNamespace(model=model, state=SimpleNamespace(global_step=0, max_steps=4))
    prompts = ["0|"] * (s.scenarios_per_step * G)
    with RolloutAhead(batch, model, scenarios, s.scenarios_per_step, G, 1, 1, seed=5) as ahead:
        first = ahead(prompts, trainer)
        (ahead0, here0), (ahead1, here1) = ahead.picked(0), ahead.picked(1)
        assert len(ahead0) == len(here0) == G and ahead0 + here0 != ahead1 + here1
        assert first == joined(batch(ahead0, 0, model, "ahead"), batch(here0, 0, model, "here"))[0]
        old = {k: v.clone() for k, v in model.state_dict().items()}
        with torch.no_grad():  # "the update": the live weights move while the worker plays
            model.lm_head.weight.mul_(3.0)
        second = ahead(prompts, trainer)
    stale = build_model(SPEC, tok)
    stale.load_state_dict(old)
    assert second == joined(batch(ahead1, 1, stale, "ahead"), batch(here1, 1, model, "here"))[0]
    assert second["completion_ids"][:G] != batch(ahead1, 1, model, "ahead")[0]["completion_ids"]


def test_a_run_with_rollouts_ahead_resumes_to_the_weights_of_an_uninterrupted_one(tok, scenarios, tmp_path, kill_at):
    s = settings(max_steps=4, learning_rate=3e-2, rollout_ahead=1)

    def run(folder, callbacks=(), resume=None):
        model = build_model(SPEC, tok)
        return train_side(model, tok, "agent", CooperativeCustomer(), scenarios, EvenTokens(), s, folder, seed=3,
                          save_every=2, callbacks=callbacks, resume_from=resume).model  # fmt: skip

    whole = run(tmp_path / "a")
    with pytest.raises(kill_at.Killed, match="killed before step 4"):
        run(tmp_path / "b", [kill_at(3)])
    assert (tmp_path / "b" / "checkpoint-2" / AHEAD_FILE).is_file()  # the batch step 3 plays, played with w_1
    again = run(tmp_path / "b", resume=tmp_path / "b" / "checkpoint-2")
    a, b = whole.state_dict(), again.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    start = build_model(SPEC, tok).state_dict()
    assert any(not torch.equal(a[k], start[k]) for k in a)
