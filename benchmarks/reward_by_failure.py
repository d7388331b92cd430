"""What the agent's reward pays for each way an episode ends: the ranking GRPO's group advantage climbs.

A finished run's agent (DA0 by default, or ``--agent DIR``) plays ``--eval-scenarios`` held-out scenarios against
the pool (the simulator as generation 0) and ``_coop``, sampled at the agent gym's temperature as the gym samples it
(``--greedy``: as evaluated), with evaluate's seed; each episode is scored by the judge the agent's RL uses (the
world's state alone: ``agent_rl``'s and the learning curve's ``--agent-reward-only``) and grouped by how it ended
(evaluate's failure kinds; "pass" for a strict pass). Per group: its share, the mean reward and its parts. Credit
assignment only moves an episode's advantage between its own actions; which episodes get a positive advantage is
set by this ranking (issue #57: whether a wrong act outscores a customer who left).

Prints a table, then one JSON object as the last line: ``{"<kind>": {"share": ..., "reward": ..., "parts": {...}}}``.
Usage: ``python benchmarks/reward_by_failure.py ROOT [--agent DIR] [--eval-scenarios 240] [--greedy]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from benchmarks.agent_learning_curve import HeldoutCurve, run_params, start_state
from sparring.evaluate.crossplay import failure_kind
from sparring.runtime import apply_torch_threads
from sparring.train.agent_rl import world_judge

PARTS = ("resolution", "correct_tool", "lookup_first", "clean_end", "format", "strict_pass", "turns", "false_report")


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
    scores = world_judge(p.coevolution, p.judge.reward).score(episodes)
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for episode, score in zip(episodes, scores, strict=True):
        groups["pass" if episode.outcome.strict_pass else failure_kind(episode) or "other"].append(score)
    table = {}
    for kind, rows in sorted(groups.items(), key=lambda kv: -statistics.mean(r["agent_reward"] for r in kv[1])):
        table[kind] = {
            "share": round(len(rows) / len(episodes), 4),
            "reward": round(statistics.mean(r["agent_reward"] for r in rows), 3),
            "parts": {k: round(statistics.mean(r[f"agent_{k}"] for r in rows), 3) for k in PARTS},
        }
    print(f"{len(episodes)} episodes ({'greedy' if args.greedy else 'sampled'}), {agent_dir}")
    print(f"{'ended':<14}{'share':>7}{'reward':>8}  " + " ".join(f"{k[:10]:>10}" for k in PARTS))
    for kind, row in table.items():
        parts = " ".join(f"{row['parts'][k]:>10.2f}" for k in PARTS)
        print(f"{kind:<14}{row['share']:>7.3f}{row['reward']:>8.2f}  {parts}")
    print(json.dumps(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
