"""The expert's ceiling replayed on a finished run: the scripted expert (this checkout's) against the run's held-out
adversary pool and cooperative simulator, with evaluate's scenarios, turn limits and seed, so a change to the
expert is measured without rerunning `evaluate`. Prints strict PASS, failure kinds, how often the customer's
answer to "which one?" named the goal's object, and how each customer answers a restated request: a no to its own
(``own_denial_rate``, over the expert's confirmations of the right intent) and a yes to another
(``wrong_yes_rate``, from a second pass by an expert whose first confirmation states a wrong intent of the same
tool), per opponent and per adversary generation; last line JSON.

Usage: ``python benchmarks/ceiling_replay.py --run DIR [--n 240]`` (DIR: a project folder where `sparring run`
finished). ``coop`` is `_coop` as `evaluate` plays it: the simulator at ``coevolution.coop_temperature`` (greedy)
after the held-out utterance, every persona cooperative. With ``--simulator-only`` DIR needs only `simulator_sft`'s
checkpoint: the pool is then the SFT simulator sampled, playing each scenario's own persona (what every adversary
starts from). Before 2026-12-03 ``coop`` here sampled the simulator at the adversaries' temperature with each
scenario's own persona, unlike `_coop`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

import torch

from sparring.agents.scripted import ExpertAgent
from sparring.evaluate.crossplay import failure_kind
from sparring.evaluate.heldout import heldout_seed
from sparring.params import load_params
from sparring.rollout import run_episodes
from sparring.train.play import GameModels, against_pool, cooperative_customer
from sparring.world.answers import confirmation_answers, which_answers
from sparring.world.scenarios import as_cooperative, load_scenarios


def opponent_row(episodes: list, probe: list) -> dict:
    """One opponent's figures: the expert's strict PASS and failure kinds, its which-answers, and the customer's
    answers to restated requests (``episodes``: the plain expert's; ``probe``: the misconfirming expert's)."""
    kinds = collections.Counter(failure_kind(e) for e in episodes if not e.outcome.strict_pass)
    asked, named = (sum(x) for x in zip(*(which_answers(e) for e in episodes), strict=True))
    own = collections.Counter()
    for e in episodes:
        own.update(confirmation_answers(e))
    wrong = collections.Counter()
    for e in probe:
        wrong.update(confirmation_answers(e))
    return {
        "expert_strict_pass": sum(e.outcome.strict_pass for e in episodes) / len(episodes),
        "n": len(episodes),
        "failures": dict(kinds),
        "which_asked": asked,
        "which_named": named,
        "own_confirmations": own["own"],
        "own_denied": own["own_denied"],
        "own_denial_rate": own["own_denied"] / max(1, own["own"]),
        "wrong_confirmations": wrong["other"],
        "wrong_yes": wrong["other_yes"],
        "wrong_yes_rate": wrong["other_yes"] / max(1, wrong["other"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a finished run's project folder")
    parser.add_argument("--n", type=int, default=None, help="held-out scenarios (default: evaluate's)")
    parser.add_argument("--simulator-only", action="store_true", help="play the SFT simulator, not a finished run")
    args = parser.parse_args()
    root = args.run.resolve()
    states = sorted((root / "models" / "cycles").glob("cycle_*/state.json"), key=lambda p: int(p.parent.name[6:]))
    simulator = root / "models" / "simulator_sft"
    if args.simulator_only and not any(simulator.glob("*.safetensors")):
        sys.exit(f"error: {simulator}: no simulator checkpoint (run `sparring stage simulator_sft` first)")
    if not states and not args.simulator_only:
        sys.exit(f"error: {root}: no finished cycle (models/cycles/cycle_*/state.json)")
    torch.set_num_threads(1)
    os.chdir(root)  # checkpoint paths in the cycle state are relative to the project
    p = load_params(root / "params.yaml")
    games = GameModels(p.coevolution)
    if args.simulator_only:
        state = {"adversary_dirs": [], "simulator_dir": "models/simulator_sft"}
    else:
        state = json.loads(states[-1].read_text(encoding="utf-8"))
    held = load_scenarios(root / "data" / "scenarios" / "heldout.jsonl")[: args.n or p.evaluate.eval_scenarios]
    a = p.coevolution.agent_grpo
    play = {"max_turns": a.max_turns, "max_calls_per_turn": a.max_calls_per_turn, "seed": heldout_seed(p.seed)}
    expert = ExpertAgent(refs=p.agent_sft.object_refs)
    pool = [games.adversary(d) for d in state["adversary_dirs"]] or [games.adversary(state["simulator_dir"])]
    # `_coop` as evaluate plays it: the simulator at coop_temperature (greedy), every persona cooperative
    co = p.coevolution
    coop = cooperative_customer(games.customer(state["simulator_dir"], co.coop_temperature), co.coop_opening)
    cooperative = as_cooperative(held)
    played = {
        "advpool": against_pool(held, expert, pool, tokenizer=games.tokenizer, **play),
        "coop": run_episodes(cooperative, expert, coop, tokenizer=games.tokenizer, **play),
    }
    misconfirming = ExpertAgent(refs=p.agent_sft.object_refs, misconfirm=1.0)  # the wrong-request probe
    probed = {
        "advpool": against_pool(held, misconfirming, pool, tokenizer=games.tokenizer, **play),
        "coop": run_episodes(cooperative, misconfirming, coop, tokenizer=games.tokenizer, **play),
    }
    if len(pool) > 1:  # against_pool deals scenario i to generation i % n, episodes grouped by generation
        sizes = [len(held[g :: len(pool)]) for g in range(len(pool))]
        for source in (played, probed):
            for g, size in enumerate(sizes):
                start = sum(sizes[:g])
                source[f"advpool_gen{g}"] = source["advpool"][start : start + size]
    out = {name: opponent_row(episodes, probed[name]) for name, episodes in played.items()}
    for name, row in out.items():
        print(
            f"expert vs {name}: strict PASS {row['expert_strict_pass']:.3f} (n={row['n']}), "
            f"failures {row['failures']}, which-questions answered {row['which_asked']}, naming the object "
            f"{row['which_named']}; own request denied {row['own_denied']}/{row['own_confirmations']} "
            f"({row['own_denial_rate']:.3f}), wrong request affirmed {row['wrong_yes']}/"
            f"{row['wrong_confirmations']} ({row['wrong_yes_rate']:.3f})"
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
