"""The agent gym's seconds per step before and after #60's rollout path, on the same scenarios and seed (issue #60).

"before" is the rollout path the gym had until 2026-12-05: ``model.generate`` (``LMPolicy(decoder="generate")``)
over a bfloat16 KV cache (the old default on a CPU with bfloat16 arithmetic, this VM's). "after" is today's default:
sparring's decode loop over a cache in the model's own dtype. Everything else is the product's agent_rl stage: from
a finished run's DA0 and simulator, the agent_rl recipe (``coevolution.agent_grpo`` with dynamic sampling, lr 3e-4,
the agent's reward from the world alone) on the run's gym (``data/scenarios/gym.jsonl``), ``--steps`` optimizer steps,
one RL seed for both paths.

Measured twice: one process (each path's gym alone on the machine, one after the other), then two (two gyms of the
same path at once, RL seeds ``--seed`` and ``--seed + 1``, as when two stages or seeds share the 2 cores). A step's
time is TRL's ``step_time`` (rollouts, scoring and the update; the first step is a warm-up and not counted); the
rollout's share and the episodes played per step are shown beside it, because dynamic sampling plays 32-64
episodes a step and the two paths' samples differ where bfloat16 rounding changes a draw. Then the one-process
arms' last weights play the same ``--eval-scenarios`` held-out scenarios greedy against the pool and ``_coop``
(today's path for both), with the paired difference after - before and its bootstrap 95% interval: what the gym
learnt must not depend on the path.

Each gym runs in its own process (``--child``), so a path's setting never leaks into the other's. The switch is
this file's :func:`rollout_path`: it sets LMPolicy's two options for every policy the gym builds (the trained
agent's and the simulator's), in the child only.

Prints readable lines, then one JSON object as the last line: ``{"step_seconds": {"before": ..., "after": ...},
"ratio": ..., "two_processes": {...}, "heldout": {...}}`` (goal: ratio <= 0.6, one process and two).
Usage: ``python benchmarks/gym_step_time.py ROOT [--steps 12] [--seed 0] [--eval-scenarios 240]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.agent_learning_curve import HeldoutCurve, run_params, start_state
from sparring.evaluate.episodes import paired_bootstrap
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.policies import LMPolicy
from sparring.params import load_params
from sparring.runtime import apply_torch_threads
from sparring.seeds import derive_seed
from sparring.train.agent_rl import agent_rl_grpo, world_judge
from sparring.train.coevolution import CycleModels, agent_opponents
from sparring.train.grpo import train_side
from sparring.world.scenarios import load_scenarios

PATHS = {"before": {"decoder": "generate", "kv_cache_dtype": "bfloat16"}, "after": {}}  # after: LMPolicy's defaults


@contextmanager
def rollout_path(options: dict[str, str]) -> Iterator[None]:
    """Every LMPolicy built inside gets ``options`` unless its caller set them: the gym's policies are built deep
    in the trainer and the game's models, which take no decoder option of their own (build the customers inside
    too: policies built before keep the defaults)."""
    init = LMPolicy.__init__

    def with_options(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**options, **kwargs})

    LMPolicy.__init__ = with_options  # type: ignore[method-assign]
    try:
        yield
    finally:
        LMPolicy.__init__ = init  # type: ignore[method-assign]


def child(root: Path, profile: str, path: str, steps: int, seed: int, out: Path, save: Path | None) -> None:
    """One gym of ``steps`` steps on ``path``'s rollouts; its step times (and, with ``save``, its weights)."""
    p = load_params(root / "params.yaml", profile)
    apply_torch_threads(p.runtime.torch_threads)
    co, state = p.coevolution, start_state(root, 0)
    settings = agent_rl_grpo(co, p.agent_rl).replace(max_steps=steps)
    gym = load_scenarios(root / "data" / "scenarios" / "gym.jsonl")
    with rollout_path(PATHS[path]):  # the customers are built here too: a rollout decodes both sides
        models = CycleModels(state, co)
        opponent = agent_opponents(state, dict(co.agent_mix), models.customer, co.coop_opening, co.adversary_opening)
        model, _ = load_checkpoint(Path(state.agent_dir))
        result = train_side(
            model, models.tokenizer, "agent", opponent, gym, world_judge(co, p.judge.reward), settings,
            seed=derive_seed(p.seed, "agent_rl", seed),
        )  # fmt: skip
    times = [float(row["step_time"]) for row in result.curves if "step_time" in row]
    rollouts = [s["rollout_s"] for s in result.steps]
    played = [s.get("episodes_played", s["episodes"]) for s in result.steps]
    if save is not None:
        save_checkpoint(result.model, models.tokenizer, save)
    out.write_text(json.dumps({"step_time": times, "rollout_s": rollouts, "episodes_played": played}))


def summary(run: dict[str, list[float]]) -> dict[str, float]:
    """Seconds per step past the warm-up step, with the rollouts' share and the episodes a step played."""
    times, rollouts = run["step_time"][1:], run["rollout_s"][1:]
    return {
        "step_seconds": round(statistics.mean(times), 3),
        "step_seconds_median": round(statistics.median(times), 3),
        "rollout_seconds": round(statistics.mean(rollouts), 3),
        "episodes_per_step": round(statistics.mean(run["episodes_played"][1:]), 1),
    }


