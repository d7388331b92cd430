"""agent_rl's recipes side by side from one warm start, under the yardstick (issue 75, item 4).

Every arm starts from the same DA0, simulator, judge and scenario sets (a finished run's folder, ROOT), so what an
arm's seeds share is the warm start: the variance left out is DA0's own (one agent_sft seed). An arm is the
project's params.yaml (its ``agent_rl``, ``coevolution`` and ``judge.reward``: the recipe as the main job runs it)
set back to :data:`BEFORE` (the recipe before issue 75), then the overrides :data:`ARMS` gives, trained by
the stage's driver (``sparring.drivers.agent_rl.run``) with the RL seed S
(what ``seed: S`` in params.yaml gives the stage). Held-out play pits DA0 and every arm's DA1 against the reference
opponent (``_ref``: adversary generation 0, the SFT simulator sampled, which no arm trained against), the scripted
camouflaging customer (``_camo``) and the cooperative simulator (``_coop``), K draws each (one for the greedy
``_coop``), every agent meeting the same draws (common random numbers); and their routing of real Banking77
utterances (``../shared/data/banking77/train.csv``, read by path: no stage of the default run trains on it).

Read per arm: each seed's DA1 − DA0 with its interval over scenarios and draws, the nested bootstrap over seeds
(mean, interval, IQM, probability of improvement), each failure kind's share, the wrong-act share (misroute,
refused, undescribed object), the Banking77 routing change, and the issue's acceptance lines.

Usage::

    python benchmarks/agent_rl_arms.py train ROOT --arm v2_grpo --seed 0 --out DIR      # DA1 in DIR/v2_grpo_s0
    python benchmarks/agent_rl_arms.py play ROOT --agent da0=models/agent_sft --agent v2_grpo_s0=DIR/v2_grpo_s0 \\
        --draws 2 --scenarios 240 --out FILE
    python benchmarks/agent_rl_arms.py analyze FILE [FILE ...] [--baseline da0]

Labels are ``ARM_sSEED`` (the baseline: ``da0``). Every (scenario, draw) outcome is in FILE (ids and 0/1, no
texts). Last line of each command: JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.credit_arms import nested_line
from benchmarks.yardstick import agent_folders
from sparring.evaluate.episodes import compact_episodes, episode_outcomes, outcome_matrix
from sparring.evaluate.intervals import nested_bootstrap, paired_difference
from sparring.judge.rewards import REWARD_V2

REPO = Path(__file__).resolve().parents[1]
BANKING77 = REPO.parent / "shared" / "data" / "banking77" / "train.csv"
OPPONENTS = ("ref", "camo", "coop")
WRONG_ACTS = ("misroute", "refused", "undescribed")  # an act the goal contradicts, tried or done
V2 = {f"judge.reward.{k}": v for k, v in REWARD_V2.items()}
# The recipe before issue 75 (GRPO on reward v1, no self-training): every arm is it plus its own overrides, so an arm
# keeps meaning what it measured whatever the defaults become.
BEFORE = {
    "agent_rl.self_training.rounds": 0,
    "agent_rl.self_training.samples": 4,
    "agent_rl.self_training.corrections": False,
    "agent_rl.self_training.intent_rehearsal": 0,
    "agent_rl.max_steps": 100,
}
DAGGER = {"agent_rl.self_training.rounds": 1, "agent_rl.self_training.corrections": True}
WIDE = {**DAGGER, "agent_rl.self_training.rounds": 2, "agent_rl.self_training.samples": 2, "agent_rl.max_steps": 0}
WIDE_R = {**WIDE, "agent_rl.self_training.intent_rehearsal": 2000}
ARMS: dict[str, dict[str, Any]] = {
    "v1_grpo": {},  # the recipe before issue 75: GRPO on reward v1
    "v2_grpo": V2,  # GRPO on reward v2 (ranks failures)
    "v1_gate": {"judge.reward.gate_partial_credit": True},  # v1, a wrong act's partial credit taken away
    "v1_gate_wa1": {"judge.reward.gate_partial_credit": True, "judge.reward.wrong_act": 1.0},  # ... and priced at -1
    "st": {"agent_rl.self_training.rounds": 1, "agent_rl.max_steps": 0},  # self-training alone
    "st2": {"agent_rl.self_training.rounds": 2, "agent_rl.max_steps": 0},
    "st_v2_grpo": {"agent_rl.self_training.rounds": 1, **V2},  # self-training, then GRPO on reward v2
    "dagger": {**DAGGER, "agent_rl.max_steps": 0},  # self-training with the expert's corrections, alone
    "dagger2": {**DAGGER, "agent_rl.self_training.rounds": 2, "agent_rl.max_steps": 0},
    "dagger2_mix": {
        **DAGGER,
        "agent_rl.self_training.rounds": 2,
        "agent_rl.self_training.mix_demos": 300,
        "agent_rl.max_steps": 0,
    },  # ... with DA0's kind of demonstrations kept in the mix
    "dagger2_wide": WIDE,  # for a larger gym (train --gym, from the gym command): 2 draws each
    "dagger2_wide_r": WIDE_R,  # ... agent_sft's intent exchanges replayed each round
    "dagger2_wide_rx": WIDE_R,  # the same, trained once the expert answers a mistaken call with its own (agent_rl's
    # default since issue 75; dagger2_wide_r's runs predate that expert)
    "dagger_grpo": DAGGER,  # ... then GRPO on reward v1
    "dagger2_grpo": {**DAGGER, "agent_rl.self_training.rounds": 2},
    "dagger_v2_grpo": {**DAGGER, **V2},  # ... then GRPO on reward v2
}


def arm_params(arm: str, extra: list[str], profile: str) -> Any:
    """The project's params with ``arm``'s overrides and ``extra`` (``dotted.key=value``, YAML values)."""
    import yaml

    from sparring.params import Params, load_params

    if arm not in ARMS:
        sys.exit(f"error: unknown arm {arm!r}; known: {', '.join(ARMS)}")
    raw = load_params(REPO / "params.yaml", profile).model_dump()
    for key, value in [*BEFORE.items(), *ARMS[arm].items(), *(kv.split("=", 1) for kv in extra)]:
        *path, last = key.split(".")
        node = raw
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or last not in node:
            sys.exit(f"error: override {key}: no such setting in params.yaml")
        node[last] = yaml.safe_load(value) if isinstance(value, str) else value
    return Params.model_validate(raw)


def train(args: argparse.Namespace) -> dict[str, Any]:
    """One arm's DA1 for one RL seed from ROOT's warm start, in ``OUT/ARM_sSEED``."""
    import torch

    from sparring.catalog import AGENT_SFT, SIMULATORS, Catalog
    from sparring.drivers.agent_rl import Inputs, run
    from sparring.world.scenarios import load_scenarios

    torch.set_num_threads(1)
    root, p = args.root.resolve(), arm_params(args.arm, args.set, args.profile)
    label = f"{args.arm}_s{args.seed}"
    out = args.out.resolve() / label
    data = Catalog(root)
    sets = {n: data.scenarios(n) for n in ("gym", "train", "validation", "heldout")}
    if args.gym is not None:  # a larger unplayed gym, made as the scenarios stage makes its own (n_gym)
        sets["gym"] = load_scenarios(args.gym)
    inputs = Inputs(
        da0=root / AGENT_SFT, simulator=root / SIMULATORS[p.coevolution.simulator], **sets,
        utterances=data.utterances("train"), coevolution=p.coevolution, reward=p.judge.reward, agent_sft=p.agent_sft,
        scratch=args.out.resolve() / f"scratch_{label}",
    )  # fmt: skip
    done = run(inputs, p.agent_rl, out, args.seed)
    doc = {
        "arm": args.arm,
        "seed": args.seed,
        "overrides": {**BEFORE, **ARMS[args.arm], **dict(kv.split("=", 1) for kv in args.set)},
        "gym": str(args.gym) if args.gym else "ROOT's gym.jsonl",
        "seconds": done.metrics["train_seconds"],
        "self_training": done.report["self_training"],
        "curve": done.report["curve"],
        "signals": [{k: s[k] for k in s if not isinstance(s[k], list)} for s in done.report["signals"]],
        "metrics": done.metrics,
    }
    (out / "arm.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def make_gym(args: argparse.Namespace) -> dict[str, Any]:
    """ROOT's unplayed gym drawn larger (``--n`` scenarios), as the scenarios stage draws it: its first
    ``scenarios.n_gym`` are ROOT's gym.jsonl; no held-out, validation or arena scenario (checked)."""
    import polars as pl

    from sparring.agents.leaving import gives_up
    from sparring.params import load_params
    from sparring.world.scenarios import check_disjoint, gym_seed, load_scenarios, save_scenarios, unplayed_scenarios

    root = args.root.resolve()
    p, sets = load_params(root / "params.yaml"), root / "data" / "scenarios"
    utterances = pl.read_parquet(root / "data" / "ingest" / "train.parquet")
    gym = unplayed_scenarios(
        utterances, load_scenarios(sets / "train.jsonl"), args.n, gym_seed(p.seed), dict(p.scenarios.personas),
        n_customers=p.scenarios.n_customers, skip=gives_up,
    )  # fmt: skip
    for name in ("heldout", "validation", "arena"):
        check_disjoint(gym, load_scenarios(sets / f"{name}.jsonl"))
    save_scenarios(gym, args.out)
    return {"gym": len(gym), "out": str(args.out)}


