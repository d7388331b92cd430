"""The GRPO update on length-bucketed micro-batches with the LM head on the loss's tokens computes TRL's loss."""

from __future__ import annotations

import random

import pytest
import torch
from trl import GRPOTrainer

from sparring.data.synthetic import generate_utterances
from sparring.lm.chat import known_intents
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import GRPOSettings
from sparring.train.trl import bucket_inputs, build_trainer, length_buckets

torch.set_num_threads(1)
SPEC = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
G, GROUPS = 4, 3


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(generate_utterances(2, 0)["text"].to_list(), 600, sorted(known_intents()))


def fixed_batch(tok, seed: int = 0) -> dict[str, list]:
    """A rollout's output with prompts and completions of spread lengths, the side's own tokens in runs."""
    rng = random.Random(seed)
    ids = [i for i in range(len(tok)) if i != tok.pad_token_id]
    out: dict[str, list] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "side_reward")}
    for _ in range(G * GROUPS):
        p, c = rng.randint(3, 40), rng.randint(4, 60)
        mask = [int((j // rng.randint(2, 6)) % 2 == 0) for j in range(c)]
        mask[0] = 1
        out["prompt_ids"].append([rng.choice(ids) for _ in range(p)])
        out["completion_ids"].append([rng.choice(ids) for _ in range(c)])
        out["env_mask"].append(mask)
        out["logprobs"].append([-rng.random() * 3 if m else 0.0 for m in mask])
        out["side_reward"].append(rng.random())
    return out


def scored(tok, tmp_path, **overrides):
    """A trainer over the fixed batch and the batch as TRL scores it (its update's inputs)."""
    settings = GRPOSettings(num_generations=G, scenarios_per_step=GROUPS, max_steps=1, **overrides)
    batch = fixed_batch(tok)
    trainer = build_trainer(build_model(SPEC, tok, seed=1), tok, lambda prompts, t: batch, 8, settings, tmp_path)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer, trainer._generate_and_score_completions([{"prompt": f"{i // G}|"} for i in range(G * GROUPS)])


def loss_and_grads(loss_fn, trainer, inputs) -> tuple[float, list[torch.Tensor]]:
    trainer.model.zero_grad(set_to_none=True)
    loss = loss_fn(trainer, trainer.model, inputs)
    loss.backward()
    return float(loss.detach()), [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]


@pytest.mark.parametrize(
    "overrides",
    [{"loss_type": "dapo"}, {"loss_type": "grpo"}, {"loss_type": "bnpo"}, {"loss_type": "dr_grpo"}, {"beta": 0.05}],
    ids=["dapo", "grpo", "bnpo", "dr_grpo", "dapo-kl"],
)
@pytest.mark.parametrize("token_advantages", [False, True], ids=["seq_adv", "token_adv"])
def test_bucketed_update_computes_trls_loss_and_gradients_on_a_fixed_batch(tok, tmp_path, overrides, token_advantages):
    trainer, inputs = scored(tok, tmp_path, **overrides)
    if token_advantages:  # the (B, T) advantages iapo and mt_grpo hand TRL
        gen = torch.Generator().manual_seed(3)
        inputs["advantages"] = torch.randn(inputs["completion_ids"].shape, generator=gen)
    groups = length_buckets(inputs["prompt_mask"].sum(1).tolist(), inputs["completion_mask"].sum(1).tolist())
    assert len(groups) > 1  # the batch is split, or the test compares TRL with itself

    reference, ref_grads = loss_and_grads(GRPOTrainer.compute_loss, trainer, inputs)  # TRL's path, one batch
    loss, grads = loss_and_grads(type(trainer).compute_loss, trainer, inputs)

    assert loss == pytest.approx(reference, rel=1e-4, abs=1e-7)
    assert len(grads) == len(ref_grads)
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)


def test_buckets_keep_every_row_once_and_trim_only_padding(tok, tmp_path):
    _, inputs = scored(tok, tmp_path)
    prompts, completions = inputs["prompt_mask"].sum(1).tolist(), inputs["completion_mask"].sum(1).tolist()
    groups = length_buckets(prompts, completions)
    assert sorted(i for g in groups for i in g) == list(range(len(prompts)))
    positions = sum(len(g) * (max(prompts[i] for i in g) + max(completions[i] for i in g)) for g in groups)
    assert positions < len(prompts) * (max(prompts) + max(completions))  # less padding than TRL's one batch
    for rows in groups:
        part = bucket_inputs(inputs, rows)
        assert int(part["prompt_mask"].sum()) == sum(prompts[i] for i in rows)  # no real token dropped
        assert int(part["completion_mask"].sum()) == sum(completions[i] for i in rows)
        assert part["prompt_mask"][:, 0].any() and part["completion_mask"][:, -1].any()  # no all-pad column left
        assert part["advantages"].shape == (len(rows),)
        assert part["tool_mask"].shape == part["completion_ids"].shape
