"""Peer-reward RL (Co-RL) on real, unlabeled Banking77 utterances: a heterogeneous cohort, a same-family cohort and
self-majority (TTRL) side by side, from the same warm starts.

Banking77's train.csv is read by path (never copied) and split per seed into a measurement part (``--measure``
rows), a probe part (``--probe`` rows, for Co-RL's κ/c/w) and the unlabeled pool (the rest; its labels are
withheld from training and only measure pseudo-label accuracy). No member ever sees a Banking77 label: members are
tiny models from config warm-started on the synthetic generator's utterances (our own labels), intent phase only.
Cohorts, all from the same warm starts of a seed:

- ``heterogeneous``: llama, qwen2 and gpt_neox of different sizes, ring reward (A←B←C←A);
- ``same_family``: three llamas of one size, different init seeds, ring reward;
- ``self_majority``: the heterogeneous members, each rewarded by its own plurality vote (TTRL);
- ``heterogeneous_majority``: the heterogeneous members, rewarded by the other two's pooled samples.

Before/after: greedy intent accuracy on the measurement part. Last line JSON.

Usage: ``python benchmarks/peer_reward.py [--seeds 3] [--steps 30] [--per-intent 40] [--epochs 4]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from sparring.agents.chat import known_intents
from sparring.agents.models import build_model
from sparring.agents.tokenizer import train_tokenizer
from sparring.data.sources import read_text_csv
from sparring.data.synthetic import generate_utterances
from sparring.runtime import apply_torch_threads
from sparring.settings import AgentSFTSettings, ModelSpec, PeerMember, PeerRewardSettings, SFTSettings
from sparring.train.peer_cohort import accuracy, probe, route_intents, warm_start_member
from sparring.train.peer_reward import summarize, train_cohort

BANKING77 = Path(__file__).resolve().parents[2] / "shared" / "data" / "banking77" / "train.csv"
TINY = {"num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "max_position_embeddings": 256}
SPECS = {  # name -> (spec, init seed offset)
    "llama": (ModelSpec(arch="llama", hidden_size=64, intermediate_size=192, **TINY), 0),
    "qwen2": (ModelSpec(arch="qwen2", hidden_size=80, intermediate_size=160, **TINY), 0),
    "neox": (ModelSpec(arch="gpt_neox", hidden_size=96, intermediate_size=256, **TINY), 0),
    "llama_b": (ModelSpec(arch="llama", hidden_size=64, intermediate_size=192, **TINY), 101),
    "llama_c": (ModelSpec(arch="llama", hidden_size=64, intermediate_size=192, **TINY), 202),
}
COHORTS = {  # name -> (members, reward)
    "heterogeneous": (("llama", "qwen2", "neox"), "ring"),
    "same_family": (("llama", "llama_b", "llama_c"), "ring"),
    "self_majority": (("llama", "qwen2", "neox"), "self"),
    "heterogeneous_majority": (("llama", "qwen2", "neox"), "majority"),  # the others' pooled samples
}


def intent_slice(n: int) -> list[str]:
    """``n`` of the 77 intents, evenly spaced in name order (all of them for n >= 77)."""
    names = sorted(known_intents() & set(read_text_csv(BANKING77)["category"].to_list()))
    return names if n >= len(names) else names[:: len(names) // n][:n]


def split_banking77(
    seed: int, n_measure: int, n_probe: int, intents: Sequence[str]
) -> dict[str, tuple[list[str], list[str]]]:
    """Banking77 train rows of ``intents`` shuffled by ``seed``: measure, probe and the pool (labels withheld)."""
    frame = read_text_csv(BANKING77)
    keep = set(intents)
    rows = [r for r in zip(frame["text"].to_list(), frame["category"].to_list(), strict=True) if r[1] in keep]
    random.Random(seed).shuffle(rows)
    parts = {"measure": rows[:n_measure], "probe": rows[n_measure : n_measure + n_probe]}
    parts["pool"] = rows[n_measure + n_probe :]
    return {k: ([t for t, _ in v], [i for _, i in v]) for k, v in parts.items()}


def quiet() -> contextlib.AbstractContextManager:
    """TRL's log dictionaries and warnings off the terminal."""
    sink = io.StringIO()
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(sink))
    stack.enter_context(contextlib.redirect_stderr(sink))
    return stack


def fresh_copy(model: Any, spec: ModelSpec, tokenizer: Any) -> Any:
    """A new model of ``spec`` holding ``model``'s weights (each cohort trains its own copy of a warm start)."""
    copy = build_model(spec, tokenizer)
    copy.load_state_dict(model.state_dict())
    copy.config.agent_system_prompt = model.config.agent_system_prompt
    return copy


