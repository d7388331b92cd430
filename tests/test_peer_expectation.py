"""The peer reward in exact expectation (sparring.train.peer_expectation): its gradient is the expected reward's,
its expectation is what sampling estimates, and a learner trained by it moves toward its teacher."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from sparring.lm.chat import known_intents, parse_agent_message
from sparring.settings import ModelSpec, PeerRewardSettings, SFTSettings
from sparring.train.peer_expectation import (
    expected_loss,
    outcome_logprobs,
    outcome_reward,
    routing_prompts,
    score_intents,
    train_expected,
)
from sparring.train.peer_reward import accuracy, route_intents, sample_routings

INTENTS = sorted(known_intents())


def test_the_exact_loss_is_grpos_gradient_in_the_limit():
    """Step 2: −∇(μ/sg σ) is what GRPO's group-normalised estimate (1/G) Σ_g Â_g ∇log P(o_g) averages to, on a
    two-token reply whose outcome is one of 5 names or none; ∅ earns 0."""
    torch.manual_seed(0)
    first_logits, name_logits = torch.randn(3, 4), torch.randn(3, 9)  # token 0 is <intent>; tokens 0-4 are names
    first_logits[:, 0] += 2.0
    first_logits.requires_grad_(True)
    name_logits.requires_grad_(True)

    def logp() -> torch.Tensor:
        return outcome_logprobs(torch.log_softmax(first_logits, -1)[:, 0], torch.log_softmax(name_logits, -1)[:, :5])

    reward = torch.tensor([[1.0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0], [0.2, 0.5, 0.1, 0.1, 0.1, 0]])
    exact = torch.autograd.grad(expected_loss(logp(), "teacher", "group", reward).sum(), [first_logits, name_logits])
    probs = logp().detach().exp()
    groups, g = 4000, 64
    coef = torch.zeros_like(probs)
    for i in range(3):
        draws = torch.multinomial(probs[i], groups * g, replacement=True).view(groups, g)
        r = reward[i][draws]
        adv = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)
        coef[i].index_add_(0, draws.reshape(-1), adv.reshape(-1) / (groups * g))
    sampled = torch.autograd.grad(-(coef * logp()).sum(), [first_logits, name_logits])
    for e, s in zip(exact, sampled, strict=True):
        cos = torch.nn.functional.cosine_similarity(e.flatten(), s.flatten(), dim=0)
        assert cos > 0.97, cos
        assert 0.8 < s.norm() / e.norm() < 1.2


def test_rewards_distill_and_refusals():
    q = torch.softmax(torch.randn(2, 4), -1)
    logp = torch.log_softmax(torch.randn(2, 4), -1)
    kl = (logp.exp() * (logp - q.log())).sum(-1)
    assert torch.allclose(expected_loss(logp, "distill", "none", q), kl)
    graded = outcome_reward("graded", list("abc"), None, q)
    assert torch.equal(graded[:, :3], q[:, :3]) and bool((graded[:, 3] == 0).all())  # ∅ earns nothing
    r = outcome_reward("teacher", list("abc"), ["b", None])
    assert r.tolist() == [[0, 1, 0, 0], [0, 0, 0, 0]]
    with pytest.raises(ValueError, match="needs the teacher's votes"):
        outcome_reward("teacher", list("abc"))
    with pytest.raises(ValueError, match="not 'batch'"):
        expected_loss(logp, "teacher", "batch", r)


@pytest.fixture(scope="module")
def members(tiny_routers):
    """A teacher (240 SFT steps) and a learner that has the format but confuses the intents (120 steps), tiny."""
    return tiny_routers({"teacher": 240, "learner": 120}, seed=1)


def test_exact_expectation_equals_the_mean_of_sampled_rewards(members, tok):
    """On a fixed policy, μ = Σ_o P(o) r(o) is what the mean reward of many sampled routings estimates (a routing
    that names no intent earns 0), and the scored greedy vote is route_intents'."""
    models, texts, _ = members
    model, picked = models["learner"], texts[:3]
    scores = score_intents(model, tok, routing_prompts(model, tok, picked), INTENTS)
    assert scores.votes == route_intents(model, tok, picked)
    reward = outcome_reward("teacher", INTENTS, ["exchange_rate"] * len(picked))
    mu = (scores.outcomes * reward).sum(-1)
    n = 600
    for i, text in enumerate(picked):
        torch.manual_seed(i)
        _, outs = sample_routings(model, tok, [text] * n, PeerRewardSettings())
        rate = sum(parse_agent_message(o.text).intent == "exchange_rate" for o in outs) / n
        sd = (float(mu[i]) * (1 - float(mu[i])) / n) ** 0.5
        assert abs(rate - float(mu[i])) <= 4 * sd + 1e-3, (i, rate, float(mu[i]))


