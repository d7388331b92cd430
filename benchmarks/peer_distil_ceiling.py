"""The ceiling of a peer-reward learner under the teacher (#43): the same teacher labels handed to the learner by
SFT, no RL. A learner rewarded for agreeing with a label can at most learn that label, so this is what the teacher
reward could reach with the learner's capacity; compare it with benchmarks/peer_reward.py's RL gains.

Reads a ``--warm-cache`` folder of benchmarks/peer_reward.py (the member's warm start and the teacher's cached votes
of measure / probe / the whole pool, ``--pool all``), trains the member on (pool utterance -> teacher label) and
prints greedy accuracy on the 400 measured utterances before and after. Last line JSON.
Usage: ``python benchmarks/peer_distil_ceiling.py WARM_CACHE --member neox --seed 1 [--epochs 8 --lr 5e-3]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from benchmarks.banking77_split import intent_slice, split_banking77  # the same split
from sparring.lm.checkpoints import load_checkpoint
from sparring.runtime import apply_torch_threads
from sparring.settings import SFTSettings
from sparring.train.demos import intent_examples
from sparring.train.peer_reward import accuracy, route_intents
from sparring.train.sft import train_sft


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("warm_cache", type=Path)
    ap.add_argument("--member", default="neox")
    ap.add_argument("--teacher", default="smollm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=float, default=8)
    ap.add_argument("--lr", type=float, default=5e-3)
    args = ap.parse_args()
    apply_torch_threads(1)
    data = split_banking77(args.seed, 400, 150, intent_slice(77))
    folder = args.warm_cache / f"seed{args.seed}"
    votes = json.loads((folder / args.teacher / "votes.json").read_text())["votes"]
    pool = data["pool"][0]
    order = list(range(len(pool)))
    random.Random(args.seed + 1).shuffle(order)  # benchmarks/peer_reward.py's pool order
    if len(votes["pool"]) != len(pool):
        sys.exit(f"{folder / args.teacher / 'votes.json'}: {len(votes['pool'])} pool votes, not the whole pool")
    labelled = [(pool[i], v) for i, v in zip(order, votes["pool"], strict=True) if v is not None]
    model, tokenizer = load_checkpoint(folder / args.member / "model")
    texts, gold = data["measure"]
    before = accuracy(route_intents(model, tokenizer, texts), gold)
    start = time.perf_counter()
    system = getattr(model.config, "agent_system_prompt", "") or None
    examples = intent_examples([t for t, _ in labelled], [v for _, v in labelled], system)
    cfg = SFTSettings(
        epochs=args.epochs,
        batch_size=16,
        learning_rate=args.lr,
        warmup_steps=20,
        max_length=96,
        assistant_only_loss=True,
    )
    model.train()
    train_sft(model, tokenizer, examples, cfg, folder.parent / "distil" / args.member, seed=args.seed)
    model.eval()
    after_votes = route_intents(model, tokenizer, texts)
    result = {
        "member": args.member,
        "seed": args.seed,
        "epochs": args.epochs,
        "lr": args.lr,
        "n_labelled": len(labelled),
        "before": before,
        "after": accuracy(after_votes, gold),
        "teacher_acc": accuracy(votes["measure"], gold),
        "agreement_after": accuracy(after_votes, votes["measure"]),
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(f"{args.member}: {before:.3f} -> {result['after']:.3f} (teacher {result['teacher_acc']:.3f})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
