"""Co-evolution's cycle shapes side by side from one warm start, judged against adversaries each agent never met
(issue 76).

Every RL seed shares one warm start (ingest, scenario sets, judge, tokenizer, DA0, the simulator: a folder where
those stages finished, WARM): the variance of SFT and of the scenario draws is left out. Per seed, agent_rl makes
DA1 once (``da1``); every arm's cycles then start from that DA1 (``cycles``), so arms of one seed differ by their
cycle shape alone. An arm is the project's params.yaml with :data:`ARMS`' overrides of ``coevolution``.

**Cross-play** (``crossplay``): each seed's agents (DA0, its DA1, every arm's final agent) play, greedy, the same
held-out scenarios and customer draws against

- ``_ref`` (adversary generation 0, the SFT simulator sampled) and ``_coop`` (the cooperative simulator, greedy),
- ``_foreign``: the adversary generations trained in the *other* seeds' cycles (every arm's), scenario i dealt to
  generation i mod G as the pool deals them. An adversary trained in seed s's cycles trained against seed s's
  agents (DA1_s and what followed it, in any arm: all of them start from DA1_s), so seed s's agents never meet
  them: :func:`foreign_pool` is the one place that rule is kept.

Read per arm: final − DA1 against ``_foreign``, ``_ref`` and ``_coop`` on every seed (paired over scenarios and
draws) and the nested bootstrap over seeds, scenarios and draws; each cycle's W_DA (the arena), the adversary's arena
success and faithfulness, and whether W_DA dipped after an adversary gym and recovered after the next agent gym.

Usage::

    python benchmarks/coevolution_arms.py da1 WARM --seed 0 --out DIR              # DIR/da1_s0
    python benchmarks/coevolution_arms.py cycles DIR/da1_s0 --arm league_st --out DIR   # DIR/league_st_s0
    python benchmarks/coevolution_arms.py crossplay --run DIR/grpo_s0 --run DIR/league_st_s0 --run DIR/grpo_s1 \\
        --run DIR/league_st_s1 --scenarios 240 --draws 2 --out FILE

Every (scenario, draw) outcome goes to FILE (ids and 0/1, no texts). Last line of each command: JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.coevolution_acceptance import RUN_STAGE, WARM_FOLDERS, WARM_STAGES, missing_warm_start, n_cycles
from benchmarks.run_folders import copy_command, copy_stage_outputs, prepare_copy
from sparring.catalog import cycle_dir
from sparring.evaluate.intervals import nested_bootstrap, paired_difference
from sparring.train.cycle_state import dips_and_recovers
from sparring.train.cycles import load_metrics
from stagekit.project import copy_project

REPO = Path(__file__).resolve().parents[1]
LEAGUE = {"adversary": 0.4, "pool": 0.2, "ref": 0.2, "coop": 0.2}
ARMS: dict[str, dict[str, Any]] = {
    "grpo": {},  # today's cycles: 20 GRPO steps a gym against {current .5, earlier .25, coop .25}
    "league_st": {"agent_recipe": "self_training", "agent_mix": LEAGUE},  # agent_rl's recipe against a league
}
OPPONENTS = ("ref", "coop", "advpool")  # advpool here: generation 0 (ref's episodes) then the foreign generations


def _run_stages(root: Path, stages: list[str]) -> None:
    _, env = copy_command(root)
    with open(root / "run.log", "a", encoding="utf-8") as log:
        for name in stages:
            began = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", RUN_STAGE, name], cwd=root, env=env, stdout=log, stderr=log)
            if done.returncode != 0:
                sys.exit(f"error: stage {name} failed in {root} (exit {done.returncode}); see {root / 'run.log'}")
            print(f"{root.name}: {name} in {time.perf_counter() - began:.0f} s", flush=True)


def da1(args: argparse.Namespace) -> dict[str, Any]:
    """DA1 for RL seed ``--seed`` on WARM's warm start, in OUT/da1_sSEED (a project copy running agent_rl)."""
    warm, root = args.warm.resolve(), args.out.resolve() / f"da1_s{args.seed}"
    if missing := missing_warm_start(warm):
        sys.exit(f"error: {missing}")
    prepare_copy(REPO, root, args.seed, args.profile)
    copy_stage_outputs(warm, root, WARM_FOLDERS, WARM_STAGES)
    began = time.perf_counter()
    _run_stages(root, ["agent_rl"])
    return {"da1": str(root), "seed": args.seed, "seconds": round(time.perf_counter() - began, 1)}


