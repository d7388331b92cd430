"""The judge's trained models: intent oracle, realism discriminator, label-naming check, offline encoder.

Fitted once per module on a small hand-written dataset (10 intents, slot-varied phrasings) to stay fast."""

from __future__ import annotations

import os
import random

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import numpy as np
import polars as pl
import pytest
import torch

from sparring.judge.models import (
    CORRUPTIONS,
    IntentOracle,
    RealismDiscriminator,
    build_judge_models,
    corrupt,
    embed,
    intent_named_outright,
    join_turns,
    load_encoder,
    stratified_sample,
)

torch.set_num_threads(1)  # 2-core VMs: one thread is faster (benchmarks/threads.py)

SLOTS = {
    "n": ["2", "3", "5", "10"],
    "when": ["yesterday", "last week", "on Monday", "two weeks ago", "this morning"],
    "place": ["at the airport", "in town", "abroad", "at the station"],
    "cur": ["euros", "dollars", "pounds", "yen"],
    "amt": ["20", "50", "100", "250"],
    "who": ["my brother", "Anna", "my landlord", "a friend"],
    "country": ["Spain", "Canada", "Japan", "Brazil"],
}
PHRASES = {
    "card_arrival": [
        "my new card still hasn't come after {n} days",
        "when will the card I ordered {when} get here?",
        "is my card in the post yet? I asked for it {when}",
        "still waiting on the card you sent {when}",
    ],
    "exchange_rate": [
        "what rate do you use to convert {cur} to {cur}?",
        "how much is {amt} {cur} worth in {cur} today",
        "is the conversion rate for {cur} fixed or does it move?",
        "which rate applies when I pay in {cur} {place}?",
    ],
    "lost_or_stolen_card": [
        "someone stole my card {place}",
        "I lost my card somewhere {place} {when}",
        "my wallet with the card in it was taken {when}",
        "I can't find my card since {when}, please block it",
    ],
    "pin_blocked": [
        "I typed the wrong code {n} times and now it's locked",
        "my pin got locked {place}",
        "how do I unlock my pin after too many tries?",
        "the cash machine {place} blocked my pin {when}",
    ],
    "top_up_failed": [
        "my top up of {amt} {cur} did not go through",
        "I tried to add {amt} to my account {when} and it failed",
        "why was my top-up rejected {when}?",
        "adding {amt} {cur} with my debit card keeps failing",
    ],
    "cash_withdrawal_charge": [
        "why was I charged a fee for taking out {amt} {cur} {place}?",
        "there is an extra charge on my cash withdrawal from {when}",
        "do you charge for using an ATM {place}?",
        "I got {amt} in cash {when} and you took a fee",
    ],
    "beneficiary_not_allowed": [
        "I can't add {who} as a payee",
        "the app won't let me save {who} as a recipient",
        "why is {who} not allowed as a beneficiary?",
        "adding {who} to my transfer list fails every time",
    ],
    "change_pin": [
        "how can I set a new pin for my card?",
        "I want a different pin, the one I have is hard to remember",
        "can I pick my own pin {place}?",
        "where in the app do I update my pin {when}?",
    ],
    "country_support": [
        "can I open an account if I live in {country}?",
        "do you support customers from {country}?",
        "is the card available to people in {country}?",
        "I'm moving to {country} {when}, can I keep using the service?",
    ],
    "passcode_forgotten": [
        "I forgot the passcode to log into the app",
        "I can't remember my app passcode since {when}",
        "how do I reset my login code? I forgot it {when}",
        "locked out of the app {place}, forgot my passcode",
    ],
}


OPENERS = ["", "Hi, ", "Hello, ", "Quick question: ", "Please help, "]
CLOSERS = ["", " thanks", " please", " asap"]


def _make(n_per_intent: int, seed: int) -> pl.DataFrame:
    rng = random.Random(seed)
    rows = []
    for intent, phrases in PHRASES.items():
        seen: set[str] = set()
        for _ in range(50 * n_per_intent):  # bounded: a phrase list with few variants cannot loop forever
            if len(seen) == n_per_intent:
                break
            text = rng.choice(phrases)
            for slot, values in SLOTS.items():
                while "{" + slot + "}" in text:
                    text = text.replace("{" + slot + "}", rng.choice(values), 1)
            text = rng.choice(OPENERS) + text + rng.choice(CLOSERS)
            seen.add(text[0].upper() + text[1:])
        assert len(seen) == n_per_intent, intent
        rows += [{"text": t, "intent": intent} for t in sorted(seen)]
    return pl.DataFrame(rows).sample(fraction=1.0, shuffle=True, seed=seed)


