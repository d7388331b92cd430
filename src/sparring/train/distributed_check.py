"""One SFT step and one GRPO step of sparring's own trainers, under ``accelerate launch`` on any number of processes.

The scale path's smoke test for data parallelism: each process builds the same tiny model (same seed), runs
``train_sft`` (TRL SFTTrainer) for one step on routing conversations, then ``train_side`` (TRL GRPOTrainer with
sparring's multi-turn rollouts against the scripted cooperative customer, rewarded by the judge's world-state
terms) for one step, and writes ``rank<k>.json`` under ``--out``: the world size it saw, the losses, and a
checksum of its weights after each step. Under DDP the ranks' checksums agree (the gradients were all-reduced)
and differ from the starting weights.

    accelerate launch --num_processes 2 --cpu -m sparring.train.distributed_check --out scratch/ddp   # 2 CPU procs
    accelerate launch --config_file configs/deepspeed_zero2.yaml -m sparring.train.distributed_check --out ...  # GPUs
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from sparring.agents.scripted import CooperativeCustomer
from sparring.data.synthetic import utterance_frame
from sparring.judge.rewards import Judge
from sparring.lm.chat import known_intents
from sparring.lm.models import build_model
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import GRPOSettings, ModelSpec, SFTSettings
from sparring.train.demos import intent_examples
from sparring.train.grpo import train_side
from sparring.train.sft import train_sft
from sparring.train.world_reward import ConstantStyle
from sparring.world.scenarios import sample_scenarios

SPEC = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)


def checksum(model: Any) -> float:
    """A weight fingerprint ranks can compare: the sum of every parameter, in float64."""
    return float(sum(p.detach().double().sum() for p in model.parameters()))


def run(out: Path, seed: int = 0) -> dict[str, Any]:
    """The two steps on this process; returns (and writes to ``out/rank<k>.json``) what it saw."""
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    frame = utterance_frame(2, seed=seed)
    tokenizer = train_tokenizer(frame["text"].to_list(), 700, sorted(known_intents()))
    model = build_model(SPEC, tokenizer, seed=seed)
    record: dict[str, Any] = {"rank": rank, "world_size": world, "start": checksum(model)}
    with tempfile.TemporaryDirectory(prefix=f"sparring-ddp-{rank}-") as scratch:
        conversations = intent_examples(frame["text"].to_list()[:32], frame["intent"].to_list()[:32])
        sft = SFTSettings(
            max_steps=1, batch_size=4, learning_rate=1e-2, warmup_steps=0, assistant_only_loss=False, logging_steps=1
        )
        result = train_sft(model, tokenizer, conversations, sft, Path(scratch) / "sft", seed=seed)
        record.update(sft_loss=[c["loss"] for c in result.curves if "loss" in c], after_sft=checksum(result.model))
        grpo = GRPOSettings(
            num_generations=4, scenarios_per_step=4, max_steps=1, learning_rate=1e-2, max_new_tokens=12,
            max_turns=2, max_calls_per_turn=2, logging_steps=1,
        )  # fmt: skip  # groups of 4 over 8 scenarios: a reward spread for the step to learn from, whatever the init
        scenarios = sample_scenarios(frame, 8, seed=seed)
        judge = Judge(ConstantStyle(), max_turns=grpo.max_turns)
        side = train_side(result.model, tokenizer, "agent", CooperativeCustomer(), scenarios, judge, grpo, seed=seed)
        record.update(
            grpo_loss=[c["loss"] for c in side.curves if "loss" in c],
            grpo_episodes=side.rollout_episodes,
            after_grpo=checksum(side.model),
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for rank<k>.json")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(json.dumps(run(args.out, args.seed)))


if __name__ == "__main__":
    main()