def cycles(args: argparse.Namespace) -> dict[str, Any]:
    """Every cycle of arm ``--arm`` from DA1RUN's DA1 (its seed), in OUT/ARM_sSEED."""
    import yaml

    src = args.da1.resolve()
    prepared = yaml.safe_load((src / "params.yaml").read_text())
    seed = int(prepared["seed"])
    if args.arm not in ARMS:
        sys.exit(f"error: unknown arm {args.arm!r}; known: {', '.join(ARMS)}")
    if not (src / "models" / "agent_rl" / "config.json").is_file():
        sys.exit(f"error: {src}: no models/agent_rl (run `da1` first)")
    root = args.out.resolve() / f"{args.arm}_s{seed}"

    def edit(raw: dict[str, Any]) -> None:
        raw.update(seed=seed, profile=prepared["profile"], ingest=prepared["ingest"])
        raw["coevolution"].update(ARMS[args.arm])

    copy_project(REPO, root, edit)
    copy_stage_outputs(src, root, (*WARM_FOLDERS, "models/agent_rl"), (*WARM_STAGES, "agent_rl"))
    began = time.perf_counter()
    _run_stages(root, [f"cycle_{k}" for k in range(1, n_cycles(root) + 1)])
    return {"run": str(root), "arm": args.arm, "seed": seed, "seconds": round(time.perf_counter() - began, 1),
            "cycles": cycle_trajectory(root)}  # fmt: skip


def cycle_trajectory(root: Path) -> list[dict[str, Any]]:
    """Each cycle that ran: its arena (W_DA, the adversary's success and faithfulness), its side and its seconds."""
    out = []
    for k in range(1, n_cycles(root) + 1):
        m = load_metrics(root / cycle_dir(k))
        if m.get("stopped"):
            break
        out.append({key: m.get(key) for key in ("cycle", "trained", "w_da", "arena_adv_success",
                    "arena_adv_faithfulness", "train_side_seconds", "stop_reason")})  # fmt: skip
    return out


# Cross-play --------------------------------------------------------------------------------------------------------


def _run_info(root: Path) -> dict[str, Any]:
    """A finished cycles run: its RL seed, its final agent and its trained adversary generations (the last cycle
    stage's state: a cycle after the stop rule copies the state forward)."""
    import yaml

    from sparring.train.cycle_state import CycleState

    last = root / cycle_dir(n_cycles(root))
    if not (last / "state.json").is_file():
        sys.exit(f"error: {root}: its cycles have not all run ({last} holds no state.json)")
    state = CycleState.load(last)
    seed = int(yaml.safe_load((root / "params.yaml").read_text())["seed"])
    absolute = [str((root / d).resolve()) for d in state.adversary_dirs]
    return {"root": root, "seed": seed, "final": (root / state.agent_dir).resolve(), "adversaries": absolute}


def foreign_pool(runs: dict[str, dict[str, Any]], seed: int) -> list[str]:
    """Every adversary generation trained in a run of another RL seed: the ones no agent of ``seed`` trained
    against (every run of one seed starts its cycles from that seed's DA1)."""
    return [d for run in runs.values() if run["seed"] != seed for d in run["adversaries"]]