def banking77_routing(folders: dict[str, Path], n: int, seed: int) -> dict[str, Any]:
    """Each agent's greedy routing of ``n`` labelled Banking77 rows (a seeded sample): accuracy and per-row hits."""
    from sparring.data.sources import read_text_csv
    from sparring.lm.chat import known_intents
    from sparring.lm.checkpoints import load_checkpoint
    from sparring.train.peer_reward import route_intents

    frame = read_text_csv(BANKING77)
    rows = [r for r in zip(frame["text"].to_list(), frame["category"].to_list(), strict=True)
            if r[1] in known_intents()]  # fmt: skip
    rows = random.Random(seed).sample(rows, min(n, len(rows)))
    texts, gold = [t for t, _ in rows], [c for _, c in rows]
    out: dict[str, Any] = {"n": len(rows)}
    for label, folder in folders.items():
        model, tok = load_checkpoint(folder)
        hits = [int(p == g) for p, g in zip(route_intents(model.eval(), tok, texts), gold, strict=True)]
        out[label] = {"accuracy": sum(hits) / len(hits), "hits": "".join(map(str, hits))}
    return out


def play(args: argparse.Namespace) -> dict[str, Any]:
    """DA0 and the arms' DA1s against ``_ref``, ``_camo`` and ``_coop`` on ROOT's held-out scenarios, and their
    Banking77 routing."""
    import torch

    from sparring.catalog import SIMULATORS, load_judge
    from sparring.evaluate.parallel import evaluate_heldout_parallel
    from sparring.params import load_params
    from sparring.world.scenarios import load_scenarios

    torch.set_num_threads(1)
    root, p = args.root.resolve(), load_params(REPO / "params.yaml", args.profile)
    agents = agent_folders(root, args.agent)
    scenarios = load_scenarios(root / "data" / "scenarios" / "heldout.jsonl")[: args.scenarios]
    judge = partial(load_judge, root / "models" / "judge", p.judge, p.coevolution.agent_grpo.max_turns)
    start = time.perf_counter()
    played = evaluate_heldout_parallel(
        agents, root / SIMULATORS[p.coevolution.simulator], [], scenarios, judge, p.coevolution,
        workers=args.workers, torch_threads=1, seed=p.seed, draws=range(args.draws), opponents=OPPONENTS,
    )  # fmt: skip
    figures = {a: {k: v for k, v in m.items() if k.startswith(("strict_pass_", "failure_", "routing_acc_"))}
               for a, m in played.agents.items()}  # fmt: skip
    return {
        "what": "per-(scenario, draw) strict PASS of DA0 and agent_rl arms vs _ref, _camo, _coop; Banking77 routing",
        "root": str(root),
        "agents": {a: str(f) for a, f in agents.items()},
        "scenario_order": [s.scenario_id for s in scenarios],
        "draws": list(range(args.draws)),
        "seconds": time.perf_counter() - start,
        "figures": figures,
        "banking77": banking77_routing(agents, args.banking77, p.seed) if args.banking77 else {},
        "episodes": compact_episodes(played.episodes),
    }


