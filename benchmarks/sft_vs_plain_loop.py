"""TRL ``SFTTrainer`` (through ``sparring.train.sft.train_sft``) against a plain PyTorch AdamW loop, same task.

The task is the DESIGN.md probe, on the embedded synthetic utterances: each conversation is one customer
utterance and the agent's ``<intent>NAME`` reply; the held-out utterances come from a second generator seed
(as ingest does). Both sides get the same tokenizer, the same initial weights, the same tokenized rows, the
same optimizer (AdamW, decay on matrices only, clip 1.0), the same warmup + cosine schedule, length-grouped
batches and the same assistant-only loss; then the same teacher-forced evaluation (argmax at the intent
position, over the whole vocabulary). Reported: final train loss, held-out accuracy and training tokens/s
(non-pad tokens per second of training), side by side.

Prints readable lines; the last line is JSON:
``{"plain_acc", "trl_acc", "plain_tokens_per_s", "trl_tokens_per_s", "trl_fraction_of_plain", ...}``.
Usage: ``python benchmarks/sft_vs_plain_loop.py [--per-intent 60] [--epochs 4] [--batch 64]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import get_cosine_schedule_with_warmup

from sparring.data.ingest import HELDOUT_SEED_OFFSET
from sparring.data.synthetic import generate_utterances
from sparring.lm.chat import INTENT, assistant_message, known_intents
from sparring.lm.models import ModelSpec, build_model, count_parameters
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import SFTSettings
from sparring.train.sft import flatten, train_sft


def conversations(per_intent: int, seed: int) -> list[list[dict[str, Any]]]:
    """One ``user: utterance`` / ``assistant: <intent>NAME`` conversation per synthetic utterance."""
    frame = generate_utterances(per_intent, seed)
    return [
        [{"role": "user", "content": text}, assistant_message("", None, intent)]
        for text, intent in zip(frame["text"].to_list(), frame["intent"].to_list(), strict=True)
    ]


def encode(tok: Any, convs: list[list[dict[str, Any]]]) -> list[tuple[list[int], list[int]]]:
    """(input ids, assistant mask) per conversation: what TRL's ``assistant_only_loss`` tokenization gives."""
    rows = []
    for conv in convs:
        out = tok.apply_chat_template(flatten(conv), tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        rows.append((list(out["input_ids"]), list(out["assistant_masks"])))
    return rows


def length_grouped(lengths: list[int], batch: int, rng: random.Random) -> list[list[int]]:
    """HF's LengthGroupedSampler: shuffle, cut into megabatches of 50 batches, sort each by length, split."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    mega = batch * 50
    batches = []
    for start in range(0, len(order), mega):
        chunk = sorted(order[start : start + mega], key=lambda i: -lengths[i])
        batches += [chunk[i : i + batch] for i in range(0, len(chunk), batch)]
    return batches


def collate(rows: list[tuple[list[int], list[int]]], pad: int) -> dict[str, torch.Tensor]:
    """Right-padded ids, attention mask and labels (-100 off the assistant's tokens), like TRL's collator."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    for r, (row, mask) in enumerate(rows):
        ids[r, : len(row)] = torch.tensor(row)
        attn[r, : len(row)] = 1
        labels[r, : len(row)] = torch.tensor([t if m else -100 for t, m in zip(row, mask, strict=True)])
    return {"input_ids": ids, "attention_mask": attn, "labels": labels}


def plain_loop(
    model: Any, rows: list[tuple[list[int], list[int]]], s: SFTSettings, pad: int, seed: int
) -> dict[str, float]:
    """AdamW as HF Trainer sets it up (no decay on biases and norms, clip 1.0), warmup + cosine, per-step mean
    NLL over the assistant's tokens."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "norm" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "norm" not in n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": s.weight_decay}, {"params": rest, "weight_decay": 0.0}],
        lr=s.learning_rate,
        betas=(0.9, s.adam_beta2),
        eps=1e-8,
    )
    rng = random.Random(seed)
    per_epoch = math.ceil(len(rows) / s.batch_size)
    total = int(per_epoch * s.epochs)
    sched = get_cosine_schedule_with_warmup(opt, s.warmup_steps, total)
    model.train()
    step, tokens, losses = 0, 0, []
    start = time.perf_counter()
    while step < total:
        for idx in length_grouped([len(r[0]) for r in rows], s.batch_size, rng):
            if step >= total:
                break
            batch = collate([rows[i] for i in idx], pad)
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            tokens += int(batch["attention_mask"].sum())
            losses.append(loss.item())
            step += 1
    seconds = time.perf_counter() - start
    model.eval()
    tail = losses[-max(1, s.logging_steps) :]
    return {"seconds": seconds, "tokens": tokens, "final_loss": sum(tail) / len(tail), "steps": step}


@torch.inference_mode()
def accuracy(model: Any, tok: Any, rows: list[tuple[list[int], list[int]]], intents: list[str]) -> float:
    """Teacher-forced: the argmax after ``<intent>`` (over the whole vocabulary) is the gold intent's token."""
    marker = tok.convert_tokens_to_ids(INTENT)
    gold = tok.convert_tokens_to_ids(intents)
    model.eval()
    correct = 0
    for start in range(0, len(rows), 256):
        chunk = rows[start : start + 256]
        batch = collate(chunk, tok.pad_token_id)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        for r, (ids, _) in enumerate(chunk):
            pos = ids.index(marker)
            correct += int(logits[r, pos].argmax()) == gold[start + r]
    return correct / len(rows)


def parse_args() -> argparse.Namespace:
    """The command line: the task's size, the shared optimizer settings, threads and seed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-intent", type=int, default=60)
    parser.add_argument("--test-per-intent", type=int, default=20)
    parser.add_argument("--epochs", type=float, default=4.0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--vocab", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main() -> None:
    """The plain loop, then TRL's SFTTrainer, from the same weights on the same rows; their figures side by side."""
    args = parse_args()
    torch.set_num_threads(args.threads)

    train = conversations(args.per_intent, args.seed)
    test = conversations(args.test_per_intent, args.seed + HELDOUT_SEED_OFFSET)
    tok = train_tokenizer([c[0]["content"] for c in train], args.vocab, sorted(known_intents()))
    rows, test_rows = encode(tok, train), encode(tok, test)
    test_intents = [c[1]["intent"] for c in test]
    settings = SFTSettings(
        epochs=args.epochs,
        learning_rate=args.lr,
        batch_size=args.batch,
        warmup_steps=args.warmup,
        max_length=256,
    )
    spec = ModelSpec(tie_word_embeddings=False)  # the untied default this benchmark was measured on
    base = build_model(spec, tok, seed=args.seed)
    print(f"{len(train)} train / {len(test)} held-out utterances, {count_parameters(base):,} params, {settings}")

    model = copy.deepcopy(base)
    plain = plain_loop(model, rows, settings, tok.pad_token_id, args.seed)
    plain["acc"] = accuracy(model, tok, test_rows, test_intents)
    print(
        f"plain loop: {plain['steps']} steps, {plain['seconds']:.0f}s, loss {plain['final_loss']:.4f}, "
        f"acc {plain['acc']:.3f}, {plain['tokens'] / plain['seconds']:.0f} tokens/s"
    )

    with tempfile.TemporaryDirectory() as scratch:
        result = train_sft(copy.deepcopy(base), tok, train, settings, Path(scratch), seed=args.seed)
    trl_acc = accuracy(result.model, tok, test_rows, test_intents)
    trl_tps = result.tokens_per_s
    print(
        f"TRL SFTTrainer: {result.seconds:.0f}s, loss {result.final_loss:.4f}, acc {trl_acc:.3f}, "
        f"{trl_tps:.0f} tokens/s"
    )
    print(
        json.dumps(
            {
                "plain_acc": round(plain["acc"], 4),
                "trl_acc": round(trl_acc, 4),
                "plain_tokens_per_s": round(plain["tokens"] / plain["seconds"]),
                "trl_tokens_per_s": round(trl_tps),
                "trl_fraction_of_plain": round(trl_tps / (plain["tokens"] / plain["seconds"]), 3),
                "plain_loss": round(plain["final_loss"], 4),
                "trl_loss": round(result.final_loss, 4),
                "plain_s": round(plain["seconds"], 1),
                "trl_s": round(result.seconds, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
