"""TRACER's two stages side by side, per seed: the SFT simulator (stage 1) and the RL one (stage 2) measured by the
`simulator_rl` stage on the same held-out sessions (reports/simulator_rl.json of one project folder per seed).

Issue 29's acceptance, per seed and on the mean over seeds: the RL simulator beats the SFT one on at least two of
outcome F1 (higher), group outcome-rate error (lower) and trajectory distance (lower), with faithfulness no lower;
DA0's strict PASS against each simulator is printed beside them.

Beside them, each run's ceiling on the same held-out sessions (``ceiling``): a simulator knows only what its goal
says (intent, persona, opening; no ending), so the best it can do for ending fidelity is to end as often as each
persona does in the training dialogues. ``persona_rates`` samples exactly that (500 draws, seeded: mean F1 and
group error); ``no_escalation`` is the same with escalations turned into resolutions: the dialogues' agents
escalate on their own, while the scripted expert hands over only after two failed identity checks, two refused
calls or a second no to a right confirmation, which a customer can hardly bring about (both simulators escalated 0
of 240 sessions in docs/results.md's run); ``always_resolved`` is what a simulator that never leaves reaches.

Usage: ``python benchmarks/simulator_fidelity.py --run seed0=DIR [--run seed1=DIR ...]`` reads finished runs, or
``--seeds 0 1 2 [--workdir DIR]`` first runs, per seed, the stages up to `simulator_rl` in a copy of the project
under ``--workdir/seed_<n>`` (its params set to that seed and the profile); a copy whose simulator_rl report is
already there for that seed and profile is not run again. Prints a table per seed, the means and, last, one JSON
object ``{"sft": {metric: mean}, "rl": {...}, "seeds": {label: {"sft": {...}, "rl": {...}, "rl_better_on": n,
"ceiling": {...}}}, "rl_better_on": n, "faithfulness_kept": bool}``. Exit 2, naming the path, when a run or
report is missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from assets.simulator_rl import better_count

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coevolution_acceptance import BadRun, copy_command, parse_runs, prepare_copy  # noqa: E402  (a sibling script)

ROOT = Path(__file__).resolve().parents[1]
# The stages up to simulator_rl, in waves: a wave's stages need nothing of each other and run at once.
WAVES = (
    ("ingest",), ("scenarios",), ("tokenizer",), ("judge_models",), ("simulator_sft", "agent_sft"), ("simulator_rl",)
)  # fmt: skip
SHOWN = (
    "outcome_f1", "group_outcome_rate_error", "trajectory_distance", "sim_faithfulness", "discriminator_auc",
    "false_negative_rate", "agent_strict_pass", "sim_rate_resolved", "sim_rate_escalated", "sim_rate_abandoned",
)  # fmt: skip
FAITHFUL_SLACK = 1e-9  # "no lower": equal up to float noise


def read_report(root: Path, profile: str, seed: int | None = None) -> dict[str, Any]:
    path = root / "reports" / "simulator_rl.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise BadRun(f"{path} is missing: run the simulator_rl stage there first") from e
    except (OSError, ValueError) as e:
        raise BadRun(f"{path} is unreadable: {e}") from e
    if report.get("profile") != profile or (seed is not None and report.get("seed") != seed):
        raise BadRun(f"{path} is of profile {report.get('profile')!r}, seed {report.get('seed')}, not {profile!r}")
    if "sft" not in report or "rl" not in report:
        raise BadRun(f"{path} holds no 'sft' and 'rl' fidelity: rerun the simulator_rl stage")
    return report


def ending_ceiling(root: Path, n: int, draws: int = 500) -> dict[str, dict[str, float]]:
    """Outcome F1 and group outcome-rate error of persona-rate samplers on the first ``n`` held-out sessions."""
    import polars as pl

    from sparring.data.synthetic import OUTCOMES
    from sparring.evaluate.fidelity import group_outcome_rate_error, outcome_f1

    train = pl.read_parquet(root / "data" / "ingest" / "dialogues_train.parquet")
    test = pl.read_parquet(root / "data" / "ingest" / "dialogues_test.parquet").head(n)
    real, personas = test["outcome"].to_list(), test["persona"].to_list()
    rates = {}
    for persona in set(personas):
        ends = train.filter(pl.col("persona") == persona)["outcome"].to_list() or list(OUTCOMES)
        rates[persona] = [ends.count(o) / len(ends) for o in OUTCOMES]
    rng = np.random.default_rng(0)

    def score(simulated: list[str]) -> tuple[float, float]:
        return outcome_f1(real, simulated), group_outcome_rate_error(real, simulated, personas)

    sampled = [[str(rng.choice(OUTCOMES, p=rates[p])) for p in personas] for _ in range(draws)]
    kinds = {
        "persona_rates": [score(s) for s in sampled],
        "no_escalation": [score(["resolved" if o == "escalated" else o for o in s]) for s in sampled],
        "always_resolved": [score(["resolved"] * len(real))],
    }
    return {
        name: {
            "outcome_f1": float(np.mean([f for f, _ in got])),
            "group_outcome_rate_error": float(np.mean([e for _, e in got])),
        }
        for name, got in kinds.items()
    }


def run_seed(workdir: Path, seed: int, profile: str) -> Path:
    """The copy for ``seed`` with its simulator_rl report, running the stages up to it unless already there."""
    root = workdir / f"seed_{seed}"
    try:
        read_report(root, profile, seed)
        return root
    except BadRun:
        pass
    if not (root / "params.yaml").is_file():
        prepare_copy(ROOT, root, seed, profile)
    cli, env = copy_command(root)
    print(f"seed {seed}: stages up to simulator_rl in {root} (logs: {root / 'scratch'}/<stage>.stage.log)", flush=True)
    (root / "scratch").mkdir(exist_ok=True)
    for wave in WAVES:
        logs = {stage: root / "scratch" / f"{stage}.stage.log" for stage in wave}
        with ExitStack() as files:
            running = {
                stage: subprocess.Popen(
                    [*cli, "stage", stage], cwd=root, env=env, stdout=files.enter_context(logs[stage].open("w")),
                    stderr=subprocess.STDOUT,
                )
                for stage in wave
            }
            failed = [stage for stage, process in running.items() if process.wait() != 0]
        if failed:
            raise BadRun(f"stage {failed[0]} failed in {root}; see {logs[failed[0]]}")
    return root


def summarize(reports: dict[str, dict[str, Any]], ceilings: dict[str, Any]) -> dict[str, Any]:
    seeds = {
        label: {
            "sft": r["sft"], "rl": r["rl"], "rl_better_on": better_count(r["sft"], r["rl"]), "ceiling": ceilings[label]
        }
        for label, r in reports.items()
    }
    shared = [m for m in SHOWN if all(m in s[side] for s in seeds.values() for side in ("sft", "rl"))]
    mean = {side: {m: float(np.mean([s[side][m] for s in seeds.values()])) for m in shared} for side in ("sft", "rl")}
    kept = mean["rl"].get("sim_faithfulness", 0.0) >= mean["sft"].get("sim_faithfulness", 0.0) - FAITHFUL_SLACK
    return {**mean, "seeds": seeds, "rl_better_on": better_count(mean["sft"], mean["rl"]), "faithfulness_kept": kept}


def print_tables(summary: dict[str, Any]) -> None:
    blocks = [*summary["seeds"].items(), ("mean", summary)]
    for label, s in blocks:
        print(f"\n{label}: RL better on {s['rl_better_on']} of 3 (outcome F1, group error, trajectory distance)")
        print(f"{'metric':28s} {'sft':>8s} {'rl':>8s}")
        for m in SHOWN:
            if m in s["sft"] and m in s["rl"]:
                print(f"{m:28s} {s['sft'][m]:8.3f} {s['rl'][m]:8.3f}")
        for name, c in s.get("ceiling", {}).items():
            print(f"ceiling {name:20s} F1 {c['outcome_f1']:.3f}, group error {c['group_outcome_rate_error']:.3f}")
    print(f"\nfaithfulness kept on the mean: {summary['faithfulness_kept']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", default=[], help="LABEL=DIR: a project folder that ran simulator_rl")
    parser.add_argument("--seeds", type=int, nargs="+", default=[], help="run the stages for these seeds first")
    workdir = ROOT / "scratch" / "simulator_fidelity"
    parser.add_argument("--workdir", type=Path, default=workdir, help="where --seeds runs")
    parser.add_argument("--profile", default="default", help="the profile every run must have run (default)")
    args = parser.parse_args(argv)
    if not args.run and not args.seeds:
        parser.error("give --run LABEL=DIR (finished runs) or --seeds N ... (runs the stages per seed)")
    runs = parse_runs(parser, args.run)
    try:
        for seed in args.seeds:
            runs[f"seed{seed}"] = run_seed(args.workdir, seed, args.profile)
        reports = {label: read_report(root, args.profile) for label, root in runs.items()}
        ceilings = {
            label: ending_ceiling(root, int(reports[label]["rl"]["n_replayed"])) for label, root in runs.items()
        }
    except (BadRun, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = summarize(reports, ceilings)
    print_tables(summary)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
