"""The yardstick measured, then sized (issue 74): agents played on the held-out scenarios against the reference
opponent (`_ref`: adversary generation 0, the SFT simulator sampled) and the pool of every generation (`_advpool`),
K customer draws per scenario shared by every agent (common random numbers), then read three ways:

1. **A/A check**: each agent against itself under two disjoint sets of draws (the first half of the draws played
   against the second, draw j paired with draw j + K/2 on each scenario): the interval of the difference must cover
   0, and its width is the yardstick's noise at K/2 draws.
2. **Minimum detectable effect** at 80% power (two-sided 5%) of each RL agent − DA0, from the between- and
   within-scenario variance of their paired differences (:func:`sparring.evaluate.intervals.mde_table`), for
   K = 1, 2, 4, 8 and n = 240, 480 and 600 (from the measured components).
3. **Gains**: each RL agent − DA0 against the reference opponent, the pool and each generation's share of it, with
   the interval over scenarios and draws; across the RL agents, the nested bootstrap (seed → scenario → draw)
   mean, interval, interquartile mean and probability of improvement beside every seed's own figure.

Usage: ``python benchmarks/yardstick.py play ROOT --agent da0=models/agent_sft --agent rl0=models/agent_rl
--draws 8 --out FILE`` (ROOT: a project folder whose cycles ran; the pool is its last cycle's generations, the
simulator first; ``--batch-draws``: the customers share one random stream per batch, as before draws were per
episode, to measure what common random numbers per episode save), then ``python benchmarks/yardstick.py analyze
FILE [FILE ...] [--run ROOT] [--baseline da0] [--agents da1 ...]`` (files of one ROOT, merged by agent: a label's
draws may come from several files; ``--run``: ROOT's own evaluate, reports/evaluate.json, as one more file).
Every (scenario, draw) outcome is in FILE (ids and 0/1, no texts). Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.credit_arms import nested_line
from sparring.evaluate.episodes import compact_episodes, episode_outcomes, outcome_matrix
from sparring.evaluate.intervals import mde_table, nested_bootstrap, paired_difference

OPPONENTS = ("ref", "advpool")
KS, NS = (1, 2, 4, 8), (240, 480, 600)
MDE_GOAL = 0.05  # the effect the open issues ask to see


def agent_folders(root: Path, specs: list[str]) -> dict[str, Path]:
    """``--agent LABEL=FOLDER`` options as {label: checkpoint folder} (FOLDER relative to ROOT, or absolute)."""
    agents = {}
    for spec in specs:
        label, _, folder = spec.partition("=")
        path = (root / folder).resolve()
        if not label or not (path / "config.json").exists():
            sys.exit(f"error: --agent {spec}: want LABEL=FOLDER with a checkpoint (config.json) in FOLDER")
        agents[label] = path
    return agents


def play(args: argparse.Namespace) -> dict[str, Any]:
    """Every ``--agent`` against ``_ref`` and the pool of ROOT's last cycle, draws ``first .. first + draws - 1``."""
    import torch

    from sparring.catalog import load_judge
    from sparring.evaluate.parallel import evaluate_heldout_parallel
    from sparring.params import load_params
    from sparring.train.cycle_state import CycleState
    from sparring.world.scenarios import load_scenarios

    torch.set_num_threads(1)
    root = args.root.resolve()
    p = load_params(root / "params.yaml", args.profile)
    cycles = sorted((root / "models" / "cycles").glob("cycle_*/state.json"), key=lambda f: int(f.parent.name[6:]))
    if not cycles:
        sys.exit(f"error: {root}: no finished cycle (models/cycles/cycle_*/state.json)")
    state = CycleState.load(cycles[-1].parent)
    agents = agent_folders(root, args.agent)
    if args.skip % (1 + len(state.adversary_dirs)):
        sys.exit(f"error: --skip {args.skip}: want a multiple of the pool's {1 + len(state.adversary_dirs)} "
                 "generations (scenario i is dealt to generation i mod G)")  # fmt: skip
    scenarios = load_scenarios(root / "data" / "scenarios" / "heldout.jsonl")[args.skip : args.skip + args.scenarios]
    judge = partial(load_judge, root / "models" / "judge", p.judge, p.coevolution.agent_grpo.max_turns)
    draws = list(range(args.first_draw, args.first_draw + args.draws))
    start = time.perf_counter()
    played = evaluate_heldout_parallel(
        agents, root / state.simulator_dir, [root / d for d in state.adversary_dirs], scenarios, judge,
        p.coevolution, workers=args.workers, torch_threads=1, seed=p.seed, draws=draws, opponents=OPPONENTS,
        episode_draws=not args.batch_draws,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    figures = {
        a: {k: v for k, v in m.items() if k.startswith(("strict_pass_", "failure_"))} for a, m in played.agents.items()
    }
    return {
        "what": "per-(scenario, draw) strict PASS of each agent vs the reference opponent and the pool (yardstick)",
        "root": str(root),
        "seed": p.seed,
        "agents": {a: str(f) for a, f in agents.items()},
        "generations": 1 + len(state.adversary_dirs),
        "scenario_order": [s.scenario_id for s in scenarios],
        "draws": draws,
        "episode_draws": not args.batch_draws,
        "seconds": seconds,
        "episodes_played": sum(ph.get("episodes", 0) for ph in played.phases.values()),
        "figures": figures,
        "episodes": compact_episodes(played.episodes),
    }


def from_run(root: Path) -> dict[str, Any]:
    """A finished run's held-out play (reports/evaluate.json's episodes, metrics.json's pool) as a played file."""
    try:
        episodes = json.loads((root / "reports" / "evaluate.json").read_text(encoding="utf-8"))["episodes"]
        metrics = json.loads((root / "reports" / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"error: {root}: no finished evaluate there ({e})")
    order = list(dict.fromkeys(episodes["scenario_ids"]["ref"]))
    return {"scenario_order": order, "generations": 1 + metrics["adversary_generations"], "episodes": episodes}


def _matrices(docs: list[dict[str, Any]]) -> tuple[dict[str, dict[str, dict]], list[str], int]:
    """{agent: {opponent: {(scenario, draw): 0/1}}} merged over ``docs``, the scenario order and the generations.
    Files may hold slices of one held-out order (``play --skip``): the order is their union, first seen first."""
    order = list(dict.fromkeys(s for doc in docs for s in doc["scenario_order"]))
    generations = docs[0]["generations"]
    out: dict[str, dict[str, dict]] = {}
    for doc in docs:
        start = order.index(doc["scenario_order"][0])
        slice_of_order = doc["scenario_order"] == order[start : start + len(doc["scenario_order"])]
        if not slice_of_order or start % generations or doc["generations"] != generations:
            sys.exit("error: the files played other scenarios or another pool; analyze files of one ROOT together")
        for agent in doc["episodes"]["strict_pass"]:
            for opponent in OPPONENTS:
                got = episode_outcomes(doc["episodes"], agent, opponent)
                out.setdefault(agent, {}).setdefault(opponent, {}).update(got)
    return out, order, generations


def _aa(outcomes: dict, order: list[str]) -> dict[str, Any]:
    """The agent against itself: draws' first half vs second half, paired draw j with draw j + K/2."""
    m = outcome_matrix(outcomes, order)
    half = m.shape[1] // 2
    if half < 1:
        return {}
    mean, low, high = paired_difference(m[:, :half], m[:, half : 2 * half])
    return {"k": half, "diff": [mean, low, high], "width": high - low, "covers_0": bool(low <= 0 <= high)}


def analyze(docs: list[dict[str, Any]], baseline: str, agents: list[str] | None = None) -> dict[str, Any]:
    """A/A, gains, MDE and the nested bootstrap of ``agents`` (default: every agent in ``docs``) against
    ``baseline``."""
    out, order, generations = _matrices(docs)
    if baseline not in out:
        sys.exit(f"error: no agent {baseline!r} in the files (agents: {sorted(out)})")
    if agents:
        if missing := set(agents) - set(out):
            sys.exit(f"error: no agent {sorted(missing)} in the files (agents: {sorted(out)})")
        out = {a: out[a] for a in [baseline, *agents] if a in out}
    rl = [a for a in out if a != baseline]
    result: dict[str, Any] = {"n": len(order), "generations": generations, "baseline": baseline, "rl_agents": rl}
    result["strict_pass"] = {a: {o: float(outcome_matrix(out[a][o], order).mean()) for o in OPPONENTS} for a in out}
    result["draws"] = {a: outcome_matrix(out[a]["ref"], order).shape[1] for a in out}
    result["aa"] = {a: {o: _aa(out[a][o], order) for o in OPPONENTS} for a in out}
    gains: dict[str, Any] = {}
    mde: dict[str, Any] = {}
    diffs: dict[str, list[np.ndarray]] = {o: [] for o in OPPONENTS}
    for a in rl:
        gains[a], mde[a] = {}, {}
        for o in OPPONENTS:
            draws = sorted({d for _, d in out[a][o]} & {d for _, d in out[baseline][o]})  # both met these draws
            before, after = (outcome_matrix(out[x][o], order, draws) for x in (baseline, a))
            gains[a][o] = paired_difference(before, after)
            diffs[o].append(after - before)
            mde[a][o] = mde_table(after - before, ks=KS, ns=NS)
        d = diffs["advpool"][-1]  # scenario i was dealt to generation i mod G
        gains[a]["by_generation"] = [paired_difference(np.zeros_like(d[g::generations]), d[g::generations])
                                     for g in range(generations)]  # fmt: skip
    result["gains"], result["mde"] = gains, mde
    result["nested"] = {o: {"seeds": rl, **nested_bootstrap(diffs[o])} for o in OPPONENTS if diffs[o]}
    result["chosen"] = choose(mde)
    return result


def choose(mde: dict[str, Any]) -> dict[str, Any]:
    """The cheapest (n, K), fewest episodes n·K first, whose mean MDE over the RL agents against the pool is within
    :data:`MDE_GOAL`."""
    rows = {}
    for n in NS:
        for k in KS:
            values = [next(r["mde"] for r in mde[a]["advpool"] if r["n"] == n and r["k"] == k) for a in mde]
            rows[(n, k)] = float(np.mean(values)) if values else float("nan")
    for (n, k), value in sorted(rows.items(), key=lambda item: (item[0][0] * item[0][1], item[0][1])):
        if value <= MDE_GOAL:
            return {"n": n, "k": k, "mean_mde_advpool": value}
    return {"n": None, "k": None, "smallest_mean_mde_advpool": min(rows.values())}


def report(result: dict[str, Any]) -> None:
    print(f"n = {result['n']} scenarios, pool of {result['generations']} generations, baseline {result['baseline']}")
    for a, by in result["aa"].items():
        for o, row in by.items():
            if row:
                m, lo, hi = row["diff"]
                print(f"A/A {a} vs {o}: K={row['k']} draws vs K={row['k']}: {m:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                      f" width {row['width']:.3f} covers 0: {row['covers_0']}")  # fmt: skip
    for a, by in result["gains"].items():
        cells = "; ".join(f"{o} {by[o][0]:+.3f} [{by[o][1]:+.3f}, {by[o][2]:+.3f}]" for o in OPPONENTS)
        gens = ", ".join(f"gen {g} {m:+.3f}" for g, (m, _, _) in enumerate(by["by_generation"]))
        print(f"{a} − {result['baseline']}: {cells}; {gens}")
    for a, by in result["mde"].items():
        for o in OPPONENTS:
            print(f"MDE {a} vs {o}: " + ", ".join(f"n={r['n']} K={r['k']} {r['mde']:.3f}" for r in by[o]))
    for o, row in result["nested"].items():
        print(nested_line(f"nested (seed → scenario → draw) vs {o}", row))
    print(f"chosen: {result['chosen']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("play", help="play agents and write their per-(scenario, draw) outcomes")
    p.add_argument("root", type=Path)
    p.add_argument("--agent", action="append", required=True, help="LABEL=FOLDER (relative to ROOT)")
    p.add_argument("--draws", type=int, default=8)
    p.add_argument("--first-draw", type=int, default=0)
    p.add_argument("--scenarios", type=int, default=240)
    p.add_argument("--skip", type=int, default=0, help="play held-out scenarios from this index on (a later slice)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--profile", default=None)
    p.add_argument("--batch-draws", action="store_true", help="customers share a stream per batch (no CRN per episode)")
    p.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("analyze", help="A/A, MDE and gains from played files")
    a.add_argument("files", type=Path, nargs="*")
    a.add_argument("--run", type=Path, action="append", default=[], help="a finished run's evaluate, as a file")
    a.add_argument("--baseline", default="da0")
    a.add_argument("--agents", nargs="+", default=None, help="the agents to compare with the baseline (default: all)")
    a.add_argument("--out", type=Path, default=None, help="also write the analysis JSON here")
    args = parser.parse_args()
    if args.mode == "play":
        doc = play(args)
        args.out.write_text(json.dumps(doc) + "\n", encoding="utf-8")
        print(f"played {doc['episodes_played']} episodes in {doc['seconds']:.0f} s → {args.out}")
        print(json.dumps({"seconds": doc["seconds"], "episodes": doc["episodes_played"], "figures": doc["figures"]}))
        return
    docs = []
    for f in args.files:
        try:
            docs.append(json.loads(f.read_text(encoding="utf-8")))
        except (OSError, ValueError) as e:
            sys.exit(f"error: {f}: unreadable ({e})")
    docs += [from_run(root) for root in args.run]
    if not docs:
        sys.exit("error: analyze needs played files or --run ROOT")
    result = analyze(docs, args.baseline, args.agents)
    report(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
