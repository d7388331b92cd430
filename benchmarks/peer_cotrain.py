"""The agent adapting label-free to real customers' words (issue 79): peer_rl's driver on a finished run's final
agent and peer members, arms side by side from the same checkpoints, pool and measured utterances.

ROOT is a finished run's folder (its last cycle's agent, ``models/peer_members/<member>``, ``data/ingest``). The
pool is what the main job's peer_rl reads: ``ingest.unlabeled`` of this checkout's params.yaml (by default
Banking77's train.csv, read by path, its labels withheld), without ROOT's validation and test texts; ``--seed``
deals its labelled rows into the measured ones and the probe (never trained on) and the pool
(``drivers.peer_rl.deal``, as the stage does with ``seed: S``). Arms, each from fresh copies of the checkpoints:

- ``cohort``: params.yaml's ``peer_rl`` as the main job runs it (the joint vote of every member, the agent learns
  it beside the expert's demonstrations on ROOT's train scenarios);
- ``exact``: the same labels learned by the expected agreement of the routing alone (``cotrain.loss: exact``);
- ``camo_demos``: the cohort arm, the expert's demos played against the camouflaging customer too;
- ``self``: the agent's own distribution alone labels the pool (a cohort of one, the rest of the recipe equal);
- ``others``: the peers' joint vote alone (``cotrain.views: others``);
- ``refresh``: every member learns, the labels made twice (``cotrain.rounds: 2``);
- ``teacher_<member>``: a fixed teacher, one member's greedy votes (``reward: teacher``, exact), the agent learning;
- ``gold``: the ceiling, the agent taught the pool's own labels by the same trainer (the one arm that reads them).

Per arm: each member's intent accuracy on the measured utterances before and after with the paired 95% interval,
its collapse, and its predictions before and after by row id (``--out``: ids and intents, no texts). ``--save
DIR``: the cohort (or exact) arm's adapted agent, for held-out play (``benchmarks/agent_rl_arms.py play``). Last
line JSON.

Usage: ``python benchmarks/peer_cotrain.py ROOT --seed S [--arms cohort self gold] --out FILE [--save DIR]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

REPO = Path(__file__).resolve().parents[1]
ARMS = ("cohort", "exact", "camo_demos", "self", "others", "refresh", "gold")


def cohort_settings(arm: str, base: Any) -> tuple[Any, list[str]]:
    """The arm's peer_rl settings and the members it loads (``final`` first)."""
    members = list(base.members)
    if arm == "cohort":
        return base, members
    if arm == "exact":
        return base.replace(cotrain=base.cotrain.replace(loss="exact")), members
    if arm == "camo_demos":
        customers = ["cooperative", "camouflaging"]
        return base.replace(cotrain=base.cotrain.replace(demo_customers=customers)), members
    if arm == "self":
        return base.replace(members={"final": base.members["final"]}), ["final"]
    if arm == "others":
        return base.replace(cotrain=base.cotrain.replace(views="others")), members
    if arm == "refresh":
        return base.replace(cotrain=base.cotrain.replace(rounds=2, learners=None)), members
    if arm.startswith("teacher_") and arm[len("teacher_") :] in base.members:
        teacher = arm[len("teacher_") :]
        return base.replace(reward="teacher", teacher=teacher), ["final", teacher]
    raise SystemExit(f"unknown arm {arm!r}: one of {ARMS} or teacher_<member> of {members}")