def crossplay(args: argparse.Namespace) -> dict[str, Any]:
    """Per seed: DA0, DA1 and every arm's final agent against ``_ref``, ``_coop`` and the foreign pool."""
    import torch

    from sparring.catalog import AGENT_RL, AGENT_SFT, SIMULATORS, load_judge
    from sparring.evaluate.episodes import compact_episodes
    from sparring.evaluate.parallel import evaluate_heldout_parallel
    from sparring.params import load_params
    from sparring.world.scenarios import load_scenarios

    torch.set_num_threads(1)
    runs = {Path(r).name: _run_info(Path(r).resolve()) for r in args.run}
    first = next(iter(runs.values()))["root"]
    p = load_params(first / "params.yaml")
    scenarios = load_scenarios(first / "data" / "scenarios" / "heldout.jsonl")[: args.scenarios]
    judge = partial(load_judge, first / "models" / "judge", p.judge, p.coevolution.agent_grpo.max_turns)
    out: dict[str, Any] = {
        "what": "cross-play: agents of each seed vs _ref, _coop and adversaries of other seeds",
        "scenario_order": [s.scenario_id for s in scenarios],
        "draws": list(range(args.draws)),
        "seeds": {},
        "cycles": {n: cycle_trajectory(r["root"]) for n, r in runs.items()},
    }
    began = time.perf_counter()
    for seed in sorted({r["seed"] for r in runs.values()}):
        mine = {n: r for n, r in runs.items() if r["seed"] == seed}
        pool = foreign_pool(runs, seed)
        if not pool:
            sys.exit(f"error: seed {seed}: no run of another seed trained an adversary (cross-play needs two seeds)")
        root = next(iter(mine.values()))["root"]
        agents = {"da0": root / AGENT_SFT, "da1": root / AGENT_RL, **{n: r["final"] for n, r in mine.items()}}
        played = evaluate_heldout_parallel(
            agents, root / SIMULATORS[p.coevolution.simulator], pool, scenarios, judge, p.coevolution,
            workers=args.workers, torch_threads=1, seed=p.seed, draws=range(args.draws), opponents=OPPONENTS,
        )  # fmt: skip
        out["seeds"][str(seed)] = {
            "agents": {a: str(f) for a, f in agents.items()},
            "foreign_pool": pool,
            "episodes": compact_episodes(played.episodes),
            "figures": {
                a: {k: v for k, v in m.items() if k.startswith(("strict_pass_", "failure_"))}
                for a, m in played.agents.items()
            },  # fmt: skip
        }
    out["seconds"] = round(time.perf_counter() - began, 1)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return analyze_doc(out)


# Analysis ----------------------------------------------------------------------------------------------------------

COMPARED = ("foreign", "ref", "coop")


def _matrix(seed_doc: dict[str, Any], order: list[str], agent: str, opponent: str) -> np.ndarray:
    """(scenario × draw) strict PASS; ``foreign``: the pool's episodes of trained generations only (scenario i met
    generation i mod G, generation 0 being ``_ref``)."""
    from sparring.evaluate.episodes import episode_outcomes, outcome_matrix

    outcomes = episode_outcomes(seed_doc["episodes"], agent, "advpool" if opponent == "foreign" else opponent)
    scenarios = order
    if opponent == "foreign":
        g = 1 + len(seed_doc["foreign_pool"])
        scenarios = [sid for i, sid in enumerate(order) if i % g]
    draws = sorted({d for _, d in outcomes})
    return outcome_matrix(outcomes, scenarios, draws)


