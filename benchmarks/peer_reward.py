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
- ``heterogeneous_majority``: the heterogeneous members, rewarded by the other two's pooled samples;
- ``pretrained_ring``: SmolLM2-135M-Instruct + LoRA (``smollm``, warm-started on the same synthetic utterances,
  ``--smollm-steps`` steps of 16) between qwen2 and neox, ring reward (three families);
- ``pretrained_teacher``: the same three under ``teacher``: the member best on the probe (SmolLM2 so far) labels
  the pool once with its greedy votes and is not trained; neox and qwen2 learn to agree with it;
- ``learners_self``: neox and qwen2 from the same warm starts, each rewarded by its own plurality vote (TTRL).

``--profile banking77`` is the issue's acceptance run: all 77 intents, ``pretrained_teacher`` first, with its
learners' self-majority (TTRL, ``learners_self``) and the same-family ring beside it, at the RL budget below.
``--warm-cache DIR`` keeps each seed's warm starts (SmolLM2's costs ~20 minutes a seed on this CPU) and routings
for the next run with the same warm-start settings, so RL arms can be compared from one warm start.

The bound comes first: before any RL, every member's own accuracy on the measurement part and its target-label
accuracy on ``--bound-pool`` rows of the pool (the withheld-label accuracy of the labels its cohort's reward would
teach it, from every member's greedy vote: :func:`~sparring.train.peer_reward.target_label_accuracy`); under a
reward a member can at most learn those labels. ``--bound-only`` stops there. Then before/after: greedy intent
accuracy on the measurement part, with a paired bootstrap 95% interval of the members' mean gain per seed.
Last line JSON: the first cohort in the issue's shape (``seeds`` -> members' before / after / target_label_acc,
mean_gain, gain_ci; ``reward``), every cohort under ``cohorts``, the members' warm-start and routing costs.

``--runs-json F`` writes every cohort member's greedy predictions before and after RL on the measured rows, by
train.csv row id with the gold intents (no texts), so each interval can be recomputed.

Usage: ``python benchmarks/peer_reward.py [--profile banking77] [--seeds 2] [--cohorts pretrained_teacher]
[--bound-only] [--warm-cache DIR] [--runs-json F]``

One file over 400 lines: a benchmark is one script: the warm starts, the bound, then every cohort's RL from them,
in the order they run.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from benchmarks.banking77_split import (
    cached_route_parts,
    intent_slice,
    mean_gain,
    quiet,
    split_banking77,
    split_row_ids,
)
from sparring.atomic import write_json
from sparring.data.synthetic import generate_utterances
from sparring.drivers import peer_rl as peer_rl_driver
from sparring.lm.chat import known_intents
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.models import build_model
from sparring.lm.pretrained import SMOLLM2_ALIAS
from sparring.lm.tokenizer import train_tokenizer
from sparring.runtime import apply_torch_threads
from sparring.settings import AgentSFTSettings, ModelSpec, PeerMember, PeerRewardSettings, SFTSettings
from sparring.train.peer_reward import (
    Label,
    accuracy,
    best_on_probe,
    diversity,
    member_tokenizer,
    route_intents,
    target_label_accuracy,
    warm_start_member,
)