def load_members(root: Path, names: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The final agent (the last cycle's, as peer_rl loads it) and the named peer members, as saved."""
    from sparring.lm.checkpoints import load_checkpoint
    from sparring.train.cycle_state import CycleState

    last = max((root / "models" / "cycles").glob("cycle_*"), key=lambda d: int(d.name.split("_")[1]))
    folders = {k: root / "models" / "peer_members" / k for k in names}
    folders["final"] = root / CycleState.load(last).agent_dir
    models, tokenizers = {}, {}
    for name in names:
        models[name], tokenizers[name] = load_checkpoint(folders[name])
    return models, tokenizers


def gold_arm(model: Any, tokenizer: Any, pool: tuple, measure: tuple, cfg: Any, out: Path, seed: int) -> dict:
    """The ceiling: the agent taught the pool's own labels, every utterance, by the cohort's trainer."""
    from sparring.evaluate.episodes import paired_bootstrap
    from sparring.lm.chat import known_intents
    from sparring.train.peer_expectation import train_expected
    from sparring.train.peer_reward import accuracy, route_intents

    before = route_intents(model, tokenizer, list(measure[0]))
    result = train_expected(model, tokenizer, list(pool[0]), sorted(known_intents()), "teacher", cfg.exact, out,
                            teacher_votes=list(pool[1]), seed=seed)  # fmt: skip
    after = route_intents(result.model, tokenizer, list(measure[0]))
    right = [[float(v == g) for v, g in zip(votes, measure[1], strict=True)] for votes in (before, after)]
    member = {"before": accuracy(before, measure[1]), "after": accuracy(after, measure[1])}
    member["gain_ci"] = list(paired_bootstrap(right[0], right[1], seed=seed))
    return {"members": {"final": member}, "votes": {"final": [before, after]}}


def run_arm(arm: str, args: argparse.Namespace, p: Any, parts: dict, ids: list[str]) -> dict[str, Any]:
    from sparring.catalog import Catalog
    from sparring.drivers.peer_rl import cohort_demos, train_and_measure
    from sparring.lm.checkpoints import save_checkpoint
    from sparring.timing import Phases

    start = time.perf_counter()
    if arm == "gold":
        models, tokenizers = load_members(args.root, ["final"])
        doc = gold_arm(models["final"], tokenizers["final"], parts["pool"], parts["measure"], p.peer_rl,
                       args.scratch / arm, args.seed)  # fmt: skip
    else:
        cfg, names = cohort_settings(arm, p.peer_rl)
        models, tokenizers = load_members(args.root, names)
        phases = Phases()
        demos = cohort_demos(Catalog(args.root).scenarios("train"), cfg, models["final"], p.agent_sft.object_refs,
                             args.seed, phases)  # fmt: skip
        say = lambda m: print(m, file=sys.stderr)  # noqa: E731
        ran = train_and_measure(models, tokenizers, parts["pool"], parts["measure"], parts["probe"], cfg,
                                args.scratch / arm, args.seed, say=say, demos=demos)  # fmt: skip
        members = {k: {f: v for f, v in m.items() if f != "steps"} for k, m in ran.members.items()}
        doc = {"members": members, "votes": {k: list(v) for k, v in ran.votes.items()}}
        if arm in ("cohort", "exact", "camo_demos") and args.save:
            save_checkpoint(ran.models["final"], tokenizers["final"], args.save)
    doc["seconds"] = round(time.perf_counter() - start, 1)
    doc["ids"] = ids
    return doc


def main(argv: list[str] | None = None) -> int:
    from sparring.catalog import Catalog
    from sparring.data.ingest import load_unlabeled
    from sparring.drivers.peer_rl import deal
    from sparring.params import load_params
    from sparring.runtime import apply_torch_threads

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="a finished run's folder")
    ap.add_argument("--seed", type=int, default=0, help="the split's seed (the stage's `seed`)")
    ap.add_argument("--arms", nargs="+", default=["cohort"])
    ap.add_argument("--out", type=Path, required=True, help="per-arm results and predictions (JSON)")
    ap.add_argument("--save", type=Path, default=None, help="the cohort (or exact) arm's adapted agent")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/peer_cotrain"))
    ap.add_argument("--keep", type=float, default=None, help="peer_rl.cotrain.keep for every arm (default: params')")
    ap.add_argument("--lr", type=float, default=None, help="peer_rl.cotrain.sft.learning_rate (default: params')")
    args = ap.parse_args(argv)
    apply_torch_threads(1)
    p = load_params(REPO / "params.yaml", "default")
    cotrain = p.peer_rl.cotrain
    if args.keep is not None:
        cotrain = cotrain.replace(keep=args.keep)
    if args.lr is not None:
        cotrain = cotrain.replace(sft=cotrain.sft.replace(learning_rate=args.lr))
    p = p.model_copy(update={"peer_rl": p.peer_rl.replace(cotrain=cotrain)})
    data = Catalog(args.root.resolve())
    validation, test = data.utterances("validation"), data.utterances("test")
    frame = load_unlabeled(p.ingest, args.seed, REPO, pl.concat([validation, test])["text"])
    measured, pool, measure, probe = deal(frame, validation, test, p.peer_rl, args.seed)  # as the stage deals it
    parts = {"measure": measure, "probe": probe, "pool": pool}
    ids = measured["id"].to_list()
    doc: dict[str, Any] = {"root": str(args.root), "seed": args.seed, "n_pool": len(pool[0]), "gold": measure[1]}
    doc["arms"] = {}
    for arm in args.arms:
        doc["arms"][arm] = run_arm(arm, args, p, parts, ids)
        figures = {k: (m["before"], m["after"], m["gain_ci"]) for k, m in doc["arms"][arm]["members"].items()}
        print(f"{arm}: {figures} ({doc['arms'][arm]['seconds']} s)", flush=True)
        args.out.write_text(json.dumps(doc) + "\n")
    summary = {
        arm: {k: round(m["after"] - m["before"], 4) for k, m in d["members"].items()} for arm, d in doc["arms"].items()
    }
    print(json.dumps({"seed": args.seed, "n_measure": len(ids), "n_pool": doc["n_pool"], "gains": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
