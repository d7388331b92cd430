"""Peer reward with the whole signal (#59): the teacher reward estimated from G sampled routings (GRPO) beside its
exact expectation over the 77 intents, a graded teacher reward and on-policy distillation (reverse KL), from the
warm starts of benchmarks/peer_reward.py.

Reads a ``--warm-cache`` folder of benchmarks/peer_reward.py (``--profile banking77 --bound-only``: the members'
warm starts on synthetic utterances only). The teacher (the member best on the labelled probe: SmolLM2) scores every
utterance of the seed once (:func:`~sparring.train.peer_expectation.score_intents`: its greedy vote, the same as
``route_intents``', and its outcome distribution), kept in the cache as ``scores.pt`` and as the ``votes.json`` that
benchmarks/peer_reward.py and peer_distil_ceiling.py read. Then each learner trains from a fresh copy of its warm
start on the whole pool (labels withheld) under each arm: ``sampled`` (``train_cohort``, the two learners in
lockstep) or an exact one (``train_expected``). Measured on the seed's 400 held-out utterances, never trained on
and never used to choose: greedy accuracy before / after with the paired bootstrap 95% interval of the cohort's mean
gain (the untrained teacher's zero included, as the issue counts it) and of the learners' alone, agreement with the
teacher, and the top intent's share of the learner's last 64 training votes (collapse: > 0.30). The learners'
accuracy on the probe before / after is what a choice of recipe may read.

``--runs-json PATH`` writes every member's predictions before / after (Banking77 row ids and intents, no texts).
Last line JSON. Usage: ``python benchmarks/peer_expectation.py WARM_CACHE --seed 1 [--arms sampled teacher graded
distill] [--steps 1200 --batch 16 --lr 1e-3] [--runs-json F]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from benchmarks.banking77_split import BANKING77, cached_route_parts, intent_slice, mean_gain, quiet, split_row_ids
from benchmarks.banking77_split import split_banking77 as split  # the same split and cache as peer_reward
from sparring.lm.chat import known_intents
from sparring.lm.checkpoints import load_checkpoint
from sparring.runtime import apply_torch_threads
from sparring.settings import PeerRewardSettings, SFTSettings
from sparring.train.peer_expectation import routing_prompts, score_intents, train_expected
from sparring.train.peer_reward import (
    CollapseGuard,
    accuracy,
    best_on_probe,
    diversity,
    route_intents,
    train_cohort,
)

MEMBERS = ("neox", "smollm", "qwen2")  # pretrained_teacher's cohort, in its order
ARMS = ("sampled", "teacher", "graded", "distill")  # sampled: the teacher reward estimated from G samples (GRPO)


def teacher_scores(folder: Path, model: Any, tokenizer: Any, parts: dict[str, list[str]]) -> dict[str, Any]:
    """The teacher's votes and distributions over the intents for every part, scored once and kept in ``folder``
    (``scores.pt``; ``votes.json`` in benchmarks/peer_reward.py's format, so its sampled arm reads the same votes)."""
    path = folder / "scores.pt"
    if path.is_file():
        saved = torch.load(path)
        if {k: len(v) for k, v in parts.items()} == {k: len(v) for k, v in saved["votes"].items()}:
            return saved
    intents = sorted(known_intents())
    out: dict[str, Any] = {"votes": {}, "outcomes": {}, "seconds": {}}
    for key, texts in parts.items():
        start = time.perf_counter()
        scores = score_intents(model, tokenizer, routing_prompts(model, tokenizer, texts), intents, batch_size=32)
        out["votes"][key], out["outcomes"][key] = scores.votes, scores.outcomes
        out["seconds"][key] = time.perf_counter() - start
        print(f"teacher scored {len(texts)} {key} utterances in {out['seconds'][key]:.0f} s", flush=True)
    torch.save(out, path)
    seconds = sum(out["seconds"].values())
    n = sum(map(len, parts.values()))
    rate = {"route_seconds": round(seconds, 1), "routings_per_s": n / seconds, "route_tokens_per_s": float("nan")}
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    (folder / "votes.json").write_text(json.dumps({"texts_sha256": key, "votes": out["votes"], "rate": rate}))
    return out


def top_share(votes: list[str]) -> float:
    return Counter(votes).most_common(1)[0][1] / len(votes) if votes else 0.0


def exact_settings(args: argparse.Namespace) -> SFTSettings:
    """The exact arms' trainer: peer_rl's declared one (`PeerRewardSettings.exact`: linear decay, no warmup, Adam's
    beta2 0.999, no weight decay, random batches) at this run's budget (steps, utterances per step, lr)."""
    return PeerRewardSettings().exact.replace(
        max_steps=args.steps, batch_size=args.batch, learning_rate=args.lr, logging_steps=max(args.steps // 10, 1)
    )


def train_exact(
    folder: Path, args: argparse.Namespace, arm: str, name: str, pool: list, gold: list, votes: list, outcomes: Any
) -> tuple[Any, Any, Any, CollapseGuard]:
    """One learner from a fresh copy of its warm start under an exact arm."""
    model, tokenizer = load_checkpoint(folder / name / "model")
    guard = CollapseGuard(64, 0.0, 1.0)  # records the last 64 votes; never fires
    with quiet():
        result = train_expected(
            model,
            tokenizer,
            pool,
            sorted(known_intents()),
            arm,  # type: ignore[arg-type]
            exact_settings(args),
            args.warm_cache / "scratch" / f"seed{args.seed}" / arm / name,
            scale=args.scale or "group",
            teacher_votes=votes,
            teacher_outcomes=None if arm == "teacher" else outcomes,
            gold=gold,
            guard=guard,
            seed=args.seed,
        )
    return result.model, tokenizer, result.log, guard


def train_sampled(
    folder: Path, args: argparse.Namespace, pool: list, gold: list, votes: list
) -> dict[str, tuple[Any, Any, Any, None]]:
    """The sampled arm (benchmarks/peer_reward.py's ``pretrained_teacher``): both learners in lockstep, G = ``--g``
    routings per utterance, the teacher's votes given."""
    loaded = {k: load_checkpoint(folder / k / "model") for k in MEMBERS}
    base = PeerRewardSettings()
    grpo = base.grpo.replace(
        max_steps=args.steps, scenarios_per_step=args.batch, num_generations=args.g, learning_rate=args.lr
    )
    settings = base.replace(
        members={k: base.members["qwen"] for k in MEMBERS},  # only the names are read here
        reward="teacher",
        estimate="sampled",
        teacher="smollm",
        grpo=grpo,
        collapse_window=args.batch * 4,
    )
    with quiet():
        result = train_cohort(
            {k: m for k, (m, _) in loaded.items()},
            {k: t for k, (_, t) in loaded.items()},
            pool,
            settings,
            args.warm_cache / "scratch" / f"seed{args.seed}" / "sampled",
            gold=gold,
            seed=args.seed,
            teacher_votes=votes,
        )
    return {k: (result.models[k], loaded[k][1], result.logs[k], None) for k in args.learners}


def parse_args() -> argparse.Namespace:
    """The command line: the warm-start cache and seed, the arms and learners, their RL budget."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("warm_cache", type=Path)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    ap.add_argument("--learners", nargs="+", choices=["neox", "qwen2"], default=["neox", "qwen2"])
    ap.add_argument("--steps", type=int, default=1200, help="optimizer steps per learner and arm")
    ap.add_argument("--batch", type=int, default=16, help="pool utterances per step")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--scale", choices=["group", "none"], default="group", help="the exact arms' scaling of Â")
    ap.add_argument("--g", type=int, default=16, help="the sampled arm's routings per utterance")
    ap.add_argument("--score-only", action="store_true", help="score the teacher's votes and stop")
    ap.add_argument("--runs-json", type=Path, help="per-utterance predictions before / after, ids only")
    return ap.parse_args()


def main() -> None:
    """The teacher's votes scored once, then every arm's learners trained on them and measured, arm by arm.
    Over 60 lines: the arms side by side from one teacher's votes, top to bottom as the printout reads."""
    args = parse_args()
    apply_torch_threads(1)
    folder = args.warm_cache / f"seed{args.seed}"
    missing = [m for m in MEMBERS if not (folder / m / "model").is_dir()]
    if missing:
        sys.exit(
            f"{folder}: no warm start of {missing}: run benchmarks/peer_reward.py --profile banking77 "
            f"--warm-cache {args.warm_cache} --first-seed {args.seed} --seeds 1 --bound-only first"
        )
    data = split(args.seed, 400, 150, intent_slice(77))
    ids = split_row_ids(args.seed, intent_slice(77))
    pool_texts, pool_gold = data["pool"]
    order = list(range(len(pool_texts)))
    random.Random(args.seed + 1).shuffle(order)  # benchmarks/peer_reward.py's pool order
    pool, gold = [pool_texts[i] for i in order], [pool_gold[i] for i in order]
    (m_texts, m_gold), (p_texts, p_gold) = data["measure"], data["probe"]
    parts = {"measure": m_texts, "probe": p_texts, "pool": pool}
    models, tokenizers = {}, {}
    for name in MEMBERS:
        models[name], tokenizers[name] = load_checkpoint(folder / name / "model")
        models[name].eval()
    votes = {}
    for name in MEMBERS:
        if name == "smollm":
            scores = teacher_scores(folder / name, models[name], tokenizers[name], parts)
            votes[name] = scores["votes"]
        else:
            votes[name], _ = cached_route_parts(models[name], tokenizers[name], parts, folder / name)
    div = diversity({k: votes[k]["probe"] for k in MEMBERS}, p_gold)
    teacher = best_on_probe(div)
    print(f"seed {args.seed}: probe accuracy {div['accuracy']}; teacher {teacher}", flush=True)
    if teacher != "smollm":
        sys.exit(f"the best member on the probe is {teacher}, not smollm: this benchmark scores smollm as teacher")
    if args.score_only:
        return
    t_outcomes, t_votes = scores["outcomes"]["pool"], scores["votes"]["pool"]
    before = {k: votes[k]["measure"] for k in MEMBERS}
    results: dict[str, Any] = {}
    runs: dict[str, Any] = {"seed": args.seed, "measure_ids": ids[:400], "gold": m_gold, "before": before, "arms": {}}
    for arm in args.arms:
        after = {teacher: before[teacher]}
        rows = {}
        start = time.perf_counter()
        trained = (
            train_sampled(folder, args, pool, gold, t_votes)
            if arm == "sampled"
            else {n: train_exact(folder, args, arm, n, pool, gold, t_votes, t_outcomes) for n in args.learners}
        )
        for name, (model, tokenizer, log, guard) in trained.items():
            after[name] = route_intents(model, tokenizer, m_texts)
            probe_after = accuracy(route_intents(model, tokenizer, p_texts), p_gold)  # what a choice may read
            tail = log.steps[-max(64 // args.batch, 1) :]
            rows[name] = {
                "before": accuracy(before[name], m_gold),
                "after": accuracy(after[name], m_gold),
                "probe": [div["accuracy"][name], probe_after],
                "agreement": [
                    accuracy(before[name], votes[teacher]["measure"]),
                    accuracy(after[name], votes[teacher]["measure"]),
                ],
                "reward_first_last": [
                    statistics.mean(s["reward"] for s in log.steps[:50]),
                    statistics.mean(s["reward"] for s in log.steps[-50:]),
                ],
                "unparseable_last": statistics.mean(s["unparseable"] for s in tail),
                "top_share_measure": top_share([v for v in after[name] if v is not None]),
                "top_share_last_votes": top_share(list(guard.votes)) if guard is not None else None,
                "collapsed": log.collapsed,
            }
        seconds = time.perf_counter() - start
        for name in trained:
            r = rows[name]
            print(
                f"seed {args.seed} {arm:>8} {name:>6}: {r['before']:.3f} -> {r['after']:.3f}  agreement "
                f"{r['agreement'][0]:.3f} -> {r['agreement'][1]:.3f}  reward {r['reward_first_last'][0]:.3f} -> "
                f"{r['reward_first_last'][1]:.3f}  top share {r['top_share_measure']:.2f}",
                flush=True,
            )
        cohort = [k for k in MEMBERS if k in after]  # the teacher and the learners trained
        ok = {
            k: [[float(v == g) for v, g in zip(p[k], m_gold, strict=True)] for k in cohort]
            for k, p in (("before", before), ("after", after))
        }
        gain, ci = mean_gain(ok["before"], ok["after"], args.seed)
        learners = [i for i, k in enumerate(cohort) if k != teacher]
        lgain, lci = mean_gain([ok["before"][i] for i in learners], [ok["after"][i] for i in learners], args.seed)
        print(
            f"seed {args.seed} {arm:>8}: mean gain {gain:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]; learners "
            f"{lgain:+.3f} [{lci[0]:+.3f}, {lci[1]:+.3f}]; learners on the probe "
            f"{statistics.mean(rows[k]['probe'][1] - rows[k]['probe'][0] for k in rows):+.3f}",
            flush=True,
        )
        results[arm] = {
            "seconds": round(seconds, 1),
            "probe_gain": statistics.mean(rows[k]["probe"][1] - rows[k]["probe"][0] for k in rows),
            "members": rows,
            "mean_gain": gain,
            "gain_ci": ci,
            "learners_gain": lgain,
            "learners_gain_ci": lci,
        }
        runs["arms"][arm] = {"after": {k: after[k] for k in cohort}, "seconds": round(seconds, 1)}
    if args.runs_json:
        args.runs_json.parent.mkdir(parents=True, exist_ok=True)
        args.runs_json.write_text(json.dumps(runs))
    print(
        json.dumps(
            {
                "seed": args.seed,
                "teacher": teacher,
                "steps": args.steps,
                "batch": args.batch,
                "lr": args.lr,
                "teacher_acc": accuracy(votes[teacher]["measure"], m_gold),
                "arms": results,
                "data": str(BANKING77),
            }
        )
    )


if __name__ == "__main__":
    main()