DATA = _make(24, seed=0)
TRAIN = DATA.filter(pl.int_range(pl.len()).over("intent") < 16)
TEST = DATA.filter(pl.int_range(pl.len()).over("intent") >= 16)


@pytest.fixture(scope="module")
def judge() -> tuple[IntentOracle, RealismDiscriminator, dict]:
    return build_judge_models(TRAIN, TEST, seed=0, max_train=None)


def test_encoder_loads_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = load_encoder()
    assert load_encoder() is model  # cached per process
    assert str(next(model.parameters()).device) == "cpu"
    vecs = embed(["where is my card", "", "how do I change my pin"])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert embed([]).shape == (0, 384)
    # The memo returns what the encoder computes.
    np.testing.assert_allclose(embed(["where is my card"], use_cache=False)[0], vecs[0], atol=1e-5)


def test_oracle_recovers_heldout_intents(judge: tuple) -> None:
    oracle, _, metrics = judge
    assert sorted(oracle.classes_) == sorted(PHRASES)
    assert metrics["oracle_acc"] > 0.8  # chance is 0.1
    assert metrics["oracle_macro_f1"] > 0.75
    pred = oracle.predict(TEST["text"].to_list())
    assert np.mean(np.array(pred) == TEST["intent"].to_numpy()) == pytest.approx(metrics["oracle_acc"])
    proba = oracle.predict_proba(TEST["text"].to_list())
    assert proba.shape == (TEST.height, len(PHRASES))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)


def test_prob_of_true_intent_beats_a_wrong_one(judge: tuple) -> None:
    oracle = judge[0]
    texts, intents = TEST["text"].to_list(), TEST["intent"].to_list()
    names = sorted(PHRASES)
    wrong = [names[(names.index(i) + 1) % len(names)] for i in intents]
    p_true, p_wrong = oracle.prob_of(texts, intents), oracle.prob_of(texts, wrong)
    assert p_true.mean() > 0.5 > 0.1 > p_wrong.mean()
    assert oracle.prob_of(texts[:1], ["not_an_intent"])[0] == 0.0
    # Several turns are joined into one text; the intent survives the join.
    turns = ["hi there", "my new card still hasn't come after 9 days", "what should I do?"]
    assert oracle.predict([join_turns(turns)]) == ["card_arrival"]


def test_oracle_save_load_round_trip(judge: tuple, tmp_path) -> None:
    oracle = judge[0]
    texts = TEST["text"].to_list() + ["something else entirely"]
    oracle.save(tmp_path / "oracle")
    oracle.save(tmp_path / "oracle")  # overwriting a saved model is an atomic swap, not an error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["oracle"]  # no temp folders left behind
    loaded = IntentOracle.load(tmp_path / "oracle")
    assert loaded.predict(texts) == oracle.predict(texts)
    np.testing.assert_array_equal(loaded.predict_proba(texts), oracle.predict_proba(texts))
    assert list(loaded.classes_) == list(oracle.classes_)
    with pytest.raises(ValueError):
        RealismDiscriminator.load(tmp_path / "oracle")


def test_discriminator_prefers_real_text(judge: tuple, tmp_path) -> None:
    _, disc, metrics = judge
    real = TEST["text"].to_list()
    fakes, kinds = corrupt(real, seed=7)
    assert disc.auc(real, fakes) > 0.8
    assert metrics["discriminator_auc_heldout_corruptions"] > 0.8
    assert disc.prob_real(real).mean() > disc.prob_real(fakes).mean()
    named = disc.prob_real(["I have a transaction_charged_twice issue"])[0]
    assert named < disc.prob_real(["Why was I charged a fee for taking out 50 euros abroad?"])[0]
    per_customer = disc.prob_real_turns([real[:2], [], fakes[:1]])
    assert per_customer[1] == 0.0 and per_customer[0] == pytest.approx(disc.prob_real(real[:2]).mean())
    disc.save(tmp_path / "disc")
    loaded = RealismDiscriminator.load(tmp_path / "disc")
    np.testing.assert_array_equal(loaded.prob_real(real + fakes), disc.prob_real(real + fakes))


