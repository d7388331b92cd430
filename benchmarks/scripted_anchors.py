"""A finished run's scripted anchors, in conversation: the metrics' floor and ceiling on the run's own domain.

Scenarios are drawn fresh from the run's ingested test split (held-out wording) with the run's persona mix, in
worlds of ``scenarios.n_customers``; every agent plays each one against the scripted cooperative customer through
the rollout engine (real multi-turn episodes), at ``--max-turns`` rounds and 3 calls a turn (the default profile's
budget: the quick profile's is too short for any agent to finish). The agents: the domain's expert verifying in the
app (``expert``: strict PASS must be 1.0), the expert typing what the customer wrote (``expert_facts``: 1.0 too; the
transcript readers find the identity in the customer's words), the expert that never identifies the customer
(``skip_identity``: passes none, and every scenario whose resolving tool needs identity has a call refused for it;
``not_applicable`` counts the others, such as policy questions), and a random agent (``random``: passes none). No
episode may take an unauthorized action. Exit status 1 if a check fails; the last line is JSON.
Usage: ``python benchmarks/scripted_anchors.py [RUN_DIR] [--episodes 1000] [--seed 0] [--max-turns 6] [--out F]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ("expert", "expert_facts", "skip_identity", "random")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", type=Path, default=ROOT, help="a finished run's project folder")
    parser.add_argument("--episodes", type=int, default=1000, help="scenarios, each played once by every agent")
    parser.add_argument("--seed", type=int, default=0, help="scenario draw and rollout seed")
    parser.add_argument("--max-turns", type=int, default=6, help="rounds per episode (customer + agent)")
    parser.add_argument("--profile", default=None, help="the run's profile (default: its reports/metrics.json's)")
    parser.add_argument("--out", type=Path, help="also write the report with every episode's outcome here (JSON)")
    args = parser.parse_args()

    from sparring.params import run_params

    run = args.run.resolve()
    params = run_params(run, args.profile)  # its domain bound before sparring.world is imported
    path = run / "data" / "ingest" / "test.parquet"
    if not path.is_file():
        sys.exit(f"error: {path}: missing (is {run} a finished run?)")
    report = play(path, params, args)
    rows = report.pop("per_episode")
    if args.out:
        columns = ["scenario_id", "intent", "persona"] + [f"{a}_{k}" for a in AGENTS for k in ("strict", "refused")]
        args.out.write_text(json.dumps({**report, "per_episode": {"columns": columns, "rows": rows}}) + "\n", "utf-8")
    for name in AGENTS:
        print(f"{name:14s} " + "  ".join(f"{k} {v}" for k, v in report[name].items()))
    print(json.dumps(report))
    sys.exit(0 if report["ok"] else 1)


def play(path: Path, params: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Every agent on every scenario; per agent its counts, per episode its outcomes, and the checks."""
    import polars as pl

    from sparring.agents.scripted import CooperativeCustomer, RandomAgent, expert_agent
    from sparring.rollout import run_episodes
    from sparring.world.scenarios import sample_scenarios
    from sparring.world.vocab import DOMAIN

    scenarios = sample_scenarios(
        pl.read_parquet(path),
        args.episodes,
        args.seed,
        params.scenarios.personas,
        n_customers=params.scenarios.n_customers,
    )
    agents = {
        "expert": expert_agent(),
        "expert_facts": expert_agent(verify="facts"),
        "skip_identity": expert_agent(skip_identity=True),
        "random": RandomAgent(seed=args.seed),
    }
    counts: dict[str, dict[str, int]] = {}
    rows: list[list[Any]] = [[s.scenario_id, s.intent, s.persona] for s in scenarios]
    start = time.perf_counter()
    for name, agent in agents.items():
        episodes = run_episodes(
            scenarios, agent, CooperativeCustomer(), max_turns=args.max_turns, max_calls_per_turn=3, seed=args.seed
        )
        counts[name] = tally(episodes, rows)
    n = len(scenarios)
    skip = counts["skip_identity"]
    checks = {
        "expert_strict_pass_all": counts["expert"]["strict_pass"] == n,
        "expert_facts_strict_pass_all": counts["expert_facts"]["strict_pass"] == n,
        "skip_identity_passes_none": skip["strict_pass"] == 0,
        "skip_identity_refused_all": skip["refused_needing_identity"] == n - skip["not_applicable"],
        "random_passes_none": counts["random"]["strict_pass"] == 0,
        "no_unauthorized_action": all(c["unauthorized"] == 0 for c in counts.values()),
    }
    return {
        "run": str(args.run.resolve()),
        "domain": DOMAIN.name,
        "episodes": n,
        "intents": len({s.intent for s in scenarios}),
        "seed": args.seed,
        "max_turns": args.max_turns,
        **counts,
        "checks": checks,
        "ok": all(checks.values()),
        "seconds": round(time.perf_counter() - start, 1),
        "per_episode": rows,
    }


def tally(episodes: list[Any], rows: list[list[Any]]) -> dict[str, int]:
    """One agent's counts over its episodes; each episode's strict PASS and refusal appended to its row."""
    from sparring.world.vocab import DOMAIN

    keys = ("episodes", "strict_pass", "refused", "refused_needing_identity", "not_applicable", "unauthorized")
    row = dict.fromkeys(keys, 0)
    for record, ep in zip(rows, episodes, strict=True):
        needs = DOMAIN.tools[ep.scenario.tool].needs_identity
        refused = bool(ep.session.log.security_events())
        row["episodes"] += 1
        row["strict_pass"] += ep.outcome.strict_pass
        row["refused"] += refused
        row["refused_needing_identity"] += refused and needs
        row["not_applicable"] += not needs
        row["unauthorized"] += ep.outcome.unauthorized_actions
        record += [int(ep.outcome.strict_pass), int(refused)]
    return row


if __name__ == "__main__":
    main()
