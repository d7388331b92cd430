"""What the agent's reward pays for each way an episode ends: the ranking GRPO's group advantage climbs.

A finished run's agent (DA0 by default, or ``--agent DIR``) plays ``--eval-scenarios`` held-out scenarios against
the pool (the simulator as generation 0) and ``_coop``, sampled at the agent gym's temperature as the gym samples it
(``--greedy``: as evaluated), with evaluate's seed; each episode is scored by the judge the agent's RL uses (the
world's state alone) under reward v2 (``judge.rewards.REWARD_V2`` on params.yaml's ``judge.reward``) and reward
v1 (no false-report or wrong-act price, partial credit ungated: the default), and grouped two ways: by how it ended
(evaluate's failure kinds; "pass" for a strict pass), and by reward v2's order (``sparring.judge.rewards``): pass,
goal reached, safe non-completion, false report, wrong act. Credit assignment only moves an episode's advantage
between its own actions; which episodes get a positive advantage is set by this ranking.

Prints both tables, whether v2's order holds on these episodes (every tier's mean above the next one's, the wrong
act's highest below every other tier's lowest), then one JSON object as the last line:
``{"kinds": {"<kind>": {"share", "v1", "v2", "parts"}}, "tiers": {...}, "order_holds": bool}``.
Usage: ``python benchmarks/reward_by_failure.py ROOT [--agent DIR] [--eval-scenarios 240] [--greedy]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.agent_learning_curve import HeldoutCurve, run_params, start_state
from sparring.evaluate.crossplay import failure_kind
from sparring.judge.rewards import REWARD_V2
from sparring.params import load_params
from sparring.runtime import apply_torch_threads
from sparring.train.agent_rl import world_judge

REPO = Path(__file__).resolve().parents[1]
PARTS = ("resolution", "correct_tool", "lookup_first", "clean_end", "format", "strict_pass", "turns")
FLAGS = ("false_report", "wrong_act")
TIERS = ("pass", "goal reached", "safe", "false report", "wrong act")  # reward v2's order, highest first
V1 = {"false_report": 0.0, "wrong_act": 0.0, "gate_partial_credit": False}  # reward v1, the default


def tier(score: dict[str, float]) -> str:
    """Where reward v2 ranks an episode (sparring.judge.rewards' docstring)."""
    if score["agent_strict_pass"]:
        return "pass"
    if score["agent_wrong_act"]:
        return "wrong act"
    if score["agent_resolution"]:
        return "goal reached"
    return "false report" if score["agent_false_report"] else "safe"


def order_holds(rows: dict[str, list[float]]) -> bool:
    """Every present tier's mean above the next present one's, and the wrong act's best below all others' worst."""
    present = [t for t in TIERS if rows.get(t)]
    means = [statistics.mean(rows[t]) for t in present]
    ordered = all(a > b for a, b in zip(means, means[1:], strict=False))
    others = [r for t in present if t != "wrong act" for r in rows[t]]
    below = not rows.get("wrong act") or not others or max(rows["wrong act"]) < min(others)
    return ordered and below


def summary(groups: dict[str, list[tuple[dict, dict]]], n: int) -> dict[str, Any]:
    out = {}
    for name, rows in sorted(groups.items(), key=lambda kv: -statistics.mean(v2["agent_reward"] for _, v2 in kv[1])):
        out[name] = {
            "share": round(len(rows) / n, 4),
            "v1": round(statistics.mean(v1["agent_reward"] for v1, _ in rows), 3),
            "v2": round(statistics.mean(v2["agent_reward"] for _, v2 in rows), 3),
            "parts": {k: round(statistics.mean(v2[f"agent_{k}"] for _, v2 in rows), 3) for k in PARTS + FLAGS},
        }
    return out


def print_table(title: str, table: dict[str, Any]) -> None:
    print(f"\n{title:<14}{'share':>7}{'v1':>7}{'v2':>7}  " + " ".join(f"{k[:10]:>10}" for k in PARTS + FLAGS))
    for name, row in table.items():
        parts = " ".join(f"{row['parts'][k]:>10.2f}" for k in PARTS + FLAGS)
        print(f"{name:<14}{row['share']:>7.3f}{row['v1']:>7.2f}{row['v2']:>7.2f}  {parts}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a finished run's folder (DA0, the simulator, data/scenarios)")
    parser.add_argument("--agent", type=Path, default=None, help="the agent's checkpoint (default: DA0)")
    parser.add_argument("--eval-scenarios", type=int, default=240)
    parser.add_argument("--greedy", action="store_true", help="play greedy (as evaluated), not sampled (as trained)")
    parser.add_argument("--profile", default="default", help="the params profile the run was made with")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    p = run_params(root, args.profile)
    apply_torch_threads(p.runtime.torch_threads)
    agent_dir = str(args.agent.resolve()) if args.agent else start_state(root, 0).agent_dir
    curve = HeldoutCurve.of_run(root, p, args.eval_scenarios)
    played = curve.play(curve.models.agent_policy_of(agent_dir, greedy=args.greedy))
    episodes = played["_coop"] + played["_advpool"]
    reward = load_params(REPO / "params.yaml", args.profile).judge.reward  # this project's, not the run's own
    v2 = world_judge(p.coevolution, reward.model_copy(update=REWARD_V2)).score(episodes)
    v1 = world_judge(p.coevolution, reward.model_copy(update=V1)).score(episodes)
    kinds: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    tiers: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    for episode, s1, s2 in zip(episodes, v1, v2, strict=True):
        kinds["pass" if episode.outcome.strict_pass else failure_kind(episode) or "other"].append((s1, s2))
        tiers[tier(s2)].append((s1, s2))
    result = {
        "episodes": len(episodes),
        "agent": agent_dir,
        "kinds": summary(kinds, len(episodes)),
        "tiers": summary(tiers, len(episodes)),
        "order_holds": order_holds({t: [s2["agent_reward"] for _, s2 in rows] for t, rows in tiers.items()}),
        "order_holds_v1": order_holds({t: [s1["agent_reward"] for s1, _ in rows] for t, rows in tiers.items()}),
    }
    print(f"{len(episodes)} episodes ({'greedy' if args.greedy else 'sampled'}), {agent_dir}")
    print_table("ended", result["kinds"])
    print_table("v2 tier", result["tiers"])
    print(f"\nreward v2's order holds: {result['order_holds']} (under v1: {result['order_holds_v1']})")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
