"""Tokens/s of DA0's two SFT phases on the same model, side by side: the intent phase against the demonstrations.

DA0's warm start (``sparring.train.demos.warm_start``) runs two TRL SFT phases through ``train_sft``: (1) the intent
phase, every train utterance -> ``<intent>NAME`` (a few dozen tokens an example, the loss on every token), and (2)
the expert demonstrations with the rehearsed exchanges (the loss on the agent's turns). Issue #42 item 4 asks the
first to run at >= 0.7 of the second's tokens/s. Both phases are built from a project folder as the ``agent_sft``
stage builds them (``demos.warm_start_phases`` over its ingested train utterances, train scenarios and tokenizer,
with ``params.yaml``'s settings; ``--member NAME``: a ``peer_rl`` member's model and warm start instead;
``--opening-drill``: the simulator's opening drill too, as ``simulator_sft`` builds it, ``--intent-steps`` long).
Each arm runs a fixed number of optimizer steps of one phase from the same start weights (a model from config): the
phase as configured, and (unless ``--no-fused``) the same with ``fused_head: true``, TRL's fused LM head as
``train_sft`` ran it before #42. The arms alternate ``--repeats`` times in this one process; each figure is an arm's
best run (on a shared VM the slow runs measure the neighbours, not the code).

Tokens are the non-pad tokens the backbone ran over (TRL's ``num_tokens``); the first step of each run is a warm-up
and not timed. Where an arm's median step goes: data (fetching and collating the batch, and the previous step's
logging), the backbone's forward, the head and the loss (from the backbone's output to the gradient reaching it
again: the head's forward and backward, TRL's loss code and metrics), the backbone's backward (gradient clipping
included), the optimizer step; and the shares of padded and of labelled positions. Prints readable lines, then one
JSON object as the last line: ``{"intent": {"tokens_per_s", ...}, "demos": {...}, "intent_fused_head": {...},
"demos_fused_head": {...}, "fraction", "fraction_fused_head", "intent_speedup", ...}``.
Usage: ``python benchmarks/sft_phase_throughput.py --root <project> [--params params.yaml] [--profile default]
[--member qwen] [--opening-drill] [--intent-steps 100] [--demos-steps 200] [--repeats 2] [--no-fused]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch
from transformers import AutoTokenizer, TrainerCallback

from sparring.lm.models import build_model, count_parameters
from sparring.params import load_params
from sparring.settings import SFTSettings
from sparring.train.demos import expert_demonstrations, warm_start_phases
from sparring.train.sft import train_sft
from sparring.train.tracer import opening_exercises
from sparring.world.scenarios import load_scenarios

PARTS = ("data", "backbone_forward", "head_and_loss", "backbone_backward", "optimizer")


class StepTimes(TrainerCallback):
    """Per optimizer step: wall time of each part (see the module's docstring), the positions the backbone ran over,
    and the real and the labelled tokens among them. Hooks on the backbone (its forward, and the gradient reaching
    its output: the head's backward is done), a wrapper on the collator (to count labels) and trainer callbacks."""

    def __init__(self, model: Any) -> None:
        self.steps: list[dict[str, float]] = []
        self.last_end: float | None = None
        self.labelled = self.collated = 0  # label and real-token positions of every batch collated
        model.base_model.register_forward_pre_hook(self._enter, with_kwargs=True)
        model.base_model.register_forward_hook(self._leave)

    def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
        loader = getattr(train_dataloader, "base_dataloader", train_dataloader)  # under accelerate's adapter
        collate = loader.collate_fn

        def counted(examples):
            batch = collate(examples)
            self.labelled += int((batch["labels"][:, 1:] != -100).sum())
            mask = batch.get("attention_mask")
            self.collated += int(mask.sum()) if mask is not None else batch["input_ids"].numel()
            return batch

        loader.collate_fn = counted

    def _enter(self, module, args, kwargs):
        self.t_forward = time.perf_counter()
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        self.positions += ids.numel()
        self.tokens += int(mask.sum()) if mask is not None else ids.numel()

    def _leave(self, module, args, output):
        self.t_forward_end = time.perf_counter()
        if output.last_hidden_state.requires_grad:
            output.last_hidden_state.register_hook(self._head_done)

    def _head_done(self, grad):
        self.t_head_done = time.perf_counter()

    def on_step_begin(self, args, state, control, **kwargs):
        self.t0 = time.perf_counter()
        self.positions, self.tokens = 0, 0

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.t_pre = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        end = time.perf_counter()
        data = self.t0 - self.last_end if self.last_end is not None else 0.0
        self.last_end = end
        self.steps.append(
            {
                "seconds": end - self.t0 + data,
                "data": data,
                "backbone_forward": self.t_forward_end - self.t_forward,
                "head_and_loss": self.t_head_done - self.t_forward_end,
                "backbone_backward": self.t_pre - self.t_head_done,
                "optimizer": end - self.t_pre,
                "pad_share": 1 - self.tokens / max(self.positions, 1),
                "tokens": self.tokens,
            }
        )


def run_phase(
    model: Any, tok: Any, conversations: list, settings: SFTSettings, steps: int, seed: int
) -> dict[str, Any]:
    """``steps`` optimizer steps of one phase as ``train_sft`` runs it; the timed steps' tokens/s and median step."""
    times = StepTimes(model)
    with tempfile.TemporaryDirectory() as scratch:
        train_sft(model, tok, conversations, settings.model_copy(update={"max_steps": steps}), Path(scratch),
                  seed=seed, callbacks=[times])  # fmt: skip
    timed = times.steps[1:]
    seconds, tokens = sum(s["seconds"] for s in timed), sum(s["tokens"] for s in timed)
    median = {k: float(np.median([s[k] for s in timed])) for k in ("seconds", *PARTS)}
    out: dict[str, Any] = {
        "tokens_per_s": round(tokens / seconds, 1),
        "steps_per_s": round(len(timed) / seconds, 3),
        "tokens_per_step": round(tokens / len(timed), 1),
        "step_s": round(median["seconds"], 4),
    }
    for k in PARTS:
        out[f"{k}_share"] = round(median[k] / median["seconds"], 3)
    out["pad_share"] = round(float(np.mean([s["pad_share"] for s in timed])), 3)
    out["labelled_share"] = round(times.labelled / max(times.collated, 1), 3)
    return out


def parse_args() -> argparse.Namespace:
    """The command line: the project folder and params, the steps and repeats per arm, the arms left out or added."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(os.environ.get("SPARRING_ROOT", ".")))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="default: this checkout's")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--intent-steps", type=int, default=100, help="2 of its length-grouped megabatches")
    parser.add_argument("--demos-steps", type=int, default=200, help="4 of its length-grouped megabatches")
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs of each arm")
    parser.add_argument("--no-fused", action="store_true", help="skip the arms with TRL's fused head (the before)")
    parser.add_argument("--member", default=None, help="a peer_rl member's model and warm start instead of DA0's")
    parser.add_argument("--opening-drill", action="store_true", help="also the simulator's opening drill")
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args()


def main() -> None:
    """Both phases built as the stage builds them, each arm timed from the same weights (best of the repeats)."""
    args = parse_args()
    torch.set_num_threads(args.threads)

    p = load_params(args.params, args.profile)
    cfg, spec = p.agent_sft, p.model
    if cfg.tie_word_embeddings is not None:  # as the agent_sft stage builds DA0
        spec = spec.replace(tie_word_embeddings=cfg.tie_word_embeddings)
    if args.member is not None:  # as peer_members builds one (peer_reward.warm_start_member)
        member = p.peer_rl.members[args.member]
        cfg, spec = member.warm_start or p.agent_sft, member.model or spec
    tok = AutoTokenizer.from_pretrained(args.root / "models" / "tokenizer")
    scenarios = load_scenarios(args.root / "data" / "scenarios" / "train.jsonl")[: cfg.demos]
    demos = expert_demonstrations(scenarios, p.seed, refs=cfg.object_refs)
    train = pl.read_parquet(args.root / "data" / "ingest" / "train.parquet")
    phases = warm_start_phases(demos, train["text"].to_list(), train["intent"].to_list(), cfg, p.seed)
    if args.opening_drill and p.simulator_sft.opening_drill is not None:  # as simulator_sft drills the model
        phases["opening_drill"] = (opening_exercises(train), p.simulator_sft.opening_drill)
    steps = {"intent": args.intent_steps, "demos": args.demos_steps, "opening_drill": args.intent_steps}
    # arm -> (phase, its settings): as configured, and with TRL's fused head (the code before issue #42's change)
    arms = {name: (name, settings) for name, (_, settings) in phases.items()}
    if not args.no_fused:
        arms |= {f"{n}_fused_head": (n, s.model_copy(update={"fused_head": True})) for n, (_, s) in phases.items()}
    start = build_model(spec, tok, seed=p.seed)
    weights = copy.deepcopy(start.state_dict())
    print(f"model: {spec.arch} {count_parameters(start):,} params, vocab {len(tok)}, threads {args.threads}")
    for name, (convs, settings) in phases.items():
        print(f"{name}: {len(convs)} conversations, batch {settings.batch_size}, {steps[name]} steps a run")

    best: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeats):
        for arm, (phase, settings) in arms.items():
            model = build_model(spec, tok, seed=p.seed)
            model.load_state_dict(weights)
            got = run_phase(model, tok, phases[phase][0], settings, steps[phase], p.seed)
            if got["tokens_per_s"] > best.get(arm, {}).get("tokens_per_s", 0.0):
                best[arm] = got
    for arm, got in best.items():
        parts = "  ".join(f"{k} {got[f'{k}_share']:.0%}" for k in PARTS)
        print(f"{arm:18s} {got['tokens_per_s']:7.0f} tokens/s, {got['tokens_per_step']:5.0f} tokens a step, median "
              f"step {got['step_s']:.3f} s: {parts}; padding {got['pad_share']:.0%}, "
              f"labelled {got['labelled_share']:.0%}")  # fmt: skip
    fraction = best["intent"]["tokens_per_s"] / best["demos"]["tokens_per_s"]
    result: dict[str, Any] = {**best, "fraction": round(fraction, 3)}
    print(f"intent phase at {result['fraction']:.0%} of the demonstrations' tokens/s (goal >= 70%)")
    if not args.no_fused:
        before = best["intent_fused_head"]["tokens_per_s"] / best["demos_fused_head"]["tokens_per_s"]
        result["fraction_fused_head"] = round(before, 3)
        result["intent_speedup"] = round(best["intent"]["tokens_per_s"] / best["intent_fused_head"]["tokens_per_s"], 3)
        print(f"with TRL's fused head: {before:.0%}; the intent phase {result['intent_speedup']:.2f}x faster without")
    result.update(
        model=spec.arch, member=args.member, steps=steps, repeats=args.repeats, seed=p.seed, threads=args.threads
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