def run_seed(seed: int, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """Warm-start every member of the seed once, then train each cohort from copies of those warm starts."""
    keep = intent_slice(args.intents)
    data = split_banking77(seed, args.measure, args.probe, keep)
    synth = generate_utterances(args.per_intent, seed=seed).filter(pl.col("intent").is_in(keep))
    texts, intents = synth["text"].to_list(), synth["intent"].to_list()
    tokenizer = train_tokenizer(texts + data["pool"][0], 1500, sorted(known_intents()))  # no Banking77 label
    intent_phase = SFTSettings(
        epochs=args.epochs, batch_size=16, learning_rate=5e-3, warmup_steps=20, max_length=96, assistant_only_loss=True
    )
    recipe = AgentSFTSettings(intent=intent_phase)
    warm: dict[str, Any] = {}
    before: dict[str, float] = {}
    m_texts, m_gold = data["measure"]
    for name, (spec, offset) in SPECS.items():
        t0 = time.perf_counter()
        with quiet():
            member = PeerMember(model=spec, demos=False)
            warm[name] = warm_start_member(member, tokenizer, texts, intents, [], recipe, scratch / name, seed + offset)
        before[name] = accuracy(route_intents(warm[name], tokenizer, m_texts), m_gold)
        print(f"seed {seed} warm start {name}: {time.perf_counter() - t0:.0f} s, intent acc {before[name]:.3f}")
    pool_texts, pool_gold = data["pool"]
    order = list(range(len(pool_texts)))
    random.Random(seed + 1).shuffle(order)
    n = args.steps * args.batch
    pool, gold = [pool_texts[i] for i in order[:n]], [pool_gold[i] for i in order[:n]]
    out: dict[str, Any] = {}
    for cohort, (names, reward) in COHORTS.items():
        base = PeerRewardSettings(members={k: PeerMember(model=SPECS[k][0], demos=False) for k in names})
        settings = base.replace(
            reward=reward,
            grpo=base.grpo.replace(
                max_steps=args.steps,
                scenarios_per_step=args.batch,
                num_generations=args.g,
                learning_rate=args.lr,
            ),
            collapse_window=args.batch * 4,
        )
        models = {k: fresh_copy(warm[k], SPECS[k][0], tokenizer) for k in names}
        diversity = probe(models, tokenizer, *data["probe"])
        with quiet():
            result = train_cohort(models, tokenizer, pool, settings, scratch / cohort, gold=gold, seed=seed)
        members = {}
        for k in names:
            after = accuracy(route_intents(result.models[k], tokenizer, m_texts), m_gold)
            s = summarize(result.logs[k])
            members[k] = {
                "before": before[k],
                "after": after,
                "collapsed": s["collapsed"],
                "pseudo_label_acc": s.get("target_acc_all"),
                "own_vote_acc": s.get("vote_acc_all"),
                "reward_mean": s["reward_mean"],
                "entropy": s["entropy"],
            }
            print(
                f"seed {seed} {cohort:>13} {k:>7}: {before[k]:.3f} -> {after:.3f}  collapsed {s['collapsed']}  "
                f"target acc {s.get('target_acc_all', float('nan')):.3f}  own vote acc "
                f"{s.get('vote_acc_all', float('nan')):.3f}  reward {s['reward_mean']:.3f}"
            )
        print(
            f"seed {seed} {cohort:>13}: kappa {diversity['kappa']:.3f}  c {diversity['c']:.3f}  w {diversity['w']:.3f}"
            f"  ({result.seconds:.0f} s)"
        )
        out[cohort] = {"members": members, "kappa": diversity["kappa"], "c": diversity["c"], "w": diversity["w"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20, help="GRPO steps per member")
    ap.add_argument("--batch", type=int, default=8, help="unlabeled utterances per step")
    ap.add_argument("--g", type=int, default=8, help="routings sampled per utterance")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--intents", type=int, default=10, help="Banking77 intents in the slice (77: all)")
    ap.add_argument("--per-intent", type=int, default=60, help="synthetic warm-start utterances per intent")
    ap.add_argument("--epochs", type=float, default=12, help="warm start's intent-phase epochs")
    ap.add_argument("--measure", type=int, default=400, help="Banking77 rows accuracy is measured on")
    ap.add_argument("--probe", type=int, default=150, help="Banking77 rows of the diversity probe")
    args = ap.parse_args()
    apply_torch_threads(1)
    start = time.perf_counter()
    runs = []
    with tempfile.TemporaryDirectory(prefix="sparring-peer-") as tmp:
        for seed in range(args.seeds):
            runs.append(run_seed(seed, args, Path(tmp) / f"seed{seed}"))
    summary: dict[str, Any] = {}
    print("\ncohort          before  after   gain   collapsed  pseudo-label acc  own vote acc")
    for cohort in COHORTS:
        ms = [m for r in runs for m in r[cohort]["members"].values()]
        row = {
            "before": statistics.mean(m["before"] for m in ms),
            "after": statistics.mean(m["after"] for m in ms),
            "collapsed": sum(m["collapsed"] for m in ms),
            "pseudo_label_acc": statistics.mean(m["pseudo_label_acc"] for m in ms),
            "own_vote_acc": statistics.mean(m["own_vote_acc"] for m in ms),
            "kappa": statistics.mean(r[cohort]["kappa"] for r in runs),
            "c": statistics.mean(r[cohort]["c"] for r in runs),
            "w": statistics.mean(r[cohort]["w"] for r in runs),
            "per_seed": [{k: [m["before"], m["after"]] for k, m in r[cohort]["members"].items()} for r in runs],
        }
        row["gain"] = row["after"] - row["before"]
        summary[cohort] = row
        print(
            f"{cohort:<15} {row['before']:.3f}   {row['after']:.3f}  {row['gain']:+.3f}  {row['collapsed']:>3}"
            f"        {row['pseudo_label_acc']:.3f}             {row['own_vote_acc']:.3f}"
        )
    ordering = sorted(COHORTS, key=lambda c: -summary[c]["gain"])
    print("ordering by gain:", " > ".join(ordering))
    summary.update(
        ordering=ordering,
        seeds=args.seeds,
        steps=args.steps,
        n_measure=args.measure,
        intents=args.intents,
        wall_seconds=round(time.perf_counter() - start, 1),
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