def _gain(docs: dict[str, dict], baseline: str, agent: str, opponent: str, order: list[str]) -> np.ndarray:
    """The agent's (scenario × draw) strict PASS minus the baseline's, on the draws both played."""
    b, a = (episode_outcomes(docs[x]["episodes"], x, opponent) for x in (baseline, agent))
    draws = sorted({d for _, d in a} & {d for _, d in b})
    return outcome_matrix(a, order, draws) - outcome_matrix(b, order, draws)


def wrong_share(figures: dict[str, float]) -> float:
    """Share of episodes (every opponent alike) that ended in an act the goal contradicts."""
    return float(np.mean([sum(figures.get(f"failure_{k}_{o}", 0.0) for k in WRONG_ACTS) for o in OPPONENTS]))


def analyze(files: list[Path], baseline: str) -> dict[str, Any]:
    return analyze_docs([json.loads(f.read_text(encoding="utf-8")) for f in files], baseline)


def analyze_docs(played: list[dict[str, Any]], baseline: str) -> dict[str, Any]:
    """Per arm: each seed's DA1 − ``baseline`` and the nested bootstrap over seeds, failure shares and routing."""
    docs: dict[str, dict] = {}  # agent label -> the file that played it
    for doc in played:
        for agent in doc["figures"]:
            docs.setdefault(agent, doc)
    if baseline not in docs:
        sys.exit(f"error: no agent {baseline!r} in the files (agents: {sorted(docs)})")
    order = docs[baseline]["scenario_order"]
    if any(d["scenario_order"] != order for d in docs.values()):
        sys.exit("error: the files played other scenarios; analyze files of one ROOT and one n together")
    base = docs[baseline]["figures"][baseline]
    b77 = docs[baseline]["banking77"].get(baseline, {}).get("accuracy")
    arms: dict[str, Any] = {}
    for agent in sorted(a for a in docs if a != baseline):
        arm, seed = re.fullmatch(r"(.+)_s(\d+)", agent).groups() if re.fullmatch(r".+_s\d+", agent) else (agent, "0")
        fig = docs[agent]["figures"][agent]
        row: dict[str, Any] = {"seed": int(seed)}
        for o in OPPONENTS:
            d = _gain(docs, baseline, agent, o, order)
            row[o] = paired_difference(np.zeros_like(d), d)
            row[f"diff_{o}"] = d
        row["wrong_act"] = wrong_share(fig) - wrong_share(base)
        row["failures"] = {
            k: fig[k] - base.get(k, 0.0) for k in fig if k.startswith("failure_") and fig[k] != base.get(k)
        }
        mine = docs[agent]["banking77"].get(agent, {}).get("accuracy")
        row["banking77"] = None if mine is None or b77 is None else mine - b77
        arms.setdefault(arm, []).append(row)
    out: dict[str, Any] = {"n": len(order), "baseline": baseline, "arms": {}}
    for arm, rows in arms.items():
        rows.sort(key=lambda r: r["seed"])
        summary: dict[str, Any] = {"seeds": [r["seed"] for r in rows]}
        for o in OPPONENTS:
            nested = nested_bootstrap([r[f"diff_{o}"] for r in rows])
            summary[o] = {"seeds": summary["seeds"], "intervals": [r[o] for r in rows], **nested}
        summary["wrong_act"] = [r["wrong_act"] for r in rows]
        summary["banking77"] = [r["banking77"] for r in rows]
        summary["failures"] = [r["failures"] for r in rows]
        ref = summary["ref"]
        summary["acceptance"] = {
            "ref_mean_ge_0.08": ref["mean"] >= 0.08,
            "ref_interval_above_0": ref["low"] > 0,
            "prob_improvement_ge_0.9": ref["prob_improvement"] >= 0.9,
            "every_seed_ref_gain_gt_0": all(r["ref"][0] > 0 for r in rows),
            "camo_coop_no_seed_below_-0.02": all(r[o][0] >= -0.02 for r in rows for o in ("camo", "coop")),
            "wrong_act_at_most_da0_+0.01": all(w <= 0.01 for w in summary["wrong_act"]),
            "banking77_no_lower_than_-0.01": all(b is None or b >= -0.01 for b in summary["banking77"]),
        }
        out["arms"][arm] = summary
    return out