TINY = {"num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "max_position_embeddings": 256}
SPECS = {  # name -> (spec, init seed offset)
    "llama": (ModelSpec(arch="llama", hidden_size=64, intermediate_size=192, **TINY), 0),
    "qwen2": (ModelSpec(arch="qwen2", hidden_size=80, intermediate_size=160, **TINY), 0),
    "neox": (ModelSpec(arch="gpt_neox", hidden_size=96, intermediate_size=256, **TINY), 0),
    "llama_b": (ModelSpec(arch="llama", hidden_size=64, intermediate_size=192, **TINY), 101),
    "llama_c": (ModelSpec(arch="llama", hidden_size=64, intermediate_size=192, **TINY), 202),
    "smollm": (
        ModelSpec(name_or_path=SMOLLM2_ALIAS, lora={"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}),
        0,
    ),
}
COHORTS = {  # name -> (members, reward)
    "heterogeneous": (("llama", "qwen2", "neox"), "ring"),
    "same_family": (("llama", "llama_b", "llama_c"), "ring"),
    "self_majority": (("llama", "qwen2", "neox"), "self"),
    "heterogeneous_majority": (("llama", "qwen2", "neox"), "majority"),  # the others' pooled samples
    "heterogeneous_teacher": (("llama", "qwen2", "neox"), "teacher"),  # the best tiny member labels the others
    "pretrained_ring": (("neox", "smollm", "qwen2"), "ring"),  # neox <- smollm <- qwen2 <- neox
    "pretrained_teacher": (("neox", "smollm", "qwen2"), "teacher"),  # the best on the probe labels the others
    "learners_self": (("neox", "qwen2"), "self"),  # the teacher's learners from the same warm starts, under TTRL
}
PROFILES = {  # --profile: the defaults it sets (flags given on the command line win)
    "banking77": {
        "intents": 77,
        "cohorts": ["pretrained_teacher", "learners_self", "same_family"],
        "steps": 1200,
        "batch": 16,
        "g": 16,
        "lr": 1e-3,
        "pool": "all",
    },
}


def warm_start_data(per_intent: int, seed: int, intents: Sequence[str]) -> tuple[list[str], list[str]]:
    """What every member is warm-started on: the synthetic generator's utterances of ``intents`` and their labels
    (our own), never a Banking77 row."""
    synth = generate_utterances(per_intent, seed=seed).filter(pl.col("intent").is_in(list(intents)))
    return synth["text"].to_list(), synth["intent"].to_list()


def member_settings(name: str, args: argparse.Namespace) -> PeerMember:
    """A member of the benchmark: intent phase only; SmolLM2 with its own step budget (a pretrained step costs far
    more than a tiny member's), its names' rows from their words."""
    spec = SPECS[name][0]
    if spec.name_or_path is None:
        return PeerMember(model=spec, demos=False)
    phase = SFTSettings(
        max_steps=args.smollm_steps,
        batch_size=16,
        learning_rate=args.smollm_lr,
        warmup_steps=10,
        max_length=96,
        assistant_only_loss=True,
    )
    return PeerMember(model=spec, demos=False, name_rows="words", warm_start=AgentSFTSettings(intent=phase))


def fresh_copy(model: Any, spec: ModelSpec, tokenizer: Any) -> Any:
    """A new model of ``spec`` holding ``model``'s weights (each cohort trains its own copy of a warm start)."""
    copy = build_model(spec, tokenizer)
    copy.load_state_dict(model.state_dict())
    copy.config.agent_system_prompt = model.config.agent_system_prompt
    return copy


def warm_start_members(
    names: Sequence[str],
    texts: Sequence[str],
    intents: Sequence[str],
    shared: Any,
    args: argparse.Namespace,
    scratch: Path,
    seed: int,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, float]]]:
    """Every named member warm-started on the synthetic ``texts``/``intents`` alone: models, tokenizers, seconds."""
    intent_phase = SFTSettings(
        epochs=args.epochs, batch_size=16, learning_rate=5e-3, warmup_steps=20, max_length=96, assistant_only_loss=True
    )
    recipe = AgentSFTSettings(intent=intent_phase)
    warm, tokenizers, costs = {}, {}, {}
    for name in names:
        member = member_settings(name, args)
        tokenizers[name] = member_tokenizer(member, shared, sorted(known_intents()))
        cached = warm_cache_dir(args, seed, name)
        if cached is not None and (cached / "warm_start.json").is_file():
            warm[name], tokenizers[name], costs[name] = load_warm_start(cached, warm_start_key(args, seed, name))
            print(f"seed {seed} {name:>7}: warm start loaded from {cached}", flush=True)
            continue
        start = time.perf_counter()
        with quiet():
            warm[name] = warm_start_member(
                member, tokenizers[name], texts, intents, [], recipe, scratch / name, seed + SPECS[name][1]
            )
        costs[name] = {"warm_start_seconds": round(time.perf_counter() - start, 1)}
        if cached is not None:
            save_checkpoint(warm[name], tokenizers[name], cached / "model")
            key = {"key": warm_start_key(args, seed, name), **costs[name]}
            (cached / "warm_start.json").write_text(json.dumps(key, indent=1))
    return warm, tokenizers, costs


def warm_start_key(args: argparse.Namespace, seed: int, name: str) -> dict[str, Any]:
    """Everything a member's warm start depends on: a cached one is reused only when all of it matches."""
    keys = ("intents", "per_intent", "epochs") + (("smollm_steps", "smollm_lr") if name == "smollm" else ())
    return {"member": name, "seed": seed, **{k: getattr(args, k) for k in keys}}


def warm_cache_dir(args: argparse.Namespace, seed: int, name: str) -> Path | None:
    return None if args.warm_cache is None else Path(args.warm_cache) / f"seed{seed}" / name


def load_warm_start(folder: Path, key: dict[str, Any]) -> tuple[Any, Any, dict[str, float]]:
    """A cached warm start and its recorded cost; a cache made with other settings is refused, naming its file."""
    saved = json.loads((folder / "warm_start.json").read_text())
    if saved["key"] != key:
        sys.exit(f"{folder / 'warm_start.json'}: made with {saved['key']}, not {key}: use another --warm-cache")
    model, tokenizer = load_checkpoint(folder / "model")
    model.eval()
    return model, tokenizer, {"warm_start_seconds": saved["warm_start_seconds"], "warm_start_cached": True}


def pool_size(value: str) -> int | str:
    """``--pool``: a count of unique utterances, or ``all`` of the seed's pool."""
    if value == "all":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or all, got {value!r}") from None


def finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def correct(votes: Sequence[Label], gold: Sequence[str]) -> list[float]:
    return [float(v == g) for v, g in zip(votes, gold, strict=True)]


def run_seed(seed: int, args: argparse.Namespace, scratch: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Warm-start every member of the seed once, measure the bound, then train each cohort from copies of those
    warm starts (unless ``--bound-only``)."""
    keep = intent_slice(args.intents)
    data = split_banking77(seed, args.measure, args.probe, keep)
    texts, intents = warm_start_data(args.per_intent, seed, keep)
    shared = train_tokenizer(texts + data["pool"][0], 1500, sorted(known_intents()))  # texts only: no label
    names = list(dict.fromkeys(n for c in args.cohorts for n in COHORTS[c][0]))
    warm, tokenizers, costs = warm_start_members(names, texts, intents, shared, args, scratch, seed)
    pool_texts, pool_gold = data["pool"]
    order = list(range(len(pool_texts)))
    random.Random(seed + 1).shuffle(order)
    n = len(pool_texts) if args.pool == "all" else args.pool or args.steps * args.batch  # unique utterances
    n_bound = max(args.bound_pool, n)  # the teacher's votes cover the pool trained on
    bound_texts, bound_gold = [pool_texts[i] for i in order[:n_bound]], [pool_gold[i] for i in order[:n_bound]]
    (m_texts, m_gold), (p_texts, p_gold) = data["measure"], data["probe"]
    votes = {}
    for name in names:
        parts = {"measure": m_texts, "probe": p_texts, "pool": bound_texts}
        votes[name], rate = cached_route_parts(warm[name], tokenizers[name], parts, warm_cache_dir(args, seed, name))
        costs[name].update(rate)
        before = accuracy(votes[name]["measure"], m_gold)
        on_pool = accuracy(votes[name]["pool"][: args.bound_pool], bound_gold[: args.bound_pool])
        print(
            f"seed {seed} {name:>7}: own acc {before:.3f} (pool {on_pool:.3f}); warm start "
            f"{costs[name]['warm_start_seconds']:.0f} s; routing {rate['routings_per_s']:.1f} utterances/s, "
            f"{rate['route_tokens_per_s']:.0f} tokens/s",
            flush=True,
        )
    out = {
        cohort: cohort_bound(cohort, votes, m_gold, p_gold, bound_gold, args.bound_pool, seed)
        for cohort in args.cohorts
    }
    pool = ([pool_texts[i] for i in order[:n]], [pool_gold[i] for i in order[:n]])
    for cohort in [] if args.bound_only else args.cohorts:  # every bound is printed before any RL
        entry = out[cohort]
        teacher_votes = votes[entry["teacher"]]["pool"][:n] if entry["teacher"] else None
        entry.update(
            train_and_measure(cohort, seed, args, warm, tokenizers, votes, entry, pool, data, scratch, teacher_votes)
        )
    return out, costs


def cohort_bound(
    cohort: str,
    votes: dict[str, Any],
    m_gold: list[str],
    p_gold: list[str],
    bound_gold: list[str],
    bound_pool: int,
    seed: int,
) -> dict[str, Any]:
    """A cohort's entry before RL, printed: the probe's κ/c/w and teacher, and per member its own accuracy and the
    target-label accuracy of its first ``bound_pool`` pool rows under every reward (the bound)."""
    members, reward = COHORTS[cohort]
    div = diversity({k: votes[k]["probe"] for k in members}, p_gold)
    teacher = best_on_probe(div)
    gold_b = bound_gold[:bound_pool]
    pool_votes = {k: votes[k]["pool"][:bound_pool] for k in members}
    rewards = ("ring", "majority", "self", "teacher")
    bound = {r: target_label_accuracy(pool_votes, gold_b, r, teacher) for r in rewards}
    rows = {}
    for k in members:
        rows[k] = {
            "before": accuracy(votes[k]["measure"], m_gold),
            "after": None,
            "target_label_acc": bound[reward][k],
            "own_pool_acc": accuracy(votes[k]["pool"][:bound_pool], gold_b),
            "probe_acc": div["accuracy"][k],
            "target_label_acc_by_reward": {r: bound[r][k] for r in bound},
        }
        r = rows[k]
        print(
            f"seed {seed} bound {cohort:>22} {k:>7}: own {r['before']:.3f} (pool {r['own_pool_acc']:.3f})  "
            f"target labels ({reward}) {r['target_label_acc']:.3f}  [ring {bound['ring'][k]:.3f}, majority "
            f"{bound['majority'][k]:.3f}, self {bound['self'][k]:.3f}, teacher {bound['teacher'][k]:.3f}]"
            f"  probe {r['probe_acc']:.3f}",
            flush=True,
        )
    return {
        "teacher": teacher if reward == "teacher" else None,
        "members": rows,
        "mean_gain": None,
        "gain_ci": None,
        "kappa": div["kappa"],
        "c": div["c"],
        "w": div["w"],
    }


def cohort_settings(cohort: str, teacher: str | None, args: argparse.Namespace) -> PeerRewardSettings:
    """peer_rl's settings for ``cohort``: its members and reward, the teacher the probe chose, the flags' GRPO."""
    names, reward = COHORTS[cohort]
    base = PeerRewardSettings(members={k: member_settings(k, args) for k in names}, reward=reward, estimate="sampled")
    return base.replace(
        reward=reward,
        teacher=teacher,
        grpo=base.grpo.replace(
            max_steps=args.steps,
            scenarios_per_step=args.batch,
            num_generations=args.g,
            learning_rate=args.lr,
            warmup_steps=args.warmup,
        ),
        collapse_window=args.batch * 4,
    )


def train_and_measure(
    cohort: str,
    seed: int,
    args: argparse.Namespace,
    warm: dict[str, Any],
    tokenizers: dict[str, Any],
    votes: dict[str, Any],
    entry: dict[str, Any],
    pool: tuple[list[str], list[str]],
    data: dict,
    scratch: Path,
    teacher_votes: list[Label] | None,
) -> dict[str, Any]:
    """One cohort's Co-RL from copies of the warm starts; fills ``entry``'s members' after and training figures,
    and returns the members' mean gain (the teacher's, untrained, among them) with its paired bootstrap 95%
    interval over the measured utterances, and the learners' alone.
    Over 60 lines: one cohort's training, then each member's figures and the cohort's gain, as the printout reads."""
    names, reward = COHORTS[cohort]
    rows = entry["members"]
    settings = cohort_settings(cohort, entry["teacher"], args)
    models = {k: fresh_copy(warm[k], SPECS[k][0], tokenizers[k]) for k in names}
    with quiet():  # the stage's driver: the same before/after measurement and interval as peer_rl's
        done = peer_rl_driver.train_and_measure(
            models,
            {k: tokenizers[k] for k in names},
            pool,
            data["measure"],
            data["probe"],
            settings,
            scratch / cohort,
            seed,
            teacher_votes=teacher_votes,
        )
    m_gold = data["measure"][1]
    before_ok, after_ok, predictions = [], [], {}
    teacher = settings.teacher if reward == "teacher" else None  # untrained: its weights, and votes, never changed
    for k in names:
        member, (before_votes, after_votes) = done.members[k], done.votes[k]
        rows[k].update(
            after=member["after"],
            collapsed=member["collapsed"],
            collapse_reason=member["collapse_reason"],
            pseudo_label_acc=finite(member["pseudo_label_acc"]),  # None (JSON null) for the untrained teacher
            own_vote_acc=finite(member["own_vote_acc"]),
            reward_mean=member["reward_mean"],
            entropy=member["entropy"],
            gain_ci=member["gain_ci"],
        )
        predictions[k] = {"before": before_votes, "after": after_votes}  # for --runs-json
        before_ok.append(correct(before_votes, m_gold))
        after_ok.append(correct(after_votes, m_gold))
        if teacher is not None and k != teacher:  # did it learn the teacher's function, or the pool's labels?
            on_pool = route_intents(done.models[k], tokenizers[k], pool[0])
            t_measure, n = votes[teacher]["measure"], len(pool[0])
            rows[k]["teacher_agreement"] = {
                "measure": [accuracy(before_votes, t_measure), accuracy(after_votes, t_measure)],
                "pool": [accuracy(votes[k]["pool"][:n], teacher_votes), accuracy(on_pool, teacher_votes)],
            }
            print(f"seed {seed} {cohort:>22} {k:>7}: agreement with the teacher {rows[k]['teacher_agreement']}")
        r = rows[k]
        print(
            f"seed {seed} {cohort:>22} {k:>7}: {r['before']:.3f} -> {r['after']:.3f}  collapsed {r['collapsed']}  "
            f"pseudo-label acc {member['pseudo_label_acc']:.3f}  reward {r['reward_mean']:.3f}",
            flush=True,
        )
    gain, ci = mean_gain(before_ok, after_ok, seed)
    learners = [i for i, k in enumerate(names) if k != teacher]
    learner_gain, learner_ci = mean_gain([before_ok[i] for i in learners], [after_ok[i] for i in learners], seed)
    print(
        f"seed {seed} {cohort:>22}: mean gain {gain:+.3f}  95% CI [{ci[0]:+.3f}, {ci[1]:+.3f}]; learners "
        f"{learner_gain:+.3f} [{learner_ci[0]:+.3f}, {learner_ci[1]:+.3f}]  ({done.seconds:.0f} s)"
    )
    return {
        "mean_gain": gain,
        "gain_ci": ci,
        "learners_gain": learner_gain,
        "learners_gain_ci": learner_ci,
        "train_seconds": round(done.seconds, 1),
        "routings_per_s": done.phases.as_dict()[f"cohort_{settings.estimate}"]["episodes"] / done.seconds,
        "predictions": predictions,
    }


def write_runs(args: argparse.Namespace, seeds: list[int], predictions: dict[str, Any]) -> None:
    """``--runs-json``: per seed, the measured rows' Banking77 ids (train.csv rows, 0-based) with their gold intents,
    and each cohort's members' predicted intents before and after, in that order; the texts stay in the data."""
    keep = intent_slice(args.intents)
    out = {"n_measure": args.measure, "seeds": {}}
    for seed in seeds:
        gold = split_banking77(seed, args.measure, args.probe, keep)["measure"][1]
        out["seeds"][str(seed)] = {
            "measure_ids": split_row_ids(seed, keep)[: args.measure],
            "gold": gold,
            "cohorts": predictions[str(seed)],
        }
    write_json(out, args.runs_json)


def parse_args() -> argparse.Namespace:
    """The command line, a ``--profile``'s values as its defaults (flags given on it win)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=list(PROFILES), help="the acceptance run's defaults (flags given win)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds run: first-seed .. first-seed + seeds - 1")
    ap.add_argument("--steps", type=int, default=20, help="GRPO steps per member")
    ap.add_argument("--batch", type=int, default=8, help="unlabeled utterances per step")
    ap.add_argument("--g", type=int, default=8, help="routings sampled per utterance")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=0, help="GRPO warmup steps (Adam's first steps move every weight)")
    ap.add_argument("--intents", type=int, default=10, help="Banking77 intents in the slice (77: all)")
    ap.add_argument("--per-intent", type=int, default=60, help="synthetic warm-start utterances per intent")
    ap.add_argument("--epochs", type=float, default=12, help="a tiny member's intent-phase epochs")
    ap.add_argument("--smollm-steps", type=int, default=120, help="SmolLM2's intent-phase steps (16 utterances)")
    ap.add_argument("--smollm-lr", type=float, default=1e-3, help="SmolLM2's intent-phase peak lr (LoRA + name rows)")
    ap.add_argument("--measure", type=int, default=400, help="Banking77 rows accuracy is measured on")
    ap.add_argument("--probe", type=int, default=150, help="Banking77 rows of the diversity probe")
    ap.add_argument("--bound-pool", type=int, default=600, help="pool rows the target-label accuracy is measured on")
    ap.add_argument("--cohorts", nargs="+", choices=list(COHORTS), default=list(COHORTS), help="the first: JSON's")
    ap.add_argument("--bound-only", action="store_true", help="stop after the bound table (no RL)")
    ap.add_argument("--pool", type=pool_size, help="unique pool utterances trained on, or all (default: steps x batch)")
    ap.add_argument("--warm-cache", help="a folder keeping each seed's warm starts for the next run")
    ap.add_argument("--runs-json", type=Path, help="every member's predictions before / after (row ids, no texts)")
    if "--profile" in sys.argv[1:]:  # a profile's values become the defaults; flags on the command line still win
        known, _ = ap.parse_known_args()
        if known.profile:
            ap.set_defaults(**PROFILES[known.profile])
    args = ap.parse_args()
    if args.runs_json and args.bound_only:
        ap.error("--runs-json writes predictions after RL: not with --bound-only")
    return args


def main() -> None:
    """Every seed's bound and cohorts, then the cohorts' means over the seeds and the JSON line."""
    args = parse_args()
    apply_torch_threads(1)
    start = time.perf_counter()
    runs, costs = [], []
    with tempfile.TemporaryDirectory(prefix="sparring-peer-") as tmp:
        seeds = list(range(args.first_seed, args.first_seed + args.seeds))
        for seed in seeds:
            run, cost = run_seed(seed, args, Path(tmp) / f"seed{seed}")
            runs.append(run)
            costs.append(cost)
    predictions = {
        str(seed): {c: run[c].pop("predictions", None) for c in args.cohorts}
        for seed, run in zip(seeds, runs, strict=True)
    }
    if args.runs_json:
        write_runs(args, seeds, predictions)
    cohorts = {
        c: {"reward": COHORTS[c][1], "seeds": {str(seed): run[c] for seed, run in zip(seeds, runs, strict=True)}}
        for c in args.cohorts
    }
    if not args.bound_only:
        print("\ncohort                  before  after   gain   collapsed")
        for c in args.cohorts:
            ms = [m for run in runs for m in run[c]["members"].values()]
            before, after = statistics.mean(m["before"] for m in ms), statistics.mean(m["after"] for m in ms)
            collapsed = sum(m["collapsed"] for m in ms)
            print(f"{c:<23} {before:.3f}   {after:.3f}  {after - before:+.3f}  {collapsed:>3}")
    first = args.cohorts[0]
    summary = {
        **cohorts[first],
        "cohort": first,
        "cohorts": cohorts,
        "costs": {str(seed): cost for seed, cost in zip(seeds, costs, strict=True)},
        "bound_only": args.bound_only,
        "intents": args.intents,
        "n_measure": args.measure,
        "n_bound_pool": args.bound_pool,
        "pool": args.pool,
        "steps": None if args.bound_only else args.steps,
        "wall_seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
