"""The agent gym's seconds per step before and after #60's rollout path, on the same scenarios and seed (issue #60).

"before" is the rollout path the gym had until 2026-12-05: ``model.generate`` (``LMPolicy(decoder="generate")``)
over a bfloat16 KV cache (the old default on a CPU with bfloat16 arithmetic, this VM's). "after" is sparring's
decode loop over a cache in the model's own dtype. "ahead" is "after" with ``rollout_ahead`` (#60 item 2) at all but
one of a step's groups: a forked worker plays them, an update behind, while this process plays the last group and
updates, so one gym keeps both cores busy; "ahead_all" has the worker play every group (this process only updates).
Everything else is the product's agent_rl stage: from
a finished run's DA0 and simulator, the agent_rl recipe (``coevolution.agent_grpo`` with dynamic sampling, lr 3e-4,
the agent's reward from the world alone) on the run's gym (``data/scenarios/gym.jsonl``), ``--steps`` optimizer steps,
one RL seed for both paths.

Measured twice: one process (each arm's gym alone on the machine, one after the other; "ahead" forks its worker),
then two (two gyms of the same arm at once, RL seeds ``--seed`` and ``--seed + 1``, as when two stages or seeds share
the 2 cores; ``--two`` picks the arms). A step's
time is TRL's ``step_time`` (rollouts, scoring and the update; the first step is a warm-up and not counted); the
rollout's share and the episodes played per step are shown beside it, because dynamic sampling plays 32-64
episodes a step and the arms' samples differ where bfloat16 rounding changes a draw (and "ahead" plays the pool
in its own order, an update behind). Then the one-process arms' last weights play the same ``--eval-scenarios``
held-out scenarios greedy against the pool and ``_coop`` (today's path for all), with each arm's paired difference
from "before" (and "ahead" - "after") and its bootstrap 95% interval: what the gym learnt must not depend on the
path. ``--runs-json F`` writes every arm's per-scenario outcomes there (scenario ids and 0/1, no texts).

Each gym runs in its own process (``--child``), so a path's setting never leaks into the other's. The switch is
this file's :func:`rollout_path`: it sets LMPolicy's two options for every policy the gym builds (the trained
agent's and the simulator's), in the child only.

Prints readable lines, then one JSON object as the last line: ``{"step_seconds": {"before": ..., "after": ...,
"ahead": ..., "ahead_all": ...}, "ratio": {...}, "two_processes": {...}, "heldout": {...}}`` (goal: a ratio to
"before" <= 0.6).
Usage: ``python benchmarks/gym_step_time.py ROOT [--steps 12] [--seed 0] [--eval-scenarios 240]
[--arms before,after,ahead,ahead_all] [--two before,after] [--runs-json F]``.
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
from sparring.atomic import write_json
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

GENERATE_BF16 = {"decoder": "generate", "kv_cache_dtype": "bfloat16"}
# (LMPolicy options, groups of a step played here while the worker plays the rest ahead; None: no worker)
ARMS = {"before": (GENERATE_BF16, None), "after": ({}, None), "ahead": ({}, 1), "ahead_all": ({}, 0)}


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


def child(root: Path, profile: str, arm: str, steps: int, seed: int, out: Path, save: Path | None) -> None:
    """One gym of ``steps`` steps as ``arm`` plays it; its step times (and, with ``save``, its weights)."""
    p = load_params(root / "params.yaml", profile)
    apply_torch_threads(p.runtime.torch_threads)
    co, state = p.coevolution, start_state(root, 0)
    options, here = ARMS[arm]
    settings = agent_rl_grpo(co, p.agent_rl).replace(max_steps=steps)
    settings = settings.replace(rollout_ahead=0 if here is None else settings.scenarios_per_step - here)
    gym = load_scenarios(root / "data" / "scenarios" / "gym.jsonl")
    with rollout_path(options):  # the customers are built here too: a rollout decodes both sides
        models = CycleModels(state, co)
        opponent = agent_opponents(state, dict(co.agent_mix), models.customer, co.coop_opening, co.adversary_opening)
        model, _ = load_checkpoint(Path(state.agent_dir))
        result = train_side(
            model, models.tokenizer, "agent", opponent, gym, world_judge(co, p.judge.reward), settings,
            seed=derive_seed(p.seed, "agent_rl", seed),
        )  # fmt: skip
    times = [float(row["step_time"]) for row in result.curves if "step_time" in row]
    rollouts = [s["rollout_s"] for s in result.steps]  # what the step waited for ("ahead": the worker's rest)
    plays = [s["play_s"] for s in result.steps]  # the batch's own play
    played = [s.get("episodes_played", s["episodes"]) for s in result.steps]
    if save is not None:
        save_checkpoint(result.model, models.tokenizer, save)
    out.write_text(json.dumps({"step_time": times, "rollout_s": rollouts, "play_s": plays, "episodes_played": played}))


def summary(run: dict[str, list[float]]) -> dict[str, float]:
    """Seconds per step past the warm-up step, with the rollouts' share and the episodes a step played."""
    times, rollouts = run["step_time"][1:], run["rollout_s"][1:]
    return {
        "step_seconds": round(statistics.mean(times), 3),
        "step_seconds_median": round(statistics.median(times), 3),
        "rollout_seconds": round(statistics.mean(rollouts), 3),
        "play_seconds": round(statistics.mean(run["play_s"][1:]), 3),
        "episodes_per_step": round(statistics.mean(run["episodes_played"][1:]), 1),
    }


