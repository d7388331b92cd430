"""Co-evolution acceptance over seeds: the whole pipeline once per seed, then the co-evolution issue's criteria.

For each seed, a copy of the project (its sources and params.yaml with that seed and profile; generated folders
left out) under ``--workdir/seed_<n>`` runs ``sparring run``. A copy that already holds this profile's finished
``reports/metrics.json`` is not run again, so an interrupted benchmark resumes seed by seed (a default-profile
seed takes the better part of an hour on a 2-core laptop). Then, per seed:

1. ``strict_pass_advpool``: the final agent's >= 2x DA0's, both against the held-out pool of adversary generations;
   the final agent's routing error vs the cooperative simulator (``1 - routing_acc_coop``) is 0 ("stays 0, or
   falls to 0"; its change from DA0's is printed too).
2. The adversary's first gym: its success against DA0 (``adv_success``, the judge's win rule) rises from the
   simulator it starts from to its first generation, while its faithfulness stays >= 0.8. Both are played here
   against DA0 on the held-out scenarios (the pipeline's report pools every generation against every agent).
3. The W_DA trajectory, and the pipeline's wall seconds (every stage, evaluation included; goal ~10 min).

Prints one table per seed and the mean over seeds; the last line is one JSON object.
Usage: ``python benchmarks/coevolution_acceptance.py [--profile default] [--seeds 0 1 2] [--workdir DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pipelines.project import copy_project

ROOT = Path(__file__).resolve().parents[1]
FAITHFUL = 0.8  # the adversary's faithfulness floor in its first gym
POOL_GAIN = 2.0  # the final agent's strict PASS vs the adversary pool, as a multiple of DA0's
WALL_GOAL_S = 600.0


def prepare_copy(src: Path, dst: Path, seed: int, profile: str) -> Path:
    """``src`` copied to ``dst`` (:func:`pipelines.project.copy_project`), its params set to ``seed`` and
    ``profile``; relative data paths (``../shared/...``) made absolute, since the copy lives elsewhere."""

    def absolute(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (str((src / v).resolve()) if k == "path" and isinstance(v, str) and v else absolute(v))
                for k, v in node.items()
            }
        return node

    def edit(raw: dict[str, Any]) -> None:
        raw["seed"], raw["profile"], raw["ingest"] = seed, profile, absolute(raw["ingest"])

    return copy_project(src, dst, edit)


def finished(root: Path, profile: str, seed: int) -> dict[str, Any] | None:
    """This copy's reports/metrics.json when it is complete for ``profile`` and ``seed``, else None."""
    path = root / "reports" / "metrics.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if report.get("profile") == profile and report.get("seed") == seed else None