def analyze_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """Per arm: every seed's final − DA1 (and DA1 − DA0) against each compared opponent, the nested bootstrap over
    seeds, and each seed's cycles read for the dip-and-recover."""
    order, arms, diffs = doc["scenario_order"], {}, {}  # diffs: arm -> opponent -> each seed's final - DA1

    def arm_of(run: str) -> str:
        return run.rsplit("_s", 1)[0]

    for seed, sd in sorted(doc["seeds"].items()):
        for run in (a for a in sd["agents"] if a not in ("da0", "da1")):
            row: dict[str, Any] = {"seed": int(seed), "run": run}
            for o in COMPARED:
                da0, da1, final = (_matrix(sd, order, a, o) for a in ("da0", "da1", run))
                row[o] = {"final-da1": paired_difference(da1, final), "da1-da0": paired_difference(da0, da1),
                          "final": float(final.mean()), "da1": float(da1.mean()), "da0": float(da0.mean())}  # fmt: skip
                diffs.setdefault(arm_of(run), {}).setdefault(o, []).append(final - da1)
            cycles = doc["cycles"].get(run, [])
            row["w_da"] = [c["w_da"] for c in cycles]
            row["trained"] = [c["trained"] for c in cycles]
            row["dip_and_recover"] = dips_and_recovers(row["trained"], row["w_da"])
            first_adv = next((i for i, c in enumerate(cycles) if c["trained"] == "adversary"), None)
            if first_adv is not None and first_adv + 1 < len(cycles):  # its success against the agent it trained on
                row["adv_success"] = [cycles[first_adv]["arena_adv_success"], cycles[-1]["arena_adv_success"]]
                row["adv_faithfulness"] = [c["arena_adv_faithfulness"] for c in cycles]
            arms.setdefault(arm_of(run), []).append(row)
    out: dict[str, Any] = {"n": len(order), "arms": {}}
    for arm, rows in arms.items():
        summary: dict[str, Any] = {"seeds": [r["seed"] for r in rows]}
        for o in COMPARED:
            summary[o] = {"per_seed": [r[o] for r in rows]}
            if len(rows) > 1:
                summary[o]["nested_final-da1"] = nested_bootstrap(diffs[arm][o])
        summary["cycles"] = [{k: r.get(k) for k in ("seed", "trained", "w_da", "dip_and_recover", "adv_success",
                                                     "adv_faithfulness")} for r in rows]  # fmt: skip
        out["arms"][arm] = summary
    return out


def report(result: dict[str, Any]) -> None:
    print(f"n = {result['n']} held-out scenarios; final - DA1 per seed [95% interval over scenarios and draws]")
    for arm, s in result["arms"].items():
        print(f"\n{arm} (seeds {s['seeds']})")
        for o in COMPARED:
            cells = "  ".join(f"s{seed} {r['final-da1'][0]:+.3f} [{r['final-da1'][1]:+.3f}, {r['final-da1'][2]:+.3f}]"
                              for seed, r in zip(s["seeds"], s[o]["per_seed"], strict=True))  # fmt: skip
            nested = s[o].get("nested_final-da1")
            tail = f"  nested {nested['mean']:+.3f} [{nested['low']:+.3f}, {nested['high']:+.3f}]" if nested else ""
            print(f"  vs _{o:8s} {cells}{tail}")
        for c in s["cycles"]:
            w = " ".join(f"{x:.3f}" for x in c["w_da"])
            print(f"  seed {c['seed']}: {'/'.join(c['trained'])}  W_DA {w}  dip-and-recover {c['dip_and_recover']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("da1", help="DA1 for one RL seed on a warm start")
    p.add_argument("warm", type=Path)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--profile", default="default")
    p = sub.add_parser("cycles", help="one arm's cycles from a DA1 run")
    p.add_argument("da1", type=Path)
    p.add_argument("--arm", required=True, choices=sorted(ARMS))
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("crossplay", help="every seed's agents against other seeds' adversaries, _ref and _coop")
    p.add_argument("--run", action="append", required=True, help="a cycles run folder (ARM_sSEED)")
    p.add_argument("--scenarios", type=int, default=240)
    p.add_argument("--draws", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("analyze", help="a crossplay FILE read again")
    p.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    if args.command == "analyze":
        result = analyze_doc(json.loads(args.file.read_text()))
    else:
        result = {"da1": da1, "cycles": cycles, "crossplay": crossplay}[args.command](args)
    if "arms" in result:
        report(result)
    print(json.dumps(result, default=lambda x: x.tolist() if hasattr(x, "tolist") else str(x)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
