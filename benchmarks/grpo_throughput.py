"""GRPO update throughput: TRL's GRPOTrainer vs a raw forward+backward loop, same model, same token batches.

Episodes are played once (the tiny agent model vs the scripted cooperative customer, through the rollout_func
``sparring.train.grpo`` uses) and cached; then, side by side in this one process:

(a) TRL ``GRPOTrainer`` steps whose rollout_func REPLAYS the cached batches (so a step is TRL's scoring,
    padding, advantage and loss code plus forward, backward and the optimizer step: the update, not the rollout);
(b) a plain loop over the very same batches laid out as TRL lays them out (left-padded prompts, right-padded
    completions, logits only for the completion): forward, masked policy-gradient loss, backward, AdamW step.

Both start from the same weights. Tokens = non-pad prompt+completion tokens per update; the first step of each
is a warm-up and not timed; each figure is the best of ``--repeats`` alternating runs. Prints readable lines,
then one JSON object as the last line. Goal: (a) >= 70% of (b).
Usage: ``python benchmarks/grpo_throughput.py [--steps 6] [--generations 8] [--scenarios-per-step 4]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from transformers import TrainerCallback

from sparring.agents.chat import known_intents
from sparring.agents.models import ModelSpec, build_model, count_parameters
from sparring.agents.scripted import CooperativeCustomer, customer_goal
from sparring.agents.tokenizer import train_tokenizer
from sparring.data.synthetic import utterance_frame
from sparring.settings import GRPOSettings
from sparring.train.grpo import build_trainer, make_rollout_func
from sparring.world.scenarios import sample_scenarios


class RandomRewards:
    """Rewards with spread in every group (throughput does not depend on their meaning)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def score(self, episodes):
        return [{"agent_reward": self.rng.random()} for _ in episodes]


class StepTimer(TrainerCallback):
    def __init__(self) -> None:
        self.seconds: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.t = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self.t)


