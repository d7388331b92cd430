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
``played_expert`` and ``played_escalating`` play the persona-rate sampler through the world (``--played-draws``
draws, default 20; 0 skips them): a scripted customer steered to each drawn ending (it leaves, asks for a person,
or cooperates) against the plain expert and against the escalating one (agents/escalation.py) that the fidelity
replays and the simulator's gym use since issue 44, with the endings read off the world as the replays read them.

Usage: ``python benchmarks/simulator_fidelity.py --run seed0=DIR [--run seed1=DIR ...]`` reads finished runs
(``--ceiling-only N``: only the ceiling block of each run's first N held-out sessions, which needs only its
ingest stage), or
``--seeds 0 1 2 [--workdir DIR]`` first runs, per seed, the stages up to `simulator_rl` in a copy of the project
under ``--workdir/seed_<n>`` (its params set to that seed and the profile); a copy whose simulator_rl report is
already there for that seed and profile is not run again. ``--warm-start DIR --seeds 0 1`` shares one warm start:
each ``--workdir/rl_seed_<n>`` gets DIR's data, judge, simulator_sft and DA0 and runs only simulator_rl under seed
n, so the seeds differ in the RL's sampling and in the fidelity rollouts' sampling, not in the warm start.
``--set simulator_rl.grpo.learning_rate=1e-3`` (repeatable) sets a params.yaml value in each new copy (an arm: give
it its own ``--workdir``).
Prints a table per seed, the means and, last, one JSON object ``{"sft": {metric: mean}, "rl": {...}, "seeds":
{label: {"sft": {...}, "rl": {...}, "rl_better_on": n, "ceiling": {...}}}, "rl_better_on": n, "faithfulness_kept":
bool}``; ``--redraws K`` adds ``redrawn``: both simulators measured again under K more sampling seeds on the
same sessions (means, spreads, each draw); ``--out FILE`` also writes it to FILE with each run's per-session
records (session id, persona, real and simulated ending, trajectory distance, faithful; no texts) under
``sessions``. Exit 2, naming the path, when a run or report is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.run_folders import BadRun, copy_command, parse_runs, prepare_copy
from sparring.atomic import write_json
from sparring.evaluate.fidelity import better_count

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


def _dialogues(root: Path, n: int) -> tuple[Any, Any]:
    """A run's ingested training dialogues and its first ``n`` held-out ones."""
    from sparring.catalog import Catalog

    data = Catalog(root)
    return data.dialogues("train"), data.dialogues("test").head(n)


def ending_ceiling(root: Path, n: int, draws: int = 500) -> dict[str, dict[str, float]]:
    """The persona-rate sampler and its bounds on a run's first ``n`` held-out sessions (evaluate.ending_ceiling)."""
    from sparring.evaluate.ending_ceiling import ending_ceiling as sampled

    return sampled(*_dialogues(root, n), draws)


def played_ceiling(root: Path, n: int, draws: int = 20, seed: int = 0) -> dict[str, dict[str, float]]:
    """The same, played through the world against both experts (evaluate.ending_ceiling.played_ceiling)."""
    from sparring.evaluate.ending_ceiling import played_ceiling as played

    return played(*_dialogues(root, n), draws, seed)


# What --warm-start shares with each RL seed's copy: the stages simulator_rl reads, as they finished there.
WARM_OUTPUTS = ("data", "models/tokenizer", "models/judge", "models/simulator_sft", "models/agent_sft", "reports")


def share_warm_start(warm: Path, root: Path) -> None:
    """``warm``'s finished stages up to simulator_sft and agent_sft copied into the fresh copy ``root``."""
    for rel in WARM_OUTPUTS:
        if not (warm / rel).exists():
            raise BadRun(f"{warm / rel} is missing: --warm-start wants a folder that ran the stages to simulator_sft")
    for rel in WARM_OUTPUTS:
        shutil.copytree(warm / rel, root / rel, dirs_exist_ok=True)
    for stale in (root / "reports" / "simulator_rl.json", root / "reports" / "metrics.json"):
        stale.unlink(missing_ok=True)


