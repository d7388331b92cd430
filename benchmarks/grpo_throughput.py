"""GRPO update throughput against SFT's, same model and same episodes, for the agent's gym and the adversary's.

For each side, episodes are played once (the tiny model vs a scripted opponent, through the rollout_func
``sparring.train.grpo`` uses: the agent against the cooperative customer, the customer against the scripted expert
agent) and cached; then, side by side in this one process, from the same start weights:

(a) GRPO: ``sparring.train.grpo.build_trainer``'s TRL ``GRPOTrainer`` whose rollout_func REPLAYS the cached batches
    (so a step is TRL's scoring, padding, advantage and loss code plus forward, backward and the optimizer step:
    the update, not the rollout);
(b) SFT: TRL's ``SFTTrainer`` as ``sparring.train.sft.train_sft`` runs it (its ``sft_config``, length-grouped
    batches, the LM head on labelled positions only) on the very same token sequences, the loss on the side's own
    tokens (``assistant_masks`` = env_mask), one pass, batch = one GRPO step's episodes.

Tokens = non-pad prompt+completion tokens; the first step of each run is a warm-up and not timed; each figure is
the best of ``--repeats`` alternating runs. For both, where a step's time went (median step): scoring (a step's
work before its first forward: TRL's padding, rewards, advantages), the backbone's forward, the LM head's forward
with the loss code (from the backbone's end to backward), backward (the head's included), the optimizer step, and
the padding share of the positions the backbone ran over. Prints readable
lines, then one JSON object as the last line: per side ``update_tokens_per_s``, ``sft_tokens_per_s``, ``fraction``
(goal >= 0.8, issue #42) and the breakdowns.
Usage: ``python benchmarks/grpo_throughput.py [--steps 6] [--generations 8] [--scenarios-per-step 4]
[--sides agent adversary] [--vocab 1200] [--repeats 2]``.
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
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from sparring.agents.customer_prompt import customer_goal
from sparring.agents.scripted import CooperativeCustomer, ExpertAgent
from sparring.data.synthetic import utterance_frame
from sparring.hf_door import score_labelled_positions_only
from sparring.lm.chat import known_intents
from sparring.lm.models import ModelSpec, build_model, count_parameters
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import GRPOSettings, SFTSettings
from sparring.train.grpo import make_rollout_func
from sparring.train.sft import sft_config
from sparring.train.trl import build_trainer
from sparring.world.scenarios import sample_scenarios

SIDES = {"agent": ("agent", CooperativeCustomer), "adversary": ("customer", ExpertAgent)}  # name -> (role, opponent)
PHASES = ("scoring", "backbone", "lm_head_loss", "backward", "optimizer")


class RandomRewards:
    """Rewards with spread in every group (throughput does not depend on their meaning)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def score(self, episodes):
        return [{"agent_reward": self.rng.random(), "adv_reward": self.rng.random()} for _ in episodes]


class Phases(TrainerCallback):
    """Per optimizer step: wall time of each phase (see the module's docstring) and the positions the backbone ran
    over against the real tokens among them. Module hooks on the backbone, the trainer's call of backward, and
    trainer callbacks around the optimizer step."""

    def __init__(self, model: Any) -> None:
        self.steps: list[dict[str, float]] = []
        model.base_model.register_forward_pre_hook(self._enter, with_kwargs=True)
        model.base_model.register_forward_hook(self._leave)

    def watch(self, trainer: Any) -> Any:
        """Time the trainer's backward calls; returns ``trainer``."""
        backward = trainer.accelerator.backward

        def timed(loss, **kwargs):
            self.t_backward = self.t_backward or time.perf_counter()
            return backward(loss, **kwargs)

        trainer.accelerator.backward = timed
        return trainer

    def _enter(self, module, args, kwargs):
        self.starts.append(time.perf_counter())
        if torch.is_grad_enabled():
            ids = kwargs.get("input_ids", args[0] if args else None)
            mask = kwargs.get("attention_mask")
            self.positions += ids.numel()
            self.tokens += int(mask.sum()) if mask is not None else ids.numel()

    def _leave(self, module, args, output):
        self.backbone += time.perf_counter() - self.starts[-1]

    def on_step_begin(self, args, state, control, **kwargs):
        self.starts, self.backbone, self.positions, self.tokens, self.t_backward = [], 0.0, 0, 0, 0.0
        self.t0 = time.perf_counter()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.t_pre = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.t_opt = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        end = time.perf_counter()
        first = self.starts[0] if self.starts else self.t0
        backward = self.t_backward or self.t_pre
        self.steps.append(
            {
                "seconds": end - self.t0,
                "scoring": first - self.t0,
                "backbone": self.backbone,
                "lm_head_loss": backward - first - self.backbone,
                "backward": self.t_pre - backward,
                "optimizer": self.t_opt - self.t_pre,
                "pad_share": 1 - self.tokens / max(self.positions, 1),
                "positions": self.positions,
                "tokens": self.tokens,
            }
        )