def report(result: dict[str, Any]) -> None:
    print(f"n = {result['n']} held-out scenarios, baseline {result['baseline']}")
    for arm, s in result["arms"].items():
        print(f"\n{arm} (seeds {s['seeds']})")
        for o in OPPONENTS:
            cells = "  ".join(f"s{seed} {m:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                              for seed, (m, lo, hi) in zip(s["seeds"], s[o]["intervals"], strict=True))  # fmt: skip
            print(f"  vs {o}: {cells}")
            print("  " + nested_line(f"nested vs {o}", s[o]))
        print("  wrong-act share − DA0's: " + ", ".join(f"{w:+.3f}" for w in s["wrong_act"]))
        print("  Banking77 routing − DA0's: " + ", ".join("n/a" if b is None else f"{b:+.3f}" for b in s["banking77"]))
        print("  acceptance: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in s["acceptance"].items()))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items() if not k.startswith("diff_")}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="one arm's DA1 for one RL seed")
    t.add_argument("root", type=Path)
    t.add_argument("--arm", required=True, help=f"one of {', '.join(ARMS)}")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--set", action="append", default=[], help="dotted.key=value on top of the arm's overrides")
    t.add_argument("--profile", default="default")
    t.add_argument("--gym", type=Path, help="the gym's scenarios from this jsonl instead of ROOT's gym.jsonl")
    t.add_argument("--out", type=Path, required=True)
    g = sub.add_parser("gym", help="ROOT's unplayed gym drawn larger")
    g.add_argument("root", type=Path)
    g.add_argument("--n", type=int, default=1000)
    g.add_argument("--out", type=Path, required=True)
    pl = sub.add_parser("play", help="DA0 and the arms' DA1s on the held-out scenarios")
    pl.add_argument("root", type=Path)
    pl.add_argument("--agent", action="append", required=True, help="LABEL=FOLDER (relative to ROOT)")
    pl.add_argument("--draws", type=int, default=2)
    pl.add_argument("--scenarios", type=int, default=240)
    pl.add_argument("--workers", type=int, default=2)
    pl.add_argument("--banking77", type=int, default=1000, help="labelled Banking77 rows routed (0: none)")
    pl.add_argument("--profile", default="default")
    pl.add_argument("--out", type=Path, required=True)
    an = sub.add_parser("analyze", help="the arms' gains, failure kinds and acceptance lines")
    an.add_argument("files", type=Path, nargs="+")
    an.add_argument("--baseline", default="da0")
    args = parser.parse_args(argv)
    if args.command == "train":
        doc = train(args)
        print(json.dumps({k: doc[k] for k in ("arm", "seed", "seconds", "self_training")}))
    elif args.command == "gym":
        print(json.dumps(make_gym(args)))
    elif args.command == "play":
        doc = play(args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc) + "\n")
        print(json.dumps({"agents": list(doc["agents"]), "seconds": doc["seconds"], "out": str(args.out)}))
    else:
        result = analyze(args.files, args.baseline)
        report(result)
        print(json.dumps(_jsonable(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
