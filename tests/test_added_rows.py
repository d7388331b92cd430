"""The rows of tokens added to a pretrained vocabulary train; the base's rows do not move, under weight decay too.

A tiny llama stands in for the pretrained base (rows below ``BASE`` are "the base's"); tests/test_lora_checkpoints.py
runs the same through SmolLM2 + LoRA, SFT and a saved adapter.
"""

from __future__ import annotations

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from sparring.lm.added_rows import KeepBaseRows, base_rows_callbacks, train_added_rows, trained_row_weights

BASE, VOCAB = 48, 64


def _model(tie: bool) -> torch.nn.Module:
    config = AutoConfig.for_model(
        "llama",
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=32,
        tie_word_embeddings=tie,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    for p in model.parameters():  # as peft leaves a base: every weight frozen
        p.requires_grad_(False)
    return model


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    ids = torch.tensor([[1, 50, 7, 60, 3, 49]])  # base and added tokens, read and predicted
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def test_only_the_added_rows_get_a_gradient() -> None:
    for tie in (True, False):
        model = _model(tie)
        assert train_added_rows(model, BASE) == VOCAB - BASE
        weights = trained_row_weights(model)
        assert len(weights) == (1 if tie else 2)
        ids = torch.tensor([[1, 50, 7, 60, 3, 49]])
        model(input_ids=ids, labels=ids).loss.backward()
        for w in weights:
            assert w.grad is not None and float(w.grad[:BASE].abs().sum()) == 0.0
            assert float(w.grad[BASE:].abs().sum()) > 0
        assert train_added_rows(model, BASE) == VOCAB - BASE  # a second call adds no second hook
        assert train_added_rows(_model(tie), VOCAB) == 0  # nothing added, nothing trains
        assert not trained_row_weights(_model(tie))


def test_weight_decay_would_move_the_base_rows_and_the_callback_puts_them_back() -> None:
    model = _model(tie=True)
    train_added_rows(model, BASE)
    (weight,) = trained_row_weights(model)
    start = weight.detach().clone()
    guard = KeepBaseRows(model)
    optimizer = torch.optim.AdamW([weight], lr=1e-2, weight_decay=0.1)
    _step(model, optimizer)
    assert not torch.equal(weight.detach()[:BASE], start[:BASE]), "decoupled decay should shrink the masked rows"
    guard.on_optimizer_step(None, None, None)
    assert torch.equal(weight.detach()[:BASE], start[:BASE])
    assert not torch.equal(weight.detach()[BASE:], start[BASE:])


def test_without_decay_the_mask_alone_keeps_the_base_rows_and_no_callback_is_added() -> None:
    model = _model(tie=False)
    train_added_rows(model, BASE)
    weights = trained_row_weights(model)
    start = [w.detach().clone() for w in weights]
    optimizer = torch.optim.AdamW(weights, lr=1e-2, weight_decay=0.0)
    for _ in range(3):
        _step(model, optimizer)
    for w, s in zip(weights, start, strict=True):
        assert torch.equal(w.detach()[:BASE], s[:BASE]) and not torch.equal(w.detach()[BASE:], s[BASE:])
    assert base_rows_callbacks(model, 0.0) == []
    assert [type(c) for c in base_rows_callbacks(model, 0.01)] == [KeepBaseRows]
    assert base_rows_callbacks(_model(tie=False), 0.01) == []