def test_corruptions_cover_every_kind_and_differ() -> None:
    real = TRAIN["text"].to_list()
    fakes, kinds = corrupt(real, seed=3)
    assert len(fakes) == len(real) and set(kinds) <= set(CORRUPTIONS)
    assert set(CORRUPTIONS) - {"shuffle"} <= set(kinds)
    assert all(f.strip() != r.strip() for f, r in zip(fakes, real, strict=True))
    assert corrupt(real, seed=3) == (fakes, kinds)  # seeded
    assert corrupt(real, seed=4)[0] != fakes
    assert corrupt([], seed=0) == ([], [])


def test_extra_negatives_are_learned() -> None:
    real = TRAIN["text"].to_list()
    sim = [f"As an AI customer, I would like assistance with case number {i}." for i in range(40)]
    disc = RealismDiscriminator.fit(real, seed=0, negatives=sim[:30])
    assert disc.auc(TEST["text"].to_list(), sim[30:]) > 0.9


def test_intent_named_outright() -> None:
    intent = "transaction_charged_twice"
    assert intent_named_outright("I have a transaction_charged_twice issue", intent)
    assert intent_named_outright("my intent is Transaction Charged Twice.", intent)
    assert intent_named_outright("TRANSACTION-CHARGED-TWICE!", intent)
    assert intent_named_outright("Problem: card_arrival", "card_arrival")
    assert intent_named_outright("my intent is card arrival", "card_arrival")
    assert not intent_named_outright("I think I was charged twice for one transaction", intent)
    assert not intent_named_outright("my new card still hasn't come after 5 days", "card_arrival")
    assert not intent_named_outright("the supercard arrivals board", "card_arrival")
    # Labels that are everyday speech can be exempted from the spaced spelling, never the underscore one.
    assert intent_named_outright("what is the exchange rate?", "exchange_rate")
    assert not intent_named_outright("what is the exchange rate?", "exchange_rate", exempt_spaced={"exchange_rate"})
    assert intent_named_outright("my issue is exchange_rate", "exchange_rate", exempt_spaced={"exchange_rate"})


def test_stratified_sample_keeps_intent_shares() -> None:
    sub = stratified_sample(TRAIN, 40, seed=0)
    assert sub.height == 40
    assert set(sub["intent"].value_counts()["count"]) == {4}
    assert stratified_sample(TRAIN, 5, seed=0)["intent"].n_unique() == 5
    assert stratified_sample(TRAIN, None, seed=0) is TRAIN
    assert stratified_sample(TRAIN, 40, seed=0).equals(sub)


def test_build_judge_models_reports(judge: tuple) -> None:
    metrics = judge[2]
    for key in ("oracle_fit_s", "discriminator_fit_s", "embeddings_per_s", "n_train", "n_test"):
        assert key in metrics
    assert metrics["n_train"] == TRAIN.height and metrics["embeddings_per_s"] > 0
    with pytest.raises(ValueError, match="lacks columns"):
        build_judge_models(TRAIN.rename({"intent": "label"}), TEST, seed=0, max_train=None)


def test_oracle_on_synthetic_generator() -> None:
    synthetic = pytest.importorskip("sparring.data.synthetic")
    intents = sorted(PHRASES)
    df = synthetic.generate_utterances(10, seed=0).filter(pl.col("intent").is_in(intents))
    df = df.unique("text", keep="first", maintain_order=True)
    train = df.filter(pl.int_range(pl.len()).over("intent") < 6)
    test = df.filter(pl.int_range(pl.len()).over("intent") >= 6)
    oracle = IntentOracle.fit(train["text"].to_list(), train["intent"].to_list(), seed=0)
    acc = np.mean(np.array(oracle.predict(test["text"].to_list())) == test["intent"].to_numpy())
    assert acc > 0.75  # chance 0.1; tiny training set on purpose, the benchmark measures the real figure
