"""train_sft's one reach into TRL's privates: the switch that lets its fused LM head score only the labelled
positions. It must change speed only, never the loss, and say so when the TRL it patches has moved on."""

from __future__ import annotations

from contextlib import nullcontext

import pytest

import sparring.train.sft as sft
from sparring.agents.chat import known_intents
from sparring.agents.models import build_model
from sparring.agents.tokenizer import train_tokenizer
from sparring.data.synthetic import generate_utterances
from sparring.settings import ModelSpec, SFTSettings
from sparring.train.demos import intent_examples

SPEC = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
# The loss on the reply only: the case where scoring the labelled positions alone skips most of the head's work.
SETTINGS = SFTSettings(max_steps=4, batch_size=8, learning_rate=3e-3, warmup_steps=1, logging_steps=1, max_length=64)


@pytest.fixture(scope="module")
def data():
    frame = generate_utterances(2, 0)
    tok = train_tokenizer(frame["text"].to_list(), 600, sorted(known_intents()))
    return tok, intent_examples(frame["text"].to_list()[:64], frame["intent"].to_list()[:64])


def losses(tok, convs, tmp_path) -> list[float]:
    result = sft.train_sft(build_model(SPEC, tok, seed=0), tok, convs, SETTINGS, tmp_path, seed=0)
    return [c["loss"] for c in result.curves if "loss" in c]


def test_scoring_only_labelled_positions_leaves_the_loss_unchanged(data, tmp_path, monkeypatch):
    tok, convs = data
    switched = losses(tok, convs, tmp_path / "switched")
    monkeypatch.setattr(sft, "_score_labelled_positions_only", nullcontext)
    plain = losses(tok, convs, tmp_path / "plain")
    assert len(switched) == len(plain) == SETTINGS.max_steps
    assert switched == pytest.approx(plain, rel=1e-4, abs=1e-4)


def test_a_trl_without_the_private_switch_is_warned_about_and_still_trains(data, tmp_path, monkeypatch):
    tok, convs = data
    monkeypatch.setattr(sft, "TRL_SWITCH", "_use_triton_renamed")  # as a TRL that renamed its private would be
    with pytest.warns(RuntimeWarning, match="_use_triton_renamed is gone"):
        assert len(losses(tok, convs, tmp_path)) == SETTINGS.max_steps