def run_pipeline(root: Path) -> None:
    """``sparring run`` in ``root``, its output in root/run.log; a failure stops the benchmark, naming the log."""
    env = {**os.environ, "SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster")}
    env.pop("SPARRING_PROFILE", None)
    (root / ".dagster").mkdir(exist_ok=True)
    cli = Path(sys.executable).parent / "sparring"
    with open(root / "run.log", "w", encoding="utf-8") as log:
        done = subprocess.run([str(cli), "run"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"the pipeline failed in {root} (exit {done.returncode}); see {root / 'run.log'}")


def first_gym(root: Path, profile: str) -> dict[str, float]:
    """DA0 against the simulator and against the first adversary generation on the held-out scenarios: the
    adversary's success, misroutes and faithfulness before and after its first gym (empty if it never trained)."""
    from assets.coevolution import N_CYCLES, cycle_dir
    from sparring.agents.checkpoints import load_checkpoint
    from sparring.agents.policies import LMPolicy
    from sparring.evaluate.play import adversary_customer, adversary_parts, customer_policy
    from sparring.judge.loading import load_judge
    from sparring.params import load_params
    from sparring.rollout import run_episodes
    from sparring.runtime import apply_torch_threads
    from sparring.seeds import derive_seed
    from sparring.train.cycle_state import CycleState
    from sparring.world.scenarios import load_scenarios

    p = load_params(root / "params.yaml", profile)
    apply_torch_threads(p.runtime.torch_threads)
    state = CycleState.load(root / cycle_dir(N_CYCLES))
    if not state.adversary_dirs:
        return {}
    a_cfg, c_cfg = p.coevolution.agent_grpo, p.coevolution.adversary_grpo
    scenarios = load_scenarios(root / "data" / "scenarios" / "heldout.jsonl")[: p.evaluate.eval_scenarios]
    judge = load_judge(root / "models" / "judge", p.judge, a_cfg.max_turns)
    model, tok = load_checkpoint(root / "models" / "agent_sft")
    da0 = LMPolicy(model.eval(), tok, "agent", max_new_tokens=a_cfg.max_new_tokens, greedy=True)
    out: dict[str, float] = {}
    for name, folder in (("simulator", state.simulator_dir), ("first_adversary", state.adversary_dirs[0])):
        customer_model, _ = load_checkpoint(root / folder)
        customer = customer_policy(customer_model.eval(), tok, c_cfg.max_new_tokens, c_cfg.temperature)
        episodes = run_episodes(
            scenarios,
            da0,
            adversary_customer(customer, p.coevolution.adversary_opening),
            max_turns=a_cfg.max_turns,
            max_calls_per_turn=a_cfg.max_calls_per_turn,
            seed=derive_seed(p.seed, "heldout"),
        )
        out.update(adversary_parts(judge.score(episodes), f"_{name}"))
    return out


def criteria(report: dict[str, Any], gym: dict[str, float], wall_s: float) -> dict[str, Any]:
    """The acceptance figures of one seed and whether each criterion holds."""
    da0, final = report["agents"]["da0"], report["agents"]["final"]
    sp_da0, sp_final = da0["strict_pass_advpool"], final["strict_pass_advpool"]
    err_da0, err_final = 1 - da0["routing_acc_coop"], 1 - final["routing_acc_coop"]
    figures: dict[str, Any] = {
        "strict_pass_advpool_da0": sp_da0,
        "strict_pass_advpool_final": sp_final,
        "advpool_gain": sp_final / sp_da0 if sp_da0 > 0 else (float("inf") if sp_final > 0 else 0.0),
        "routing_error_coop_da0": err_da0,
        "routing_error_coop_final": err_final,
        "routing_error_coop_change": err_final - err_da0,
        "w_da_trajectory": report.get("w_da_trajectory", []),
        "adversary_generations": report.get("adversary_generations", 0),
        "pipeline_wall_s": wall_s,
        **gym,
    }
    figures["pass_advpool_gain"] = sp_final >= POOL_GAIN * sp_da0 and sp_final > 0
    figures["pass_routing_coop"] = err_final < 1e-9
    if gym:
        figures["pass_first_gym"] = (
            gym["adv_success_first_adversary"] > gym["adv_success_simulator"]
            and gym["adv_faithfulness_first_adversary"] >= FAITHFUL
        )
    else:
        figures["pass_first_gym"] = False  # the adversary never trained: nothing shows it learnt to conceal
    figures["pass_wall"] = wall_s <= WALL_GOAL_S
    return figures


def pipeline_seconds(root: Path) -> float:
    """Wall seconds of the last `sparring run` in this copy, from its Dagster run record (stages may overlap,
    so their own wall seconds do not add up to it)."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(root / ".dagster")) as instance:
        records = instance.get_run_records(limit=1)
        if not records or records[0].start_time is None or records[0].end_time is None:
            sys.exit(f"{root / '.dagster'}: no finished pipeline run")
        return records[0].end_time - records[0].start_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="default")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workdir", type=Path, default=ROOT / "scratch" / "acceptance")
    args = parser.parse_args()

    rows = []
    for seed in args.seeds:
        root = args.workdir / f"{args.profile}_seed_{seed}"
        report = finished(root, args.profile, seed)
        if report is None:
            print(f"seed {seed}: running the {args.profile} pipeline in {root} (log: {root / 'run.log'})", flush=True)
            t = time.perf_counter()
            run_pipeline(prepare_copy(ROOT, root, seed, args.profile))
            print(f"seed {seed}: pipeline finished in {time.perf_counter() - t:.0f} s", flush=True)
            report = finished(root, args.profile, seed)
            if report is None:
                sys.exit(f"{root / 'reports' / 'metrics.json'}: missing or not this profile's and seed's")
        else:
            print(f"seed {seed}: reusing the finished run in {root}", flush=True)
        row = {"seed": seed, **criteria(report, first_gym(root, args.profile), pipeline_seconds(root))}
        rows.append(row)
        print(json.dumps(row), flush=True)

    numeric = [k for k, v in rows[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "seed"]
    mean = {k: sum(r[k] for r in rows if k in r) / sum(1 for r in rows if k in r) for k in numeric}
    print(f"\n{'figure':38s}" + "".join(f"seed {r['seed']:<6d}" for r in rows) + "mean")
    for k in numeric:
        print(f"{k:38s}" + "".join(f"{r.get(k, float('nan')):<11.3f}" for r in rows) + f"{mean[k]:.3f}")
    passes = [k for k in rows[0] if k.startswith("pass_")]
    for k in passes:
        print(f"{k:38s}" + "".join(f"{str(r[k]):<11s}" for r in rows) + f"{sum(r[k] for r in rows)}/{len(rows)}")
    print(json.dumps({"profile": args.profile, "seeds": args.seeds, "per_seed": rows, "mean": mean,
                      **{k: all(r[k] for r in rows) for k in passes}}))  # fmt: skip


if __name__ == "__main__":
    main()