def test_a_confused_learner_gains_agreement_and_the_teacher_is_untouched(members, tok, tmp_path: Path):
    """A learner at chance on 4 intents, trained a few steps under the exact teacher reward on the teacher's votes,
    agrees with its teacher far more; the teacher's weights are bit-identical after scoring the pool."""
    models, texts, _ = members
    teacher_before = {k: v.clone() for k, v in models["teacher"].state_dict().items()}
    scores = score_intents(models["teacher"], tok, routing_prompts(models["teacher"], tok, texts), INTENTS)
    assert all(torch.equal(teacher_before[k], v) for k, v in models["teacher"].state_dict().items())
    learner = copy.deepcopy(models["learner"])  # the module's members stay as built for the tests after this one
    before = accuracy(route_intents(learner, tok, texts), scores.votes)
    cfg = SFTSettings(max_steps=30, batch_size=8, learning_rate=1e-2, warmup_steps=0, max_length=64)
    result = train_expected(
        learner, tok, texts, INTENTS, "teacher", cfg, tmp_path / "exact", teacher_votes=scores.votes, seed=0
    )
    after = accuracy(route_intents(result.model, tok, texts), scores.votes)
    assert len(result.log.steps) == 30 and result.log.collapsed is None
    assert after >= before + 0.25, (before, after)
    rewards, k = [row["reward"] for row in result.log.steps], cfg.logging_steps  # what the progress line shows
    means = [sum(rewards[i : i + k]) / len(rewards[i : i + k]) for i in range(0, 30, k)]
    assert [c["reward"] for c in result.sft.curves if "reward" in c] == pytest.approx(means)
    with pytest.raises(ValueError, match="2 teacher_votes for a pool of"):
        train_expected(learner, tok, texts, INTENTS, "teacher", cfg, tmp_path / "bad", teacher_votes=["a", "b"])


