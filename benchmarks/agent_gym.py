"""The agent's isolation gym on its own: does GRPO against a finished run's adversaries lift held-out play?

Starts from a finished run's cycle state (``models/cycles/cycle_N``: its agent, simulator, adversary generations
and arena transcripts) and, for each ``--set`` of GRPO overrides, trains that agent once as the next cycle's gym
would (``coevolution.agent_mix`` opponents, fresh scenarios plus replayed transcripts, the params' other GRPO
settings). Then the starting agent and every trained one play the same held-out scenarios with the same seed
against ``_advpool`` (every generation), ``_coop``, ``_coopsim`` and ``_camo``, as ``evaluate`` does. Side by side
in one run, so differences are the gym's, not the machine's. Each setting takes ~3-6 min of gym on one core
(15-30 steps) and ~2.5 min of evaluation per 240 scenarios.

``--expert epochs=2,learning_rate=3e-4`` (repeatable) adds agents trained another way, as a control on what any
training of the agent can reach: the scripted expert, which knows each hidden goal, plays every adversary
generation on the held-in scenarios (``--expert-runs`` times, dealt round-robin), and the agent is SFT'd
(agent_sft's settings with these overrides) on the expert's strict passes: the right call at the states the
adversaries create, with no exploration needed. The line above the table (``expert`` in the JSON) is the
scripted expert itself against the pool on the same held-out scenarios: the strict PASS an agent that always knows
the goal reaches, and how many of its failures the world refused for want of a customer's description of the
object acted on.

Prints one row per agent, then one JSON object as the last line.
Usage: ``python benchmarks/agent_gym.py ROOT [--cycle 4] [--set learning_rate=3e-4,temperature=1.5 ...]
[--eval-scenarios 240] [--gym-scenarios N] [--expert epochs=2 ... --expert-runs 2]``; with no ``--set`` and
no ``--expert``, the params' own agent gym.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from sparring.agents.scripted import ExpertAgent
from sparring.catalog import load_judge
from sparring.evaluate.heldout import evaluate_heldout, heldout_seed
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.params import load_params
from sparring.runtime import apply_torch_threads
from sparring.seeds import derive_seed
from sparring.settings import GRPOSettings
from sparring.train.coevolution import CycleModels, agent_opponents, gym_scenarios
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import absolute
from sparring.train.demos import expert_demonstrations
from sparring.train.grpo import train_side
from sparring.train.play import adversary_customer, against_pool
from sparring.train.sft import train_sft
from sparring.world.scenarios import load_scenarios

SHOWN = ("strict_pass_advpool", "routing_acc_advpool", "adv_success_advpool", "strict_pass_coop",
         "routing_acc_coop", "strict_pass_coopsim", "strict_pass_camo")  # fmt: skip


def overrides(text: str, base: BaseModel) -> Any:
    """``base`` (a settings or params section) with ``"learning_rate=3e-4,max_steps=30"`` applied, validated as
    params.yaml's values are; an unknown key or a wrong value is refused by name."""
    changes = dict(item.partition("=")[::2] for item in filter(None, text.split(",")))
    try:
        return type(base).model_validate({**base.model_dump(), **{key.strip(): v for key, v in changes.items()}})
    except ValidationError as err:
        raise SystemExit(f"{text!r}: {err.errors()[0]['loc']}: {err.errors()[0]['msg']}") from None


