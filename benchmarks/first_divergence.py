"""Where an agent's failed episodes first part from the expert: misunderstanding the request, or carrying it out.

Each agent (``--agent LABEL=DIR``, relative to ROOT; default DA0) plays ROOT's ``--set`` scenarios (gym: the agent
gym's unplayed openings it trains on; heldout: the first ``--n`` held-out ones) greedy, one draw, against the
training customers as agent_rl's gym draws them (:func:`~sparring.train.play.agent_opponents`). In every
failed episode the first turn where the expert (the scripted policy DA0's demonstrations came from,
:class:`~sparring.agents.scripted.ExpertAgent`) would do something else (:func:`~sparring.train.self_training.
divergences`) is classed as

- ``intent``: the turn names another intent, or confirms or looks up for another one (the request misunderstood);
- ``execution``: the same intent, another call or other arguments (the request understood, carried out wrong);
- ``none``: no turn differs (the customer, not the agent, ended it).

and counted by the opening's style (cooperative, vague, camouflaged, multi-part). Prints a table, then one JSON
object as the last line: ``{"agents": {label: {"strict_pass", "failed", "first": {style: {class: n}}}}}``.
Usage: ``python benchmarks/first_divergence.py ROOT [--agent LABEL=DIR ...] [--set gym] [--n 160]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from benchmarks.yardstick import agent_folders
from sparring.agents.scripted import ExpertAgent
from sparring.catalog import SIMULATORS
from sparring.params import load_params
from sparring.runtime import apply_torch_threads
from sparring.train.self_training import divergences

INTENT_CALLS = ("confirm_request", "lookup_account")  # their arguments are the intent (or the part it needs)


def first_class(episode: Any, expert: ExpertAgent) -> str:
    """``intent``, ``execution`` or ``none`` for a failed episode's first divergence from ``expert``."""
    found = divergences(episode, expert)
    if not found:
        return "none"
    wanted, done = found[0].wanted, found[0].done
    if wanted[0] != done[0] or (wanted[1] == done[1] and wanted[1] in INTENT_CALLS):
        return "intent"
    return "execution"


def play(root: Path, folder: Path, scenarios: list, seed: int) -> list:
    """``folder``'s agent, greedy, one episode per scenario against agent_rl's training customers."""
    from sparring.lm.checkpoints import load_checkpoint
    from sparring.lm.policies import LMPolicy
    from sparring.rollout import run_episodes
    from sparring.seeds import derive_seed
    from sparring.train.cycle_state import CycleState
    from sparring.train.opponents import PerEpisodeOpponent
    from sparring.train.play import GameModels, agent_opponents, turn_limits

    co = load_params(root / "params.yaml").coevolution
    simulator = root / SIMULATORS[co.simulator]
    models = GameModels(co, episode_draws=True)
    models.model(simulator)
    model, _ = load_checkpoint(folder)
    state = CycleState(agent_dir=str(folder), simulator_dir=str(simulator))
    opponent = agent_opponents(state, co.agent_mix, models.customer, co.coop_opening, co.adversary_opening)
    customers = [opponent(s, derive_seed(seed, "customer", s.scenario_id, 0)) for s in scenarios]
    agent = LMPolicy(model.eval(), models.tokenizer, "agent", max_new_tokens=co.agent_grpo.max_new_tokens,
                     greedy=True, episode_draws=True)  # fmt: skip
    return run_episodes(scenarios, agent, PerEpisodeOpponent(customers, models.tokenizer), **turn_limits(co),
                        seed=seed, tokenizer=models.tokenizer)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--agent", action="append", default=[], help="LABEL=FOLDER (relative to ROOT; default DA0)")
    parser.add_argument("--set", choices=("gym", "heldout"), default="gym")
    parser.add_argument("--n", type=int, default=160)
    args = parser.parse_args(argv)
    from sparring.world.scenarios import load_scenarios

    apply_torch_threads(1)
    root = args.root.resolve()
    seed = load_params(root / "params.yaml").seed
    scenarios = load_scenarios(root / "data" / "scenarios" / f"{args.set}.jsonl")[: args.n]
    expert = ExpertAgent(refs=load_params(root / "params.yaml").agent_sft.object_refs)
    out: dict[str, Any] = {"set": args.set, "n": len(scenarios), "agents": {}}
    for label, folder in agent_folders(root, args.agent or ["da0=models/agent_sft"]).items():
        episodes = play(root, folder, scenarios, seed)
        first: dict[str, Counter] = defaultdict(Counter)
        for ep in episodes:
            if not ep.outcome.strict_pass:
                first[ep.scenario.utterance_style][first_class(ep, expert)] += 1
        failed = sum(sum(c.values()) for c in first.values())
        out["agents"][label] = {
            "strict_pass": 1 - failed / len(episodes),
            "failed": failed,
            "first": {k: dict(v) for k, v in first.items()},
        }
        totals = sum(first.values(), Counter())
        parted = ", ".join(f"{k} {v}" for k, v in totals.most_common())
        print(f"{label}: strict PASS {1 - failed / len(episodes):.3f} on {len(episodes)} {args.set} scenarios; "
              f"failures first part from the expert on {parted}")  # fmt: skip
        for style, counts in sorted(first.items()):
            print(f"  {style:12s} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