def set_params(root: Path, settings: Sequence[str]) -> None:
    """Each ``KEY=VALUE`` of ``settings`` (a dotted params.yaml key, a YAML value) written into ``root``'s params."""
    import yaml

    path = root / "params.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    for item in settings:
        key, _, value = item.partition("=")
        *parents, leaf = key.split(".")
        node = raw
        for name in parents:
            if not isinstance(node.get(name), dict):
                raise BadRun(f"--set {item!r}: params.yaml has no section {name!r}")
            node = node[name]
        if leaf not in node:
            raise BadRun(f"--set {item!r}: params.yaml has no key {key!r}")
        node[leaf] = yaml.safe_load(value)
        with contextlib.suppress(TypeError, ValueError):  # YAML 1.1 reads 1e-3 as a string: it is a number
            node[leaf] = float(node[leaf]) if isinstance(node[leaf], str) else node[leaf]
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")


def run_seed(workdir: Path, seed: int, profile: str, warm: Path | None = None, settings: Sequence[str] = ()) -> Path:
    """The copy for ``seed`` with its simulator_rl report, running the stages up to it unless already there; with
    ``warm``, only simulator_rl runs, from ``warm``'s simulator_sft, DA0 and judge (the RL seed's variance alone)."""
    root = workdir / (f"rl_seed_{seed}" if warm else f"seed_{seed}")
    try:
        read_report(root, profile, seed)
        return root
    except BadRun:
        pass
    if not (root / "params.yaml").is_file():
        prepare_copy(ROOT, root, seed, profile)
        set_params(root, settings)
        if warm is not None:
            share_warm_start(warm, root)
    cli, env = copy_command(root)
    print(f"seed {seed}: stages up to simulator_rl in {root} (logs: {root / 'scratch'}/<stage>.stage.log)", flush=True)
    (root / "scratch").mkdir(exist_ok=True)
    for wave in WAVES[-1:] if warm else WAVES:
        logs = {stage: root / "scratch" / f"{stage}.stage.log" for stage in wave}
        with ExitStack() as files:
            running = {
                stage: subprocess.Popen(
                    [*cli, "stage", stage],
                    cwd=root,
                    env=env,
                    stdout=files.enter_context(logs[stage].open("w")),
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
            "sft": r["sft"],
            "rl": r["rl"],
            "rl_better_on": better_count(r["sft"], r["rl"]),
            "ceiling": ceilings[label],
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


def run_seed_of(root: Path) -> int:
    """The seed a run's ingest stage ran with (0 when its report is missing)."""
    try:
        return int(json.loads((root / "reports" / "ingest.json").read_text(encoding="utf-8")).get("seed", 0))
    except (OSError, ValueError):
        return 0


def ceilings_of(runs: dict[str, Path], n: dict[str, int], seeds: dict[str, int], played_draws: int) -> dict:
    """Each run's ceiling block: the persona-rate samplers and, with ``played_draws`` > 0, the same played."""
    out = {}
    for label, root in runs.items():
        out[label] = ending_ceiling(root, n[label])
        if played_draws:
            out[label].update(played_ceiling(root, n[label], played_draws, seeds[label]))
    return out


REDRAWN = ("outcome_f1", "group_outcome_rate_error", "trajectory_distance", "sim_faithfulness", "discriminator_auc")


def redraw(root: Path, report: dict[str, Any], profile: str, draws: int) -> dict[str, Any]:
    """Both simulators of a finished run (``report``: its simulator_rl report) measured again on the same held-out
    sessions and scenarios under ``draws`` further sampling seeds (derived from the run's seed and the draw's
    number, none an RL seed): the mean and spread of each ending figure per simulator and how many of the three
    compared figures RL wins on the means. One draw of 120 sessions moves the group error by ~0.05 between seeds
    (docs/results.md), the size of the differences being judged."""
    from sparring.catalog import SIMULATOR_RL, SIMULATOR_SFT, Catalog
    from sparring.drivers.simulator_rl import measured_policy
    from sparring.evaluate.fidelity import simulator_fidelity
    from sparring.params import load_params
    from sparring.seeds import derive_seed

    cfg = load_params(root / "params.yaml", profile).simulator_rl
    data, seed = Catalog(root), int(report.get("seed", 0))
    heldout, test = data.scenarios("heldout", cfg.eval_dialogues), data.dialogues("test")
    judge = data.judge_models()
    out: dict[str, Any] = {}
    for side, folder in (("sft", SIMULATOR_SFT), ("rl", SIMULATOR_RL)):
        policy = measured_policy(*data.checkpoint(folder), cfg)
        kw = {"max_dialogues": cfg.eval_dialogues, "perplexity": False}
        seeds = [derive_seed(seed, f"redraw_{i}") for i in range(1, draws + 1)]
        rows = [simulator_fidelity(policy, heldout, test, *judge, seed=s, **kw) for s in seeds]
        out[side] = {m: float(np.mean([r[m] for r in rows])) for m in REDRAWN}
        out[side + "_sd"] = {m: float(np.std([r[m] for r in rows], ddof=1)) if draws > 1 else 0.0 for m in REDRAWN}
        out[side + "_draws"] = [{m: r[m] for m in REDRAWN} for r in rows]
    out["rl_better_on"] = better_count(out["sft"], out["rl"])
    return out


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, dict[str, Path]]:
    """The command line, and its ``--run`` folders by label."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", default=[], help="LABEL=DIR: a project folder that ran simulator_rl")
    parser.add_argument("--seeds", type=int, nargs="+", default=[], help="run the stages for these seeds first")
    workdir = ROOT / "scratch" / "simulator_fidelity"
    parser.add_argument("--workdir", type=Path, default=workdir, help="where --seeds runs")
    parser.add_argument(
        "--warm-start", type=Path, help="with --seeds: run only simulator_rl per seed, from this folder's stages"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="with --seeds: a params.yaml value per copy"
    )
    parser.add_argument("--profile", default="default", help="the profile every run must have run (default)")
    parser.add_argument("--played-draws", type=int, default=20, help="draws of the played ceiling (0: skip it)")
    parser.add_argument(
        "--ceiling-only", type=int, metavar="N", help="only the ceiling of each --run's first N held-out sessions"
    )
    parser.add_argument(
        "--redraws", type=int, default=0, help="measure both simulators again under this many sampling seeds"
    )
    parser.add_argument(
        "--out", type=Path, help="write the summary and each run's per-session records (no texts) to this JSON file"
    )
    args = parser.parse_args(argv)
    if not args.run and not args.seeds:
        parser.error("give --run LABEL=DIR (finished runs) or --seeds N ... (runs the stages per seed)")
    return args, parse_runs(parser, args.run)


def main(argv: Sequence[str] | None = None) -> int:
    """Each run's simulator_rl report (the stages run first for ``--seeds``) and ceilings, compared and printed."""
    args, runs = parse_args(argv)
    try:
        if args.ceiling_only:  # needs only the run's ingested dialogues (the ingest stage)
            seeds = {label: run_seed_of(root) for label, root in runs.items()}
            ceilings = ceilings_of(runs, {label: args.ceiling_only for label in runs}, seeds, args.played_draws)
            for label, block in ceilings.items():
                for name, c in block.items():
                    print(f"{label} ceiling {name:18s} " + ", ".join(f"{k} {v:.3f}" for k, v in c.items()))
            print(json.dumps(ceilings))
            return 0
        for seed in args.seeds:
            runs[f"{'rl_' if args.warm_start else ''}seed{seed}"] = run_seed(
                args.workdir, seed, args.profile, args.warm_start, args.set
            )
        reports = {label: read_report(root, args.profile) for label, root in runs.items()}
        n = {label: int(r["rl"]["n_replayed"]) for label, r in reports.items()}
        ceilings = ceilings_of(
            runs, n, {label: int(r.get("seed", 0)) for label, r in reports.items()}, args.played_draws
        )
    except (BadRun, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = summarize(reports, ceilings)
    print_tables(summary)
    if args.redraws:
        summary["redrawn"] = {
            label: redraw(root, reports[label], args.profile, args.redraws) for label, root in runs.items()
        }
        for label, r in summary["redrawn"].items():
            print(f"\n{label}, {args.redraws} more draws: RL better on {r['rl_better_on']} of 3 (means)")
            for m in REDRAWN:
                sft, rl = f"{r['sft'][m]:.3f} ± {r['sft_sd'][m]:.3f}", f"{r['rl'][m]:.3f} ± {r['rl_sd'][m]:.3f}"
                print(f"{m:28s} sft {sft}   rl {rl}")
    if args.out:  # docs/runs/: every session's ending and distance per simulator, so the figures can be recomputed
        sessions = {label: r.get("sessions", {}) for label, r in reports.items()}
        write_json({**summary, "sessions": sessions}, args.out)  # atomic: no half-written file where one stood
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