def layout(batch: dict, pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """TRL's layout: left-padded prompts + right-padded completions; (ids, attention, loss mask, completion ids)."""
    prompts, completions = batch["prompt_ids"], batch["completion_ids"]
    p_w, c_w = max(map(len, prompts)), max(map(len, completions))
    ids = torch.full((len(prompts), p_w + c_w), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    loss_mask = torch.zeros((len(prompts), c_w))
    for i, (p, c, m) in enumerate(zip(prompts, completions, batch["env_mask"], strict=True)):
        ids[i, p_w - len(p) : p_w] = torch.tensor(p)
        ids[i, p_w : p_w + len(c)] = torch.tensor(c)
        attn[i, p_w - len(p) : p_w + len(c)] = 1
        loss_mask[i, : len(c)] = torch.tensor(m, dtype=torch.float)
    return ids, attn, loss_mask, ids[:, p_w:], c_w


def raw_steps(model, batches: list[dict], pad: int, settings: GRPOSettings) -> list[float]:
    """Seconds per step of a plain policy-gradient update on each batch (group-normalised rewards)."""
    opt = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, betas=(0.9, settings.adam_beta2))
    model.train()
    seconds = []
    g = settings.num_generations
    for batch in batches:
        t = time.perf_counter()
        ids, attn, mask, completion, c_w = layout(batch, pad)
        r = torch.tensor(batch["side_reward"]).view(-1, g)
        adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1, 1)
        logits = model(input_ids=ids, attention_mask=attn, logits_to_keep=c_w + 1).logits[:, :-1]
        logp = torch.log_softmax(logits.float() / settings.temperature, -1).gather(-1, completion[..., None])[..., 0]
        ratio = torch.exp(logp - logp.detach())
        loss = (-(ratio * adv) * mask).sum() / mask.sum().clamp(min=1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        seconds.append(time.perf_counter() - t)
    return seconds


# Over 60 lines: a benchmark's measurements side by side, top to bottom, as the printout reads.
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--scenarios-per-step", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=ModelSpec.model_fields["hidden_size"].default)
    parser.add_argument("--layers", type=int, default=ModelSpec.model_fields["num_layers"].default)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs of (a) and of (b)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    scenarios = sample_scenarios(utterance_frame(2, 1), 64, seed=args.seed)
    corpus = utterance_frame(8, 100)["text"].to_list() + [customer_goal(s) for s in scenarios]
    tok = train_tokenizer(corpus, 1200, sorted(known_intents()))
    spec = ModelSpec(hidden_size=args.hidden, num_layers=args.layers, tie_word_embeddings=False)
    model = build_model(spec, tok, seed=args.seed)
    settings = GRPOSettings(
        num_generations=args.generations,
        scenarios_per_step=args.scenarios_per_step,
        max_steps=args.steps,
        max_new_tokens=args.max_new_tokens,
        max_turns=args.max_turns,
        learning_rate=1e-4,
        loss_type="dapo",
    )
    print(f"model: {spec.arch} hidden={spec.hidden_size} layers={spec.num_layers} "
          f"params={count_parameters(model):,} vocab={len(tok)} threads={args.threads}")  # fmt: skip
    print(f"steps={args.steps} batch={args.generations}x{args.scenarios_per_step} episodes, "
          f"max_turns={args.max_turns} max_new_tokens={args.max_new_tokens}")  # fmt: skip

    # Play the episodes once and cache them: both measurements replay the same batches.
    rollout = make_rollout_func(
        "agent", tok, CooperativeCustomer(), scenarios, RandomRewards(args.seed), settings, seed=args.seed
    )
    n = args.scenarios_per_step
    t = time.perf_counter()
    batches = [
        rollout([f"{(s * n + j) % len(scenarios)}|" for j in range(n) for _ in range(args.generations)],
                SimpleNamespace(model=model))
        for s in range(args.steps)
    ]  # fmt: skip
    tokens = [sum(map(len, b["prompt_ids"])) + sum(map(len, b["completion_ids"])) for b in batches]
    own = sum(sum(map(sum, b["env_mask"])) for b in batches)
    print(f"rollouts: {time.perf_counter() - t:.2f} s, {sum(tokens):,} tokens in {len(batches)} batches "
          f"({own / sum(tokens):.0%} the agent's own)")  # fmt: skip

    # Alternate (a) and (b) --repeats times from the same start weights; keep each one's best: on a shared VM
    # the slow runs measure the neighbours, not the code.
    start = copy.deepcopy(model.state_dict())
    grpo_s = raw_s = float("inf")
    step_a = step_b = 0.0
    for _ in range(args.repeats):
        model.load_state_dict(start)
        calls = iter(batches)
        timer = StepTimer()
        with tempfile.TemporaryDirectory() as scratch:
            trainer = build_trainer(
                model,
                tok,
                lambda prompts, trainer, calls=calls: next(calls),
                64,
                settings,
                Path(scratch),
                callbacks=[timer],
            )
            trainer.train()
        if sum(timer.seconds[1:]) < grpo_s:
            grpo_s, step_a = sum(timer.seconds[1:]), float(np.median(timer.seconds))
        raw_model = build_model(spec, tok)
        raw_model.load_state_dict(start)
        raw = raw_steps(raw_model, batches, tok.pad_token_id, settings)
        if sum(raw[1:]) < raw_s:
            raw_s, step_b = sum(raw[1:]), float(np.median(raw))
    grpo_tok_s, raw_tok_s = sum(tokens[1:]) / grpo_s, sum(tokens[1:]) / raw_s
    print(f"(a) TRL GRPO update: {grpo_s:7.2f} s  {grpo_tok_s:9.1f} tokens/s  (median step {step_a:.2f} s)")
    print(f"(b) raw fwd+bwd:     {raw_s:7.2f} s  {raw_tok_s:9.1f} tokens/s  (median step {step_b:.2f} s)")
    result = {
        "grpo_tokens_per_s": round(grpo_tok_s, 1),
        "raw_fwd_bwd_tokens_per_s": round(raw_tok_s, 1),
        "fraction": round(grpo_tok_s / raw_tok_s, 3),
        "tokens_per_step": round(sum(tokens) / len(tokens), 1),
        "own_token_share": round(own / sum(tokens), 3),
        "steps_timed": len(batches) - 1,
        "repeats": args.repeats,
    }
    print(f"GRPO update at {result['fraction']:.0%} of raw forward+backward (goal >= 70%)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