def summary(steps: list[dict[str, float]]) -> dict[str, float]:
    """The median timed step's phases: seconds and shares of the step."""
    timed = steps[1:] or steps
    median = {k: float(np.median([s[k] for s in timed])) for k in ("seconds", *PHASES, "pad_share")}
    out = {"step_s": round(median["seconds"], 3)}
    for k in PHASES:
        out[f"{k}_s"] = round(median[k], 3)
        out[f"{k}_share"] = round(median[k] / median["seconds"], 3)
    out["pad_share"] = round(median["pad_share"], 3)
    return out


def grpo_run(model, tok, batches: list[dict], settings: GRPOSettings) -> tuple[float, int, dict]:
    """Seconds and tokens of the timed steps of (a), and the phases of its median step."""
    calls = iter(batches)
    phases = Phases(model)
    with tempfile.TemporaryDirectory() as scratch:
        trainer = build_trainer(
            model, tok, lambda prompts, trainer: next(calls), 64, settings, Path(scratch), callbacks=[phases]
        )
        phases.watch(trainer).train()
    tokens = sum(s["tokens"] for s in phases.steps[1:])
    return sum(s["seconds"] for s in phases.steps[1:]), tokens, summary(phases.steps)


def sft_run(model, tok, batches: list[dict], settings: GRPOSettings) -> tuple[float, int, dict]:
    """Seconds and tokens of the timed steps of (b), and the phases of its median step."""
    from datasets import Dataset
    from trl import SFTTrainer

    rows = [
        {"input_ids": p + c, "assistant_masks": [0] * len(p) + list(m)}
        for b in batches
        for p, c, m in zip(b["prompt_ids"], b["completion_ids"], b["env_mask"], strict=True)
    ]
    sft = SFTSettings(
        epochs=1,
        max_steps=len(batches),
        learning_rate=settings.learning_rate,
        batch_size=settings.num_generations * settings.scenarios_per_step,
        warmup_steps=0,
        max_length=max(len(r["input_ids"]) for r in rows),
        assistant_only_loss=False,  # the pre-tokenized rows carry their mask; TRL applies it
        logging_steps=1000,
    )
    phases = Phases(model)
    with tempfile.TemporaryDirectory() as scratch:
        args = sft_config(sft, Path(scratch))
        args.disable_tqdm = True
        trainer = SFTTrainer(
            model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok, callbacks=[phases]
        )
        with score_labelled_positions_only():
            phases.watch(trainer).train()
    tokens = sum(s["tokens"] for s in phases.steps[1:])
    return sum(s["seconds"] for s in phases.steps[1:]), tokens, summary(phases.steps)


def play(side: str, tok, model, scenarios, settings: GRPOSettings, args) -> list[dict]:
    """``args.steps`` batches of episodes of ``side``, played once."""
    role, opponent = SIDES[side]
    rollout = make_rollout_func(role, tok, opponent(), scenarios, RandomRewards(args.seed), settings, seed=args.seed)
    n, g = args.scenarios_per_step, args.generations
    return [
        rollout([f"{(s * n + j) % len(scenarios)}|" for j in range(n) for _ in range(g)], SimpleNamespace(model=model))
        for s in range(args.steps)
    ]