def launch(
    root: Path, profile: str, path: str, steps: int, seed: int, out: Path, save: Path | None = None
) -> subprocess.Popen:
    cmd = [sys.executable, __file__, str(root), "--profile", profile, "--child", path, "--steps", str(steps)]
    cmd += ["--seed", str(seed)]
    cmd += ["--out", str(out)] + (["--save", str(save)] if save else [])
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL)


def wait(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.wait() != 0:
            raise SystemExit(f"error: a gym process exited with {proc.returncode}: {' '.join(proc.args)}")


def heldout(root: Path, profile: str, folders: dict[str, Path], n: int) -> dict[str, Any]:
    """Both arms' last weights, greedy on the same held-out scenarios: strict PASS and the paired difference."""
    curve = HeldoutCurve.of_run(root, load_params(root / "params.yaml", profile), n)
    points = {arm: curve.point(folder) for arm, folder in folders.items()}
    row: dict[str, Any] = {}
    for opp in ("advpool", "coop"):
        before, after = points["before"][f"passes_{opp}"], points["after"][f"passes_{opp}"]
        low, high = paired_bootstrap(before, after)
        row[opp] = {
            "before": sum(before) / n, "after": sum(after) / n,
            "after_minus_before": [(sum(after) - sum(before)) / n, low, high],
        }  # fmt: skip
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a default run's folder (DA0, the simulator, data/scenarios)")
    parser.add_argument("--steps", type=int, default=12, help="optimizer steps per gym (the first is a warm-up)")
    parser.add_argument("--seed", type=int, default=0, help="the RL seed (two processes: this and the next)")
    parser.add_argument("--eval-scenarios", type=int, default=240, help="held-out scenarios (0: no held-out play)")
    parser.add_argument("--profile", default="default", help="the params profile the run was made with")
    parser.add_argument("--child", choices=sorted(PATHS), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.child:
        child(root, args.profile, args.child, args.steps, args.seed, args.out, args.save)
        return 0
    if args.steps < 2:
        raise SystemExit("error: --steps must be >= 2 (the first step is a warm-up)")
    missing = [f for f in ("params.yaml", "data/scenarios/gym.jsonl", "models/agent_sft") if not (root / f).exists()]
    if missing:
        raise SystemExit(f"error: {root}: no {', '.join(missing)} (a finished default run's folder)")
    run_params(root, args.profile)
    with tempfile.TemporaryDirectory(prefix="sparring-steptime-") as scratch:
        tmp = Path(scratch)
        one: dict[str, Any] = {}
        for path in PATHS:  # one process: each path's gym alone
            print(f"{path}: one gym of {args.steps} steps alone", flush=True)
            wait([launch(root, args.profile, path, args.steps, args.seed, tmp / f"{path}.json", tmp / f"{path}_model")])
            one[path] = summary(json.loads((tmp / f"{path}.json").read_text()))
            print(f"  {one[path]}", flush=True)
        two: dict[str, Any] = {}
        for path in PATHS:  # two processes: two gyms of the same path at once
            print(f"{path}: two gyms of {args.steps} steps at once (seeds {args.seed}, {args.seed + 1})", flush=True)
            seeds = (args.seed, args.seed + 1)
            outs = [tmp / f"{path}_two_{s}.json" for s in seeds]
            wait([launch(root, args.profile, path, args.steps, s, out) for s, out in zip(seeds, outs, strict=True)])
            runs = [summary(json.loads(out.read_text())) for out in outs]
            two[path] = {k: round(statistics.mean(r[k] for r in runs), 3) for k in runs[0]}
            print(f"  {two[path]}", flush=True)
        folders = {path: tmp / f"{path}_model" for path in PATHS}
        held = heldout(root, args.profile, folders, args.eval_scenarios) if args.eval_scenarios else {}
    ratio = one["after"]["step_seconds"] / one["before"]["step_seconds"]
    ratio_two = two["after"]["step_seconds"] / two["before"]["step_seconds"]
    print(f"seconds per step, one process: before {one['before']['step_seconds']:.2f}, after "
          f"{one['after']['step_seconds']:.2f} ({ratio:.2f}x); two: before {two['before']['step_seconds']:.2f}, "
          f"after {two['after']['step_seconds']:.2f} ({ratio_two:.2f}x); goal <= 0.6x")  # fmt: skip
    for opp, row in held.items():
        d = row["after_minus_before"]
        print(f"held-out {opp} strict PASS at step {args.steps}: before {row['before']:.3f}, after "
              f"{row['after']:.3f}, after - before {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]")  # fmt: skip
    print(json.dumps({
        "steps": args.steps, "seed": args.seed,
        "step_seconds": {"before": one["before"]["step_seconds"], "after": one["after"]["step_seconds"]},
        "ratio": round(ratio, 3), "one_process": one,
        "two_processes": {**two, "ratio": round(ratio_two, 3)}, "heldout": held,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
