"""train_sft's two departures from TRL's SFTTrainer, both for speed only: off Triton devices, the loss on the labelled
positions' dense logits instead of TRL's fused LM head (the same loss and metrics, TRL's kernel not called); and,
where TRL's fused head runs (`fused_head`), the one reach into TRL's privates, the switch that lets it score only the
labelled positions. Neither may change the loss, and the switch says so when the TRL it patches has moved on."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import trl.trainer.utils as trl_utils
from trl.kernels import ChunkedLogProbFunction

import sparring.hf_door as hf_door
import sparring.train.sft as sft
from sparring.data.synthetic import generate_utterances
from sparring.lm.chat import known_intents
from sparring.lm.models import build_model
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import ModelSpec, SFTSettings
from sparring.train.demos import intent_examples

SPEC = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
# The loss on the reply only: the case where scoring the labelled positions alone skips most of the head's work.
SETTINGS = SFTSettings(
    max_steps=4, batch_size=8, learning_rate=3e-3, warmup_steps=1, logging_steps=1, max_length=64, fused_head=True
)
METRICS = ("loss", "grad_norm", "entropy", "mean_token_accuracy")  # TRL's logged figures of a step


@pytest.fixture(scope="module")
def data():
    frame = generate_utterances(2, 0)
    tok = train_tokenizer(frame["text"].to_list(), 600, sorted(known_intents()))
    return tok, intent_examples(frame["text"].to_list()[:64], frame["intent"].to_list()[:64])


def losses(tok, convs, tmp_path, settings: SFTSettings = SETTINGS) -> list[float]:
    return [c["loss"] for c in run(tok, convs, tmp_path, settings).curves if "loss" in c]


def run(tok, convs, tmp_path, settings: SFTSettings, model=None, spec: ModelSpec = SPEC) -> sft.SFTResult:
    return sft.train_sft(model or build_model(spec, tok, seed=0), tok, convs, settings, tmp_path, seed=0)


class CountedKernel:
    """Stands in for TRL's fused-head kernel, counting its calls."""

    calls = 0

    @classmethod
    def apply(cls, *args):
        cls.calls += 1
        return ChunkedLogProbFunction.apply(*args)


@pytest.fixture
def kernel(monkeypatch):
    CountedKernel.calls = 0
    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", CountedKernel)
    return CountedKernel


@pytest.mark.parametrize("assistant_only_loss", [False, True], ids=["whole_text", "reply_only"])
def test_the_dense_head_trains_as_trls_fused_head(data, tmp_path, kernel, assistant_only_loss):
    """Every logged figure and the tokens counted agree, step by step, with the loss on every token (DA0's intent
    phase) and on the reply only; TRL's kernel runs only in the fused arm."""
    tok, convs = data
    settings = SETTINGS.model_copy(update={"assistant_only_loss": assistant_only_loss})
    dense = run(tok, convs, tmp_path / "dense", settings.model_copy(update={"fused_head": False}))
    assert kernel.calls == 0
    fused = run(tok, convs, tmp_path / "fused", settings)
    assert kernel.calls == SETTINGS.max_steps
    steps = [[c for c in r.curves if "loss" in c] for r in (dense, fused)]
    assert len(steps[0]) == len(steps[1]) == SETTINGS.max_steps
    for key in METRICS:
        assert [c[key] for c in steps[0]] == pytest.approx([c[key] for c in steps[1]], rel=1e-4, abs=1e-5), key
    assert [c["num_tokens"] for c in steps[0]] == [c["num_tokens"] for c in steps[1]]
    assert dense.train_tokens == fused.train_tokens > 0


@pytest.mark.parametrize("arch", ["qwen2", "gpt_neox"])
def test_the_dense_head_trains_the_peer_members_architectures_as_trls(data, tmp_path, kernel, arch):
    """The cohort's members warm-start through the same trainer: their backbones and heads (gpt_neox's `embed_out`)."""
    tok, convs = data
    spec = SPEC.replace(arch=arch, num_kv_heads=SPEC.num_heads)
    settings = SETTINGS.model_copy(update={"assistant_only_loss": False})
    dense = run(tok, convs, tmp_path / "dense", settings.model_copy(update={"fused_head": False}), spec=spec)
    assert kernel.calls == 0
    fused = run(tok, convs, tmp_path / "fused", settings, spec=spec)
    assert kernel.calls == SETTINGS.max_steps
    steps = [[c for c in r.curves if "loss" in c] for r in (dense, fused)]
    for key in METRICS:
        assert [c[key] for c in steps[0]] == pytest.approx([c[key] for c in steps[1]], rel=1e-4, abs=1e-5), key


def test_a_model_that_scales_its_logits_keeps_trls_fused_head(data, tmp_path, kernel):
    """The dense head applies no logit scale or softcap, so a model that has one is left to TRL's head."""
    tok, convs = data
    model = build_model(SPEC, tok, seed=0)
    model.config.logit_scale = 1.0
    run(tok, convs, tmp_path, SETTINGS.model_copy(update={"fused_head": False}), model=model)
    assert kernel.calls == SETTINGS.max_steps


def test_scoring_only_labelled_positions_leaves_the_loss_unchanged(data, tmp_path, monkeypatch):
    tok, convs = data
    switched = losses(tok, convs, tmp_path / "switched")
    monkeypatch.setattr(sft, "score_labelled_positions_only", nullcontext)
    plain = losses(tok, convs, tmp_path / "plain")
    assert len(switched) == len(plain) == SETTINGS.max_steps
    assert switched == pytest.approx(plain, rel=1e-4, abs=1e-4)


def test_a_trl_without_the_private_switch_is_warned_about_and_still_trains(data, tmp_path, monkeypatch):
    tok, convs = data
    monkeypatch.setattr(hf_door, "TRL_SWITCH", "_use_triton_renamed")  # as a TRL that renamed its private would be
    with pytest.warns(RuntimeWarning, match="_use_triton_renamed is gone"):
        assert len(losses(tok, convs, tmp_path)) == SETTINGS.max_steps


def test_a_deep_copy_of_a_trained_model_trains_its_own_weights(data, tmp_path):
    """TRL's trainers bind a fused-head forward on the model that closes over that object's forward; train_sft
    removes it, so a copy of a trained model (as a cohort or an opponent pool keeps) trains itself, not the original
    (before, its gradients went to the original and a further SFT left both unchanged)."""
    import copy

    import torch

    tok, convs = data
    trained = run(tok, convs, tmp_path / "a", SETTINGS).model
    assert "forward" not in vars(trained)
    twin = copy.deepcopy(trained)
    original = {k: v.clone() for k, v in trained.state_dict().items()}
    ids = torch.tensor([[5, 6, 7, 8]])
    twin(input_ids=ids, labels=ids).loss.backward()
    assert all(p.grad is not None for p in twin.parameters()) and all(p.grad is None for p in trained.parameters())
    twin.zero_grad(set_to_none=True)
    again = run(tok, convs, tmp_path / "b", SETTINGS, model=twin).model
    assert any(not torch.equal(original[k], v) for k, v in again.state_dict().items())
    assert all(torch.equal(original[k], v) for k, v in trained.state_dict().items())