def main() -> None:
    """Every ``--set``'s gym and ``--expert``'s SFT from the cycle's agent, then each agent and the expert played.
    Over 60 lines: a benchmark's measurements side by side, top to bottom, as the printout reads."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a project folder whose pipeline ran (params.yaml, data, models)")
    parser.add_argument("--cycle", type=int, default=4, help="start from models/cycles/cycle_N's state")
    parser.add_argument("--set", action="append", default=[], help="GRPO overrides, e.g. learning_rate=3e-4")
    parser.add_argument("--eval-scenarios", type=int, default=240)
    parser.add_argument("--gym-scenarios", type=int, default=None, help="default: coevolution.gym_scenarios")
    parser.add_argument("--expert", action="append", default=[], help="SFT on the expert's play, e.g. epochs=2")
    parser.add_argument("--expert-runs", type=int, default=2, help="times each held-in scenario is played")
    parser.add_argument("--profile", default="default")
    args = parser.parse_args()

    root = args.root.resolve()
    p = load_params(root / "params.yaml", args.profile)
    apply_torch_threads(p.runtime.torch_threads)
    co, k = p.coevolution, args.cycle + 1
    state = absolute(CycleState.load(root / "models" / "cycles" / f"cycle_{args.cycle}"), root)
    base, grpo_seed = co.agent_grpo, derive_seed(p.seed, k, "grpo")
    sets = args.set or ([] if args.expert else [""])  # no --set: the params' gym, unless only --expert asked
    grid = {text or "params": overrides(text, base) for text in sets}
    sft_grid = {f"expert {text}": overrides(text, p.agent_sft.sft) for text in args.expert}
    judge = load_judge(root / "models" / "judge", p.judge, base.max_turns)
    models = CycleModels(state, co)  # the cycle's loader: one tokenizer, each customer loaded once
    tok, customer = models.tokenizer, models.customer
    system = getattr(models.agent.config, "agent_system_prompt", "")  # the expert prompted as the agent is

    opponent = agent_opponents(state, dict(co.agent_mix), customer, co.coop_opening, co.adversary_opening)
    train = load_scenarios(root / "data" / "scenarios" / "train.jsonl")
    rng = random.Random(derive_seed(p.seed, k, "gym"))
    n_gym = args.gym_scenarios or co.gym_scenarios
    gym = gym_scenarios(train, state.transcripts, "agent", n_gym, co.replay_share,
                        co.replay_failure_share, rng)  # fmt: skip
    held = load_scenarios(root / "data" / "scenarios" / "heldout.jsonl")[: args.eval_scenarios]

    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="sparring-agent-gym-") as scratch:
        agents: dict[str, str | Path] = {"start": state.agent_dir}
        for name, settings in grid.items():
            model, _ = load_checkpoint(Path(state.agent_dir))  # every setting from the same weights
            result = train_side(model, tok, "agent", opponent, gym, judge, settings, seed=grpo_seed)
            save_checkpoint(result.model, tok, Path(scratch) / f"agent_{len(agents)}")
            agents[name] = Path(scratch) / f"agent_{len(agents)}"
            rows[name] = {"gym_seconds": result.seconds, **result.reward_stats()}
            print(f"{name}: gym {result.seconds:.0f} s, reward {rows[name]['reward_first']:.3f} -> "
                  f"{rows[name]['reward_last']:.3f}, zero-spread groups {rows[name]['frac_zero_std_groups']:.2f}",
                  flush=True)  # fmt: skip
        if sft_grid:
            demos = expert_play(state, customer, train, co.adversary_opening, args.expert_runs, base, p, system)
            print(f"expert vs the adversaries: {len(demos)} strict passes to learn from", flush=True)
            if not demos:
                raise SystemExit(f"--expert: the expert passed no held-in scenario in {base.max_turns} turns")
        for name, sft in sft_grid.items():
            model, _ = load_checkpoint(Path(state.agent_dir))
            result = train_sft(model, tok, demos, sft, Path(scratch) / "sft", seed=p.seed)
            save_checkpoint(result.model, tok, Path(scratch) / f"agent_{len(agents)}")
            agents[name] = Path(scratch) / f"agent_{len(agents)}"
            rows[name] = {"sft_seconds": result.seconds, "demos": len(demos), "sft_loss": result.final_loss}
            print(f"{name}: SFT {result.seconds:.0f} s on {len(demos)} demos, loss {result.final_loss:.4f}", flush=True)
        dirs = state.simulator_dir, state.adversary_dirs
        played = evaluate_heldout(agents, *dirs, held, judge, co, seed=p.seed).agents
    ceiling = expert_ceiling(state, customer, held, co.adversary_opening, base, p, system)
    rows["expert"] = ceiling
    print(
        f"expert (knows every goal) vs the pool: strict PASS {ceiling['strict_pass_advpool']:.3f}; "
        f"{ceiling['undescribed_failures']} of its {ceiling['failures']} failures: the object was never described"
    )
    width = max(len(name) for name in played) + 2
    print(f"\n{'agent':{width}s}" + "".join(f"{m.replace('strict_pass', 'pass'):>22s}" for m in SHOWN))
    for name, metrics in played.items():
        rows.setdefault(name, {}).update({m: metrics[m] for m in SHOWN})
        print(f"{name:{width}s}" + "".join(f"{metrics[m]:>22.3f}" for m in SHOWN))
    print(json.dumps({"root": str(root), "cycle": args.cycle, "eval_scenarios": len(held), "agents": rows}))


def expert_play(
    state: CycleState,
    customer: Any,
    train: list[Any],
    opening: str,
    runs: int,
    turns: GRPOSettings,
    p: Any,
    system: str,
) -> list[list[dict[str, Any]]]:
    """The expert's strict passes against every adversary generation on ``train``, each scenario played ``runs``
    times by different generations (round-robin), after the agent's ``system`` message."""
    generations = state.adversary_dirs or [state.simulator_dir]
    demos = []
    for run in range(runs):
        for i, folder in enumerate(generations):
            demos += expert_demonstrations(
                train[(i + run) % len(generations) :: len(generations)], derive_seed(p.seed, "expert", run),
                (adversary_customer(customer(folder), opening),), refs=p.agent_sft.object_refs,
                agent_system=system, max_turns=turns.max_turns, max_calls_per_turn=turns.max_calls_per_turn,
            )  # fmt: skip
    return demos


def expert_ceiling(
    state: CycleState, customer: Any, held: list[Any], opening: str, turns: GRPOSettings, p: Any, system: str
) -> dict[str, Any]:
    """The scripted expert against the adversary pool on ``held``, dealt and seeded as ``evaluate``'s ``_advpool``:
    its strict PASS, and its failures whose resolving call the world refused as undescribed."""
    adversaries = [adversary_customer(customer(d), opening) for d in state.adversary_dirs or [state.simulator_dir]]
    episodes = against_pool(
        held, ExpertAgent(refs=p.agent_sft.object_refs), adversaries, seed=heldout_seed(p.seed),
        agent_system=system, max_turns=turns.max_turns, max_calls_per_turn=turns.max_calls_per_turn,
    )  # fmt: skip
    failed = [ep for ep in episodes if not ep.outcome.strict_pass]
    undescribed = [ep for ep in failed if any("has not described" in str(m["content"]) for m in ep.messages)]
    return {
        "strict_pass_advpool": 1 - len(failed) / max(1, len(episodes)),
        "failures": len(failed),
        "undescribed_failures": len(undescribed),
    }


if __name__ == "__main__":
    main()
