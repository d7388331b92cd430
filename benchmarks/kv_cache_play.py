"""DA0's held-out play with each KV-cache dtype, side by side: does the cache's precision move what the agent does,
and what does each cost in real episodes? (#42 item 2: the default cache dtype is a measured choice.)

Loads a finished run's DA0 (``models/agent_sft``) and plays the agent_sft stage's own evaluation (its held-out
scenarios against the scripted cooperative and camouflaging customers, greedy, the run's seed) once per cache dtype:
``bfloat16`` (a float32 model's buffered cache narrowed) and ``auto`` (the model's float32). The arms alternate
``--rounds`` times so that a busy machine slows both alike; strict PASS is paired episode by episode, with a paired
bootstrap 95% interval, and the share of episodes whose transcript differs at all is printed beside it.

Usage: ``python benchmarks/kv_cache_play.py --run DIR [--scenarios 240] [--rounds 1]``; the JSON last line is
``{"arms": {dtype: {"strict_pass_<opp>": …, "agent_tokens_per_s": …}}, "difference": {...}, "same_transcript": …}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer
from sparring.catalog import AGENT_SFT, Catalog
from sparring.evaluate.episodes import paired_bootstrap
from sparring.lm.policies import LMPolicy
from sparring.params import load_params
from sparring.rollout import run_episodes

ARMS = ("bfloat16", "auto")


def play(agent: LMPolicy, scenarios: list, seed: int) -> dict[str, Any]:
    """``agent`` against both scripted customers: per-episode strict passes, transcripts, agent tokens and seconds."""
    customers = {"coopscripted": CooperativeCustomer(), "camo": CamouflagingCustomer(seed=seed)}
    out: dict[str, Any] = {"passes": {}, "transcripts": {}, "seconds": 0.0, "agent_tokens": 0}
    for key, customer in customers.items():
        start = time.perf_counter()
        episodes = run_episodes(scenarios, agent, customer, seed=seed)
        out["seconds"] += time.perf_counter() - start
        out["passes"][key] = [float(ep.outcome.strict_pass) for ep in episodes]
        out["transcripts"][key] = [json.dumps(ep.messages, default=str) for ep in episodes]
        out["agent_tokens"] += sum(sum(ep.agent_mask) for ep in episodes)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a project folder that ran agent_sft")
    parser.add_argument("--scenarios", type=int, default=240, help="held-out scenarios (agent_sft's eval_scenarios)")
    parser.add_argument("--rounds", type=int, default=1, help="times each arm plays, alternating (timing only)")
    args = parser.parse_args()
    if not (args.run / AGENT_SFT).is_dir():
        print(f"error: {args.run / AGENT_SFT} is missing: run the agent_sft stage there", file=sys.stderr)
        return 2
    p, data = load_params(args.run / "params.yaml", None), Catalog(args.run)
    model, tokenizer = data.checkpoint(AGENT_SFT)
    scenarios = data.scenarios("heldout", args.scenarios)
    options = {"max_new_tokens": p.agent_sft.max_new_tokens, "greedy": True}  # as the agent_sft stage plays DA0
    agents = {arm: LMPolicy(model, tokenizer, "agent", kv_cache_dtype=arm, **options) for arm in ARMS}
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for _ in range(args.rounds):
        for arm in ARMS:
            runs[arm].append(play(agents[arm], scenarios, p.seed))
            print(f"{arm:9s} {runs[arm][-1]['seconds']:.1f} s", flush=True)
    first = {arm: r[0] for arm, r in runs.items()}
    summary: dict[str, Any] = {"arms": {}, "difference": {}, "same_transcript": {}, "n": args.scenarios}
    for arm, r in first.items():
        rate = np.median([x["agent_tokens"] / x["seconds"] for x in runs[arm]])
        summary["arms"][arm] = {f"strict_pass_{k}": float(np.mean(v)) for k, v in r["passes"].items()}
        summary["arms"][arm]["agent_tokens_per_s"] = float(rate)
    for key in first[ARMS[0]]["passes"]:
        old, new = first["bfloat16"]["passes"][key], first["auto"]["passes"][key]
        low, high = paired_bootstrap(old, new)
        summary["difference"][key] = {"auto_minus_bfloat16": float(np.mean(new) - np.mean(old)), "ci": [low, high]}
        pairs = zip(first["bfloat16"]["transcripts"][key], first["auto"]["transcripts"][key], strict=True)
        summary["same_transcript"][key] = float(np.mean([a == b for a, b in pairs]))
    for arm, m in summary["arms"].items():
        print(f"{arm:9s} " + ", ".join(f"{k} {v:.3f}" for k, v in m.items()))
    for key, d in summary["difference"].items():
        print(f"{key}: auto - bfloat16 {d['auto_minus_bfloat16']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}], "
              f"same transcript {summary['same_transcript'][key]:.3f}")  # fmt: skip
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
