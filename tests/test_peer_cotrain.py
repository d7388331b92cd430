"""Co-training by the cohort's joint vote (sparring.train.peer_cotrain): the label is the product of the members'
distributions, only the most confident share is labelled, refreshed labels are the members' current votes, the
pool's own labels never reach a trainer, and a member that collapses is frozen and reported."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from sparring.drivers.peer_rl import hold_out
from sparring.lm.chat import known_intents
from sparring.params import load_params
from sparring.settings import SFTSettings
from sparring.train import peer_cotrain, peer_expectation
from sparring.train.peer_cotrain import intent_logprobs, joint_votes, train_cotrain
from sparring.train.peer_reward import route_intents

INTENTS = sorted(known_intents())
KEEP = ["card_arrival", "lost_or_stolen_card", "exchange_rate", "top_up_failed"]
PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


def test_the_joint_vote_is_the_product_of_the_views_and_keeps_the_most_confident():
    """Member a is sure of x0's intent 0, b leans to 1 on x0: the product picks 0; on x1 both lean to 2 but weakly,
    so under keep 0.5 only x0 is labelled; one view alone gives its own argmax."""
    a = torch.log(torch.tensor([[0.90, 0.05, 0.05], [0.30, 0.30, 0.40]]))
    b = torch.log(torch.tensor([[0.30, 0.60, 0.10], [0.30, 0.30, 0.40]]))
    votes, confidence = joint_votes([a, b], ["i0", "i1", "i2"], keep=0.5)
    assert votes == ["i0", None] and confidence[0] > confidence[1]
    assert joint_votes([b], ["i0", "i1", "i2"], keep=1.0)[0] == ["i1", "i2"]
    with pytest.raises(ValueError, match="at least one member"):
        joint_votes([], ["i0"], keep=1.0)
    one = load_params(PARAMS, "quick").peer_rl
    one = one.replace(members={"final": one.members["final"]}, cotrain={"views": "all", "learners": ["final"]})
    assert list(one.members) == ["final"]  # a cohort of one: the agent's own confident labels (self-training)
    with pytest.raises(ValueError, match="demos must be > 0"):
        one.replace(cotrain={"loss": "sft", "demos": 0})


def test_hold_out_measures_on_labelled_rows_never_in_the_pool():
    intents = ["a", None, "b", "c", None, "a", "b", "c", "a", None]
    measured, probed, pool = hold_out(intents, measure=3, probe=2, n=100, seed=0)
    assert len(measured) == 3 and len(probed) == 2 and all(intents[i] is not None for i in measured + probed)
    assert not set(pool) & set(measured + probed) and len(pool) == 5
    assert hold_out(intents, 3, 2, 100, seed=0) == [measured, probed, pool]  # seeded
    from sparring.data.sources import IngestError

    with pytest.raises(IngestError, match="holds 7 labelled rows; peer_rl.measure \\+ peer_rl.probe need 8"):
        hold_out(intents, measure=6, probe=2, n=1, seed=0)


@pytest.fixture(scope="module")
def cohort(tiny_routers):
    """Two tiny routers of 4 intents, one trained longer than the other."""
    models, texts, _ = tiny_routers({"final": 200, "peer": 120})
    return models, texts


def _settings(**cotrain):
    cfg = load_params(PARAMS, "quick").peer_rl
    exact = SFTSettings(max_steps=20, batch_size=8, learning_rate=1e-2, warmup_steps=0, max_length=64)
    members = {"final": cfg.members["final"], "peer": cfg.members["neox"]}
    cotrain = {"keep": 1.0, "rounds": 2, "views": "others", "learners": None, "loss": "exact", **cotrain}
    return cfg.replace(
        members=members, reward="cohort", estimate="exact", exact=exact, collapse_window=10**4, cotrain=cotrain
    )


def test_refreshed_labels_are_the_peers_current_votes_and_the_pools_labels_never_reach_a_trainer(
    cohort, tok, tmp_path, monkeypatch
):
    """views: others, two rounds: each round's labels of a learner are its peer's greedy votes when the round's
    labels were made (the peer trained in between, so round 2's differ from round 1's); every row a trainer receives
    carries those labels, none the pool's own (all ``pin_blocked``, an intent no member names)."""
    models, texts = cohort
    models = copy.deepcopy(models)
    scored: list[tuple[str, list]] = []  # (member, its greedy votes) as each round scores the pool
    handed: list[tuple[str, list]] = []  # (learner, the labels it was given)
    real_scores, real_expected = peer_cotrain.intent_logprobs, peer_cotrain.train_expected
    real_sft = peer_expectation.train_sft
    rows: list = []

    def scores(model, tokenizer, pool, intents, label):  # noqa: ANN001, ANN202
        scored.append((next(k for k in models if models[k] is model), route_intents(model, tokenizer, list(pool))))
        return real_scores(model, tokenizer, pool, intents, label)

    def expected(model, tokenizer, pool, intents, kind, settings, out, **kw):  # noqa: ANN001, ANN003, ANN202
        handed.append((next(k for k in models if models[k] is model), list(kw["teacher_votes"])))
        return real_expected(model, tokenizer, pool, intents, kind, settings, out, **kw)

    def sft(model, tokenizer, conversations, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        rows.extend(conversations)
        return real_sft(model, tokenizer, conversations, *args, **kwargs)

    monkeypatch.setattr(peer_cotrain, "intent_logprobs", scores)
    monkeypatch.setattr(peer_cotrain, "train_expected", expected)
    monkeypatch.setattr(peer_expectation, "train_sft", sft)
    gold = ["pin_blocked"] * len(texts)
    result = train_cotrain(models, {k: tok for k in models}, texts, _settings(), tmp_path, gold=gold)
    assert [k for k, _ in scored] == ["final", "peer"] * 2 and [k for k, _ in handed] == ["final", "peer"] * 2
    assert result.routings == 4 * len(texts)  # the pool scored by both members in both rounds: the phase's count
    for r in range(2):
        votes = dict(scored[2 * r : 2 * r + 2])
        for learner, labels in handed[2 * r : 2 * r + 2]:
            other = votes["peer" if learner == "final" else "final"]
            named = [(a, b) for a, b in zip(labels, other, strict=True) if b is not None]
            assert len(named) > len(texts) // 2 and all(a == b for a, b in named)
    assert scored[0][1] != scored[2][1] or scored[1][1] != scored[3][1]  # refreshed from trained weights
    labels = [c[-1]["intent"] for c in rows]
    assert labels and "pin_blocked" not in labels
    assert all(len(result.logs[k].steps) == 20 for k in models)
    assert [row["step"] for row in result.logs["final"].steps] == list(range(1, 21))


def test_a_learner_list_keeps_the_others_fixed_and_the_learner_moves_toward_its_label(cohort, tok, tmp_path):
    """The learner's mean log-probability of the other member's votes rises (what the exact loss trains; greedy
    agreement over 24 utterances can tie, 17/24 before and after on one CPU though the votes changed); the other
    member's weights stay bit for bit."""
    models, texts = cohort
    models = copy.deepcopy(models)
    final_before = {k: v.clone() for k, v in models["final"].state_dict().items()}
    votes = [INTENTS.index(v) for v in route_intents(models["final"], tok, texts)]

    def fit(model) -> float:  # noqa: ANN001
        return intent_logprobs(model, tok, texts, INTENTS, "fit")[range(len(votes)), votes].mean().item()

    before = fit(models["peer"])
    result = train_cotrain(models, {k: tok for k in models}, texts, _settings(learners=["peer"]), tmp_path)
    assert all(torch.equal(final_before[k], v) for k, v in result.models["final"].state_dict().items())
    assert result.logs["final"].steps == [] and len(result.logs["peer"].steps) == 20
    assert fit(result.models["peer"]) > before + 0.05  # -0.91 -> -0.74 here


def test_a_member_that_collapses_is_frozen_and_reported(cohort, tok, tmp_path):
    """A guard that fires on any window (one intent above 1% of 8 votes): each member is frozen from its first step
    (its round goes on without updates), is not trained in the next round, and the log says why."""
    models, texts = cohort
    models = copy.deepcopy(models)
    said: list[str] = []
    cfg = _settings().replace(collapse_window=8, collapse_share=0.01)
    result = train_cotrain(models, {k: tok for k in models}, texts, cfg, tmp_path, say=said.append)
    for name in models:
        log = result.logs[name]
        assert log.collapsed and log.collapsed_step == 1 and len(log.steps) == 10  # round 2 never ran
    assert any("collapsed" in line and "frozen" in line for line in said)


def test_under_sft_the_learner_keeps_the_demos_and_learns_the_joint_labels_never_the_pools(
    cohort, tok, heldout, tmp_path, monkeypatch
):
    """loss: sft: the learner's fine-tune holds the expert's demonstrations and the labelled utterances answered as
    the demos answer an opening (not a bare intent), each with the other member's vote, none with the pool's own
    label; one log row per round; the other member untouched. (What it gains on real utterances is the benchmark's:
    a 1-layer test model does not keep 4 intents through 4 long demos.)"""
    from sparring.train.demos import expert_demonstrations, first_reply

    models, texts = cohort
    models = copy.deepcopy(models)
    demos = expert_demonstrations([s for s in heldout if s.intent in KEEP][:4], 0)  # the intents the members know
    assert demos
    seen: list = []
    real = peer_cotrain.train_sft

    def recording(model, tokenizer, conversations, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(list(conversations))
        return real(model, tokenizer, conversations, *args, **kwargs)

    monkeypatch.setattr(peer_cotrain, "train_sft", recording)
    votes = route_intents(models["final"], tok, texts)
    final_before = {k: v.clone() for k, v in models["final"].state_dict().items()}
    peer_before = {k: v.clone() for k, v in models["peer"].state_dict().items()}
    sft = SFTSettings(epochs=4, batch_size=4, learning_rate=3e-3, warmup_steps=0, max_length=1024)
    cfg = _settings(learners=["peer"], loss="sft", rounds=1, sft=sft)
    gold = ["pin_blocked"] * len(texts)
    result = train_cotrain(models, {k: tok for k in models}, texts, cfg, tmp_path, demos=demos, gold=gold)
    (rows,) = seen
    routed = [c for c in rows if len(c) == 2]  # user opening, agent reply
    assert len(rows) == len(routed) + len(demos) and all(d in rows for d in demos)
    labels = [c[-1]["intent"] for c in routed]
    assert sorted(labels) == sorted(v for v in votes if v is not None) and "pin_blocked" not in labels
    assert {c[-1]["content"] for c in routed} == {first_reply(demos)} != {""}
    assert len(result.logs["peer"].steps) == 1 and result.logs["final"].steps == []
    assert all(torch.equal(final_before[k], v) for k, v in result.models["final"].state_dict().items())
    assert not all(torch.equal(peer_before[k], v) for k, v in result.models["peer"].state_dict().items())
    with pytest.raises(ValueError, match="needs the expert's demonstrations"):
        train_cotrain(models, {k: tok for k in models}, texts, cfg, tmp_path)


def test_the_demos_are_played_against_each_named_customer_and_the_camouflaging_one_hides_the_request(heldout):
    from types import SimpleNamespace

    from sparring.drivers.peer_rl import cohort_demos
    from sparring.timing import Phases

    agent = SimpleNamespace(config=SimpleNamespace(agent_system_prompt=""))
    picked = heldout[:4]
    cfg = load_params(PARAMS, "quick").peer_rl
    both = cfg.replace(cotrain=cfg.cotrain.replace(demos=4, demo_customers=["cooperative", "camouflaging"]))
    coop = cohort_demos(picked, both.replace(cotrain=both.cotrain.replace(demo_customers=["cooperative"])), agent,
                        "described", 0, Phases())  # fmt: skip
    demos = cohort_demos(picked, both, agent, "described", 0, Phases())
    assert len(coop) == 4 and len(demos) == 8 and demos[:4] == coop  # every expert episode passes, in order
    openings = [next(m["content"] for m in d if m["role"] == "user") for d in demos]
    assert all(a != b and len(b) > len(a) for a, b in zip(openings[:4], openings[4:], strict=True))