def measure(side: str, tok, spec: ModelSpec, scenarios, settings: GRPOSettings, args) -> dict[str, Any]:
    model = build_model(spec, tok, seed=args.seed)
    t = time.perf_counter()
    batches = play(side, tok, model, scenarios, settings, args)
    tokens = [sum(map(len, b["prompt_ids"])) + sum(map(len, b["completion_ids"])) for b in batches]
    own = sum(sum(map(sum, b["env_mask"])) for b in batches)
    completion = sum(sum(map(len, b["completion_ids"])) for b in batches)
    print(f"[{side}] rollouts: {time.perf_counter() - t:.2f} s, {sum(tokens):,} tokens in {len(batches)} batches "
          f"({own / sum(tokens):.0%} the {side}'s own, {completion / sum(tokens):.0%} completion)")  # fmt: skip
    # Alternate (a) and (b) --repeats times from the same start weights; keep each one's best: on a shared VM
    # the slow runs measure the neighbours, not the code.
    start = copy.deepcopy(model.state_dict())
    best = {"grpo": (float("inf"), 1, {}), "sft": (float("inf"), 1, {})}
    for _ in range(args.repeats):
        for name, run in (("grpo", grpo_run), ("sft", sft_run)):
            fresh = build_model(spec, tok, seed=args.seed)
            fresh.load_state_dict(start)
            seconds, n_tokens, phases = run(fresh, tok, batches, settings)
            if n_tokens / seconds > best[name][1] / best[name][0]:
                best[name] = (seconds, n_tokens, phases)
    (g_s, g_tok, g_ph), (s_s, s_tok, s_ph) = best["grpo"], best["sft"]
    update, sft = g_tok / g_s, s_tok / s_s
    for label, rate, ph in (("(a) GRPO update", update, g_ph), ("(b) SFT", sft, s_ph)):
        parts = "  ".join(f"{k} {ph[f'{k}_share']:.0%}" for k in PHASES)
        print(f"[{side}] {label:16s} {rate:8.1f} tokens/s  median step {ph['step_s']:.2f} s: {parts}, "
              f"padding {ph['pad_share']:.0%} of positions")  # fmt: skip
    print(f"[{side}] GRPO update at {update / sft:.0%} of SFT (goal >= 80%)")
    return {
        "update_tokens_per_s": round(update, 1),
        "sft_tokens_per_s": round(sft, 1),
        "fraction": round(update / sft, 3),
        "tokens_per_step": round(sum(tokens) / len(tokens), 1),
        "own_token_share": round(own / sum(tokens), 3),
        "completion_share": round(completion / sum(tokens), 3),
        "grpo_step": g_ph,
        "sft_step": s_ph,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--scenarios-per-step", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=ModelSpec.model_fields["hidden_size"].default)
    parser.add_argument("--layers", type=int, default=ModelSpec.model_fields["num_layers"].default)
    parser.add_argument("--vocab", type=int, default=1200, help="the tokenizer's size (params.yaml's default: 4000)")
    parser.add_argument("--sides", nargs="+", choices=list(SIDES), default=list(SIDES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs of (a) and of (b)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    scenarios = sample_scenarios(utterance_frame(2, 1), 64, seed=args.seed)
    corpus = utterance_frame(8, 100)["text"].to_list() + [customer_goal(s) for s in scenarios]
    tok = train_tokenizer(corpus, args.vocab, sorted(known_intents()))
    spec = ModelSpec(hidden_size=args.hidden, num_layers=args.layers, tie_word_embeddings=False)
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
          f"params={count_parameters(build_model(spec, tok)):,} vocab={len(tok)} threads={args.threads}")  # fmt: skip
    print(f"steps={args.steps} batch={args.generations}x{args.scenarios_per_step} episodes, "
          f"max_turns={args.max_turns} max_new_tokens={args.max_new_tokens}")  # fmt: skip
    result = {side: measure(side, tok, spec, scenarios, settings, args) for side in args.sides}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