def launch(
    root: Path, profile: str, arm: str, steps: int, seed: int, out: Path, save: Path | None = None
) -> subprocess.Popen:
    cmd = [sys.executable, __file__, str(root), "--profile", profile, "--child", arm, "--steps", str(steps)]
    cmd += ["--seed", str(seed)]
    cmd += ["--out", str(out)] + (["--save", str(save)] if save else [])
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL)


def wait(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.wait() != 0:
            raise SystemExit(f"error: a gym process exited with {proc.returncode}: {' '.join(proc.args)}")


def heldout(root: Path, profile: str, folders: dict[str, Path], n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arms' last weights, greedy on the same held-out scenarios: strict PASS, each arm's paired difference
    from "before" (and "ahead" from "after"), and the per-scenario outcomes (ids and 0/1)."""
    curve = HeldoutCurve.of_run(root, load_params(root / "params.yaml", profile), n)
    points = {arm: curve.point(folder) for arm, folder in folders.items()}
    pairs = [(a, "before") for a in points if a != "before" and "before" in points]
    pairs += [("ahead", "after")] if {"ahead", "after"} <= set(points) else []
    row: dict[str, Any] = {}
    for opp in ("advpool", "coop"):
        row[opp] = {arm: sum(point[f"passes_{opp}"]) / n for arm, point in points.items()}
        for arm, base in pairs:
            low, high = paired_bootstrap(points[base][f"passes_{opp}"], points[arm][f"passes_{opp}"])
            diff = (sum(points[arm][f"passes_{opp}"]) - sum(points[base][f"passes_{opp}"])) / n
            row[opp][f"{arm}_minus_{base}"] = [diff, low, high]
    runs = {
        "scenario_ids": [sc.scenario_id for sc in curve.held],
        "strict_pass": {arm: {opp: "".join(str(int(v)) for v in point[f"passes_{opp}"]) for opp in ("advpool", "coop")}
                        for arm, point in points.items()},
    }  # fmt: skip
    return row, runs


def gyms(root: Path, profile: str, arm: str, steps: int, seeds: list[int], tmp: Path, save: bool) -> dict[str, Any]:
    """``arm``'s gyms, one per seed, at once; the mean of their summaries. ``save`` keeps the first seed's weights."""
    outs = [tmp / f"{arm}_{len(seeds)}_{s}.json" for s in seeds]
    saves = [tmp / f"{arm}_model" if save and i == 0 else None for i in range(len(seeds))]
    wait([launch(root, profile, arm, steps, s, o, m) for s, o, m in zip(seeds, outs, saves, strict=True)])
    runs = [summary(json.loads(out.read_text())) for out in outs]
    return {k: round(statistics.mean(r[k] for r in runs), 3) for k in runs[0]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line: the run's folder, the steps and arms timed, and the child process's own flags."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a default run's folder (DA0, the simulator, data/scenarios)")
    parser.add_argument("--steps", type=int, default=12, help="optimizer steps per gym (the first is a warm-up)")
    parser.add_argument("--seed", type=int, default=0, help="the RL seed (two processes: this and the next)")
    parser.add_argument("--eval-scenarios", type=int, default=240, help="held-out scenarios (0: no held-out play)")
    parser.add_argument("--arms", default="before,after,ahead,ahead_all", help="the arms timed alone, in this order")
    parser.add_argument("--two", default="before,after", help="the arms timed two gyms at once ('': none)")
    parser.add_argument("--runs-json", type=Path, help="every arm's per-scenario held-out outcomes (ids, 0/1)")
    parser.add_argument("--profile", default="default", help="the params profile the run was made with")
    parser.add_argument("--child", choices=sorted(ARMS), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Each arm's gym timed alone and two at once, then their agents played held-out (``--child``: one gym)."""
    args = parse_args(argv)
    root = args.root.resolve()
    if args.child:
        child(root, args.profile, args.child, args.steps, args.seed, args.out, args.save)
        return 0
    arms, two_arms = [a for a in args.arms.split(",") if a], [a for a in args.two.split(",") if a]
    unknown = sorted(set(arms + two_arms) - set(ARMS))
    if unknown or not arms:
        raise SystemExit(f"error: unknown arms {unknown or arms}; choose from {', '.join(ARMS)}")
    if args.steps < 2:
        raise SystemExit("error: --steps must be >= 2 (the first step is a warm-up)")
    missing = [f for f in ("params.yaml", "data/scenarios/gym.jsonl", "models/agent_sft") if not (root / f).exists()]
    if missing:
        raise SystemExit(f"error: {root}: no {', '.join(missing)} (a finished default run's folder)")
    run_params(root, args.profile)
    with tempfile.TemporaryDirectory(prefix="sparring-steptime-") as scratch:
        tmp = Path(scratch)
        one: dict[str, Any] = {}
        for arm in arms:  # one process: each arm's gym alone
            print(f"{arm}: one gym of {args.steps} steps alone", flush=True)
            one[arm] = gyms(root, args.profile, arm, args.steps, [args.seed], tmp, save=True)
            print(f"  {one[arm]}", flush=True)
        two: dict[str, Any] = {}
        for arm in two_arms:  # two processes: two gyms of the same arm at once
            print(f"{arm}: two gyms of {args.steps} steps at once (seeds {args.seed}, {args.seed + 1})", flush=True)
            two[arm] = gyms(root, args.profile, arm, args.steps, [args.seed, args.seed + 1], tmp, save=False)
            print(f"  {two[arm]}", flush=True)
        folders = {arm: tmp / f"{arm}_model" for arm in arms}
        held, runs = heldout(root, args.profile, folders, args.eval_scenarios) if args.eval_scenarios else ({}, {})
    base = one.get("before", {}).get("step_seconds")
    ratio = {arm: round(one[arm]["step_seconds"] / base, 3) for arm in arms if base and arm != "before"}
    base_two = two.get("before", {}).get("step_seconds")
    ratio_two = {arm: round(two[arm]["step_seconds"] / base_two, 3) for arm in two if base_two and arm != "before"}
    print("seconds per step, one gym: " + ", ".join(f"{a} {one[a]['step_seconds']:.2f}" for a in arms)
          + f"; ratio to before {ratio} (goal <= 0.6)")  # fmt: skip
    if two:
        print("two gyms at once: " + ", ".join(f"{a} {two[a]['step_seconds']:.2f}" for a in two) + f"; {ratio_two}")
    for opp, row in held.items():
        diffs = "; ".join(f"{k} {v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]" for k, v in row.items() if "_minus_" in k)
        values = ", ".join(f"{k} {v:.3f}" for k, v in row.items() if "_minus_" not in k)
        print(f"held-out {opp} strict PASS at step {args.steps}: {values}; {diffs}")
    if args.runs_json and runs:
        write_json({"steps": args.steps, "seed": args.seed, "root": str(root), **runs}, args.runs_json)
    print(json.dumps({
        "steps": args.steps, "seed": args.seed,
        "step_seconds": {arm: one[arm]["step_seconds"] for arm in arms},
        "ratio": ratio, "one_process": one,
        "two_processes": {**two, "ratio": ratio_two}, "heldout": held,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
