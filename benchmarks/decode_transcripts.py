"""DA0's greedy held-out play through sparring's decode loop and through ``model.generate``: the same transcripts?

A finished run's DA0 plays ``--eval-scenarios`` held-out scenarios against the pool (the simulator as generation 0)
and ``_coop``, greedy, with evaluate's seed, twice: every policy (DA0's and the simulators') decoding with
``decoder="loop"`` (the default), then with ``decoder="generate"``, the cache in the model's dtype both times. The
episodes are compared token by token (the agent's view holds both sides' messages). Where two differ, the first
differing token is shown with DA0's logit gap between the two tokens at that position (one float32 forward over
the shared prefix): a gap of ~1e-5 is floating-point order (the two paths run the same forward with other
shapes), a large one a bug. Issue #60's acceptance: the same transcripts on 480 episodes, or every difference
explained that way.

Prints readable lines, then one JSON object as the last line: ``{"episodes": ..., "identical": ...,
"differences": [...]}``. Usage: ``python benchmarks/decode_transcripts.py ROOT [--eval-scenarios 240]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.agent_learning_curve import HeldoutCurve, run_params, start_state
from benchmarks.gym_step_time import rollout_path
from sparring.lm.checkpoints import load_checkpoint
from sparring.runtime import apply_torch_threads


def play(root: Path, p: Any, n: int, agent_dir: str, decoder: str) -> dict[tuple[str, str], Any]:
    """Every held-out episode against the pool and ``_coop``, keyed by (opponent, scenario id); every policy (the
    customers' too) built under ``decoder``."""
    with rollout_path({"decoder": decoder}):
        curve = HeldoutCurve.of_run(root, p, n)
        played = curve.play(curve.models.agent_policy_of(agent_dir, greedy=True))
    return {(opp, ep.scenario.scenario_id): ep for opp, eps in played.items() for ep in eps}


def first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def logit_gap(model: Any, prefix: list[int], tokens: tuple[int, int]) -> float:
    """DA0's logit for one token minus the other's, after ``prefix`` (the agent's view up to the difference)."""
    with torch.no_grad():
        logits = model(torch.tensor([prefix])).logits[0, -1].float()
    return float(logits[tokens[0]] - logits[tokens[1]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a default run's folder (DA0, the simulator, data/scenarios)")
    parser.add_argument("--eval-scenarios", type=int, default=240)
    parser.add_argument("--profile", default="default", help="the params profile the run was made with")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    p = run_params(root, args.profile)
    apply_torch_threads(p.runtime.torch_threads)
    agent_dir = start_state(root, 0).agent_dir
    loop = play(root, p, args.eval_scenarios, agent_dir, "loop")
    generate = play(root, p, args.eval_scenarios, agent_dir, "generate")
    model = load_checkpoint(Path(agent_dir))[0].eval()
    differences = []
    for key, ep in loop.items():
        other = generate[key]
        if ep.token_ids == other.token_ids:
            continue
        i = first_difference(ep.token_ids, other.token_ids)
        side = "agent" if i < len(ep.agent_mask) and ep.agent_mask[i] else "customer"
        row = {"opponent": key[0], "scenario_id": key[1], "position": i, "side": side}
        if side == "agent" and i < min(len(ep.token_ids), len(other.token_ids)):
            row["logit_gap"] = logit_gap(model, ep.token_ids[:i], (ep.token_ids[i], other.token_ids[i]))
        row["strict_pass"] = [bool(ep.outcome.strict_pass), bool(other.outcome.strict_pass)]
        differences.append(row)
    n = len(loop)
    print(f"{n - len(differences)} of {n} episodes identical token by token (loop vs generate, greedy)")
    for row in differences:
        print(f"  {row}")
    print(json.dumps({"episodes": n, "identical": n - len(differences), "differences": differences}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