def test_the_exact_cohort_learns_from_its_teacher_never_from_the_csvs_labels(members, tok, tmp_path, monkeypatch):
    """``estimate: exact`` on a pool read from a ``text,category`` CSV whose categories are all wrong: every row
    the learner's trainer receives carries the teacher's vote, none the CSV's label; the teacher comes back
    untrained, the learner trained (one log row per step) and closer to its teacher."""
    from sparring.data.sources import read_unlabeled_csv
    from sparring.params import load_params
    from sparring.train import peer_expectation

    models, texts, _ = members
    csv = tmp_path / "pool.csv"
    csv.write_text("text,category\n" + "".join(f'"{t}",pin_blocked\n' for t in texts))
    frame = read_unlabeled_csv(csv, 1000)
    pool, gold = frame["text"].to_list(), frame["intent"].to_list()
    assert set(gold) == {"pin_blocked"}
    seen: list = []
    real = peer_expectation.train_sft

    def recording(model, tokenizer, conversations, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.extend(conversations)
        return real(model, tokenizer, conversations, *args, **kwargs)

    monkeypatch.setattr(peer_expectation, "train_sft", recording)
    cfg = load_params(Path(__file__).resolve().parents[1] / "params.yaml", "quick").peer_rl
    exact = SFTSettings(max_steps=30, batch_size=8, learning_rate=1e-2, warmup_steps=0, max_length=64)
    cohort = {"teacher": cfg.members["qwen"], "learner": cfg.members["neox"]}  # the names train_cohort_exact reads
    cfg = cfg.replace(members=cohort, estimate="exact", reward="teacher", teacher="teacher", exact=exact)
    cfg = cfg.replace(collapse_window=10**4)
    teacher_before = {k: v.clone() for k, v in models["teacher"].state_dict().items()}
    votes = route_intents(models["teacher"], tok, pool)
    agree_before = accuracy(route_intents(models["learner"], tok, pool), votes)
    result = peer_expectation.train_cohort_exact(copy.deepcopy(models), tok, pool, cfg, tmp_path / "exact", gold=gold)
    labels = [c[-1]["intent"] for c in seen]
    assert labels and "pin_blocked" not in labels and set(labels) <= set(votes) - {None}
    assert all(torch.equal(teacher_before[k], v) for k, v in result.models["teacher"].state_dict().items())
    assert result.logs["teacher"].steps == [] and len(result.logs["learner"].steps) == 30
    assert accuracy(route_intents(result.models["learner"], tok, pool), votes) > agree_before
    with pytest.raises(ValueError, match="estimate exact takes a teacher's reward"):
        cfg.replace(reward="ring")
    with pytest.raises(ValueError, match="needs estimate: exact"):
        cfg.replace(estimate="sampled", reward="graded")


def test_a_teacher_that_names_no_intent_leaves_the_learners_as_they_were_and_says_so(members, tok, tmp_path):
    """The quick profile's members route nothing yet: under ``estimate: exact`` the stage goes on, its learners
    untrained, and the log says why (train_expected itself refuses such a pool by name)."""
    from sparring.lm.models import build_model
    from sparring.params import load_params
    from sparring.train import peer_expectation

    models, texts, _ = members
    spec = ModelSpec(arch="llama", hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1)
    mute = build_model(spec, tok, seed=5)  # untrained: its greedy reply names no intent
    assert set(route_intents(mute, tok, texts)) == {None}
    cfg = load_params(Path(__file__).resolve().parents[1] / "params.yaml", "quick").peer_rl
    cohort = {"teacher": cfg.members["qwen"], "learner": cfg.members["neox"]}
    cfg = cfg.replace(members=cohort, estimate="exact", reward="teacher", teacher="teacher")
    learner_before = {k: v.clone() for k, v in models["learner"].state_dict().items()}
    said: list[str] = []
    cohort_models = {"teacher": mute, "learner": models["learner"]}
    result = peer_expectation.train_cohort_exact(cohort_models, tok, texts, cfg, tmp_path / "x", say=said.append)
    assert all(torch.equal(learner_before[k], v) for k, v in result.models["learner"].state_dict().items())
    assert result.logs["learner"].steps == [] and any("learner not trained" in line for line in said)
    with pytest.raises(ValueError, match="no pool utterance has a teacher's intent"):
        train_expected(models["learner"], tok, texts, INTENTS, "teacher", cfg.exact, tmp_path / "y",
                       teacher_votes=[None] * len(texts))  # fmt: skip


def test_the_peer_rl_driver_measures_each_member_before_and_after_on_the_same_utterances(members, tok, tmp_path):
    """drivers.peer_rl.train_and_measure: the probe picks the teacher, the learner's accuracy before and after is
    measured on the same utterances (labelled here with the teacher's votes) with the paired interval of its gain, the
    teacher comes back as it was, and the cohort summary evaluate copies holds no step logs."""
    from sparring.drivers.peer_rl import hold_out, train_and_measure
    from sparring.params import load_params

    models, texts, intents = members
    cfg = load_params(Path(__file__).resolve().parents[1] / "params.yaml", "quick").peer_rl
    exact = SFTSettings(max_steps=30, batch_size=8, learning_rate=1e-2, warmup_steps=0, max_length=64)
    cohort = {"teacher": cfg.members["qwen"], "learner": cfg.members["neox"]}
    cfg = cfg.replace(members=cohort, estimate="exact", reward="teacher", teacher=None, exact=exact, pool=len(texts))
    cohort_models = copy.deepcopy(models)
    teacher_before = {k: v.clone() for k, v in cohort_models["teacher"].state_dict().items()}
    dealt = hold_out(["pin_blocked"] * len(texts), 0, 0, len(texts), seed=0)[2]  # the pool, shuffled
    pool = [texts[i] for i in dealt], ["pin_blocked"] * len(texts)  # withheld intents: wrong ones do nothing
    votes = route_intents(models["teacher"], tok, texts)  # measured against: the learner's agreement with its teacher
    ran = train_and_measure(cohort_models, {"teacher": tok, "learner": tok}, pool, (texts, votes), (texts, intents),
                            cfg, tmp_path, seed=0, say=lambda _: None)  # fmt: skip
    assert ran.settings.teacher == "teacher" and ran.n_pool == len(texts) == ran.n_measure
    learner = ran.members["learner"]
    assert learner["after"] > learner["before"] and learner["gain_ci"][0] <= learner["after"] - learner["before"]
    assert len(learner["steps"]) == 30 and ran.members["teacher"]["steps"] == []
    assert all(torch.equal(teacher_before[k], v) for k, v in ran.models["teacher"].state_dict().items())
    before_votes, after_votes = ran.votes["learner"]  # the routings the accuracies were computed from
    assert accuracy(after_votes, votes) == learner["after"] and accuracy(before_votes, votes) == learner["before"]
    assert ran.votes["teacher"][0] == ran.votes["teacher"][1]
    with pytest.raises(ValueError, match="teacher_votes"):
        train_and_measure(cohort_models, {"teacher": tok, "learner": tok}, pool, (texts, votes), (texts, intents),
                          cfg, tmp_path, seed=0, say=lambda _: None, teacher_votes=votes)  # fmt: skip
    summary = ran.cohort()
    assert "steps" not in summary["members"]["learner"] and summary["teacher"] == "teacher"
    assert {"measure_before", "probe", "cohort_exact", "measure_after"} <= set(ran.phases.as_dict())
