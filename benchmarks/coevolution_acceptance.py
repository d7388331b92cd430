"""Co-evolution acceptance over seeds, read from finished pipeline runs (one project folder per seed, each one in
which ``sparring run`` finished): reports/metrics.json and reports/evaluate.json's per-episode outcomes.

Per seed, then on the mean over seeds:

1. ``expert_ceiling``: the goal-knowing expert's strict PASS against the held-out adversary pool
   (``ceiling.strict_pass_advpool``) >= 0.95: the pool is winnable.
2. ``pool_half_gap``: the final agent's strict PASS vs the pool >= DA0's + 1/2 (ceiling - DA0's), judged on the
   mean over seeds; per seed, final - DA0 over (scenario, draw) with its 95% interval resampling scenarios, each
   with its draws (both agents met the same generation and customer draws on each scenario; 2,000 resamples,
   seeded: :func:`~sparring.evaluate.episodes.paired_gain`).
3. ``coop_routing_camo``: the final agent's routing error vs the cooperative simulator (``1 - routing_acc_coop``)
   <= 0.03 and <= DA0's, and its strict PASS vs the camouflaging customer (``_camo``) >= DA0's.
4. ``both_sides_trained``: the agent and the adversary each trained in at least one cycle (every seed).
5. ``first_gym``: the adversary's first gym raised its success against DA0 with faithfulness >= 0.8 (every seed).
   Read from the cycles' arenas, which DA0 still plays until the agent first trains: the arena of the cycle in
   which the adversary first trained (DA0 vs the simulator) against the next cycle's (DA0 vs the first
   generation), with that arena's mean faithfulness (``arena_adv_faithfulness``; for runs from before it was kept,
   the first generation's held-out faithfulness against DA0 in its own cycle's evaluation). "unmeasured" when
   the agent trained first or no arena followed the gym.
6. ``da1_gain``: DA1 - DA0 (agent_rl) strict PASS vs the pool >= +0.05 with its paired 95% interval above 0, from
   metrics.json's ``gains`` (every seed; unmeasured for a run without DA1).
7. ``final_gain``: final - DA0 vs the pool >= +0.08 with its interval above 0 (every seed).
8. ``coop_camo_held``: final - DA0 vs `_coop` and `_camo` no lower than -0.02 (every seed).

Beside them, not criteria: ``strict_pass_advpool_by_generation``, DA0's, DA1's and the final agent's strict PASS
against each adversary generation of the pool (an agent meets generations trained against it; metrics.json's list,
generation 0 the simulator first, or for a run from before it, computed from the episodes: trained generations
only); and ``over_seeds``: for DA1 - DA0 and final - DA0 against ``ref`` and ``advpool``, every run's paired
difference over its (scenario, draw) beside the nested bootstrap over the runs (seed -> scenario -> draw: mean,
interval, IQM, probability of improvement; :func:`~sparring.evaluate.intervals.nested_bootstrap`). Runs from before
draws read as one draw per scenario.

Prints a table per seed, the means, PASS/FAIL/UNMEASURED per criterion, the nested bootstraps and, last, one JSON
object: ``{"seeds": {...}, "mean": {...}, "criteria": {name: true | false | null}, "over_seeds": {"da1-da0":
{"ref": {...}, "advpool": {...}}, "final-da0": {...}}}`` (null: unmeasured). Exit 0 whenever
the runs could be read (this measures, it does not gate); 2, naming the path, when a run folder or file is
missing or unreadable.
Usage: ``python benchmarks/coevolution_acceptance.py --run seed0=DIR --run seed1=DIR [--profile default]``, or
``--seeds 0 1 2 [--workdir DIR]`` to run the pipeline first, once per seed, in a copy of the project under
``--workdir/seed_<n>`` (its params set to that seed and profile); a copy that already finished this profile and
seed is not run again, so an interrupted benchmark resumes seed by seed (~40 min per default-profile seed).
``--warm-start DIR`` with ``--seeds``: every copy shares DIR's warm start (its ingested data, scenario sets, judge,
tokenizer, DA0 and simulator) and runs only agent_rl, the cycles and evaluate, so the seeds differ by the RL seed
alone (the gyms' draws and sampling, the arenas, the held-out opponents' sampling): the variance of SFT (DA0's,
the simulator's and the judge's seeds) and of the scenario draws is left out. ``--runs-json PATH`` writes every
run's per-episode strict PASS (scenario ids and draws per opponent, agent; no texts), so the intervals can be
recomputed.

One file over 400 lines: a benchmark is one script: the figures each criterion reads, the criteria, then the runs
that make them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.credit_arms import nested_line
from benchmarks.run_folders import BadRun, copy_command, copy_stage_outputs, parse_runs, prepare_copy
from sparring.evaluate.episodes import episode_outcomes, outcome_matrix, paired_gain
from sparring.evaluate.intervals import nested_bootstrap
from stagekit.project import declared_stages

ROOT = Path(__file__).resolve().parents[1]

EXPERT_FLOOR = 0.95  # the expert's strict PASS vs the pool: the pool must be winnable
ROUTING_ERROR_MAX = 0.03  # the final agent's routing error vs the cooperative simulator
FAITHFUL = 0.8  # the adversary's faithfulness floor in its first gym
EPS = 1e-9  # rates equal up to float noise compare as equal
NOT_AVERAGED = ("seed", "n_heldout", "n_paired", "draws", "first_gym_cycle", "pool_generations")
CRITERIA = ("expert_ceiling", "pool_half_gap", "coop_routing_camo", "both_sides_trained", "first_gym")
PER_SEED = ("da1_gain", "final_gain", "coop_camo_held")  # issue 63: judged in every seed
DA1_GAIN, FINAL_GAIN, HELD = 0.05, 0.08, 0.02  # DA1 - DA0 and final - DA0 vs the pool; coop and camo held within
NESTED_PAIRS, NESTED_OPPONENTS = (("da1", "da0"), ("final", "da0")), ("ref", "advpool")  # over_seeds


def read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadRun(f"{path}: missing (did `sparring run` finish in this folder?)") from None
    except (OSError, ValueError) as e:
        raise BadRun(f"{path}: unreadable ({e})") from None
    if not isinstance(doc, dict):
        raise BadRun(f"{path}: not a JSON object")
    return doc


def number(doc: dict[str, Any], path: Path, *keys: str) -> float:
    """``doc[k1][k2]...`` as a float, or BadRun naming the file and the key."""
    node: Any = doc
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            raise BadRun(f"{path}: no {'.'.join(keys)}")
        node = node[k]
    if not isinstance(node, int | float) or isinstance(node, bool):
        raise BadRun(f"{path}: {'.'.join(keys)} is not a number ({node!r})")
    return float(node)


def load_run(root: Path, profile: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A finished run's reports/metrics.json and reports/evaluate.json, checked to be ``profile``'s and alike."""
    if not root.is_dir():
        raise BadRun(f"{root}: no such run folder")
    metrics_path, evaluate_path = root / "reports" / "metrics.json", root / "reports" / "evaluate.json"
    metrics, evaluate = read_json(metrics_path), read_json(evaluate_path)
    if metrics.get("profile") != profile:
        raise BadRun(f"{metrics_path}: profile {metrics.get('profile')!r}, expected {profile!r} (--profile)")
    if (evaluate.get("profile"), evaluate.get("seed")) != (metrics["profile"], metrics.get("seed")):
        raise BadRun(f"{evaluate_path}: another run's (profile/seed differ from {metrics_path})")
    if not isinstance(metrics.get("cycles"), list):
        raise BadRun(f"{metrics_path}: no cycles list")
    return metrics, evaluate


def pool_difference(evaluate: dict[str, Any], path: Path, seed: int) -> dict[str, Any]:
    """final - DA0's strict PASS vs the pool over (scenario, draw), with its interval (``paired_gain``);
    ``n_paired`` scenarios of ``draws`` draws each."""
    episodes = evaluate.get("episodes")
    if not episodes:
        return {"final_minus_da0_advpool_ci": None, "ci_note": f"{path}: no per-episode outcomes (an older run)"}
    try:  # the library's paired gain, as evaluate computes metrics.json's `gains`
        _, low, high = paired_gain(episodes, "final", "da0", "advpool", seed)
        keys = episode_outcomes(episodes, "da0", "advpool")
    except (KeyError, TypeError, ValueError) as e:
        raise BadRun(f"{path}: episodes of da0/final vs advpool unreadable ({e!r})") from None
    return {
        "final_minus_da0_advpool_ci": [low, high],
        "n_paired": len({s for s, _ in keys}),
        "draws": len({d for _, d in keys}),
    }


def pool_by_generation(
    evaluate: dict[str, Any], trained: Sequence[str | None], metrics: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Strict PASS vs the pool per adversary generation, per agent: metrics.json's per-agent list where evaluate
    kept it (generation 0, the simulator, first; scenario i dealt to generation i mod G). For a run from before it,
    computed from the episodes: the pool held one generation per adversary gym (``trained``: who trained in each
    cycle; the simulator alone when none did) and ``against_pool`` dealt held-out scenario i to generation i % n,
    played oldest generation first. An agent that trained before an adversary did meets generations trained
    against it."""
    agents = (metrics or {}).get("agents") or {}
    kept = {a: agents[a].get("strict_pass_advpool_by_generation") for a in ("da0", "da1", "final") if a in agents}
    kept = {a: v for a, v in kept.items() if isinstance(v, list) and v}
    if kept:
        return {"pool_generations": max(map(len, kept.values())), "strict_pass_advpool_by_generation": kept}
    episodes = evaluate.get("episodes") or {}
    order = (episodes.get("scenario_ids") or {}).get("advpool")
    if not order:
        return {}
    n = max(1, list(trained).count("adversary"))
    bounds = [sum(len(range(g, len(order), n)) for g in range(i)) for i in range(n + 1)]
    blocks = list(zip(bounds[:-1], bounds[1:], strict=True))
    flags = episodes.get("strict_pass") or {}
    per_gen = {
        agent: [round(sum(map(int, f["advpool"][a:b])) / (b - a), 4) for a, b in blocks]
        for agent, f in flags.items()
        if agent in ("da0", "da1", "final") and "advpool" in f
    }
    return {"pool_generations": n, "strict_pass_advpool_by_generation": per_gen}


def difference_matrices(evaluate: dict[str, Any], path: Path) -> dict[str, dict[str, np.ndarray]]:
    """One run's ``{"da1-da0": {"ref": later - earlier, "advpool": ...}, "final-da0": ...}``: strict PASS
    differences as (n_scenarios, K) arrays over (scenario, draw), for the pairs and opponents the run played."""
    episodes = evaluate.get("episodes") or {}
    out: dict[str, dict[str, np.ndarray]] = {}
    for later, earlier in NESTED_PAIRS:
        for opponent in NESTED_OPPONENTS:
            try:
                a, b = (episode_outcomes(episodes, agent, opponent) for agent in (earlier, later))
            except (KeyError, TypeError):
                continue  # not played (an older run: no DA1, no _ref)
            except ValueError as e:
                raise BadRun(f"{path}: episodes of {earlier}/{later} vs {opponent} unreadable ({e})") from None
            if sorted(a) != sorted(b):
                raise BadRun(f"{path}: {later} and {earlier} played other scenarios against {opponent}")
            order = sorted({sid for sid, _ in a})
            out.setdefault(f"{later}-{earlier}", {})[opponent] = outcome_matrix(b, order) - outcome_matrix(a, order)
    return out


def nested_over_runs(runs: dict[str, Path], profile: str, bootstrap_seed: int = 0) -> dict[str, dict[str, Any]]:
    """``over_seeds``: per pair and opponent, every run's (seed's) mean difference (``per_seed``, runs named in
    ``seeds``) beside the nested bootstrap over the runs that played it (seed -> scenario -> draw)."""
    per_run = {}
    for label, root in runs.items():
        try:
            per_run[label] = difference_matrices(load_run(root, profile)[1], root / "reports" / "evaluate.json")
        except BadRun as e:
            raise BadRun(f"--run {label}: {e}") from None
    out: dict[str, dict[str, Any]] = {}
    for later, earlier in NESTED_PAIRS:
        pair = f"{later}-{earlier}"
        for opponent in NESTED_OPPONENTS:
            labels = [label for label, m in per_run.items() if opponent in m.get(pair, {})]
            if labels:
                diffs = [per_run[label][pair][opponent] for label in labels]
                out.setdefault(pair, {})[opponent] = {"seeds": labels, **nested_bootstrap(diffs, seed=bootstrap_seed)}
    return out


def first_gym(cycles: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The adversary's first gym against DA0, from the arenas around it, or why it is unmeasured."""
    first = next((i for i, c in enumerate(cycles) if c.get("trained") in ("agent", "adversary")), None)
    if first is None or cycles[first]["trained"] != "adversary":
        why = "the adversary never trained" if first is None else "the agent trained before the adversary"
        return {"first_gym": "unmeasured", "first_gym_note": why}
    gym = cycles[first]
    if first + 1 >= len(cycles):
        return {"first_gym": "unmeasured", "first_gym_note": f"no arena after cycle {gym.get('cycle')}'s gym"}
    after = cycles[first + 1]
    faith, source = after.get("arena_adv_faithfulness"), "arena"
    if faith is None:
        faith, source = gym.get("adv_faithfulness"), "held-out _adv"
    if faith is None or "arena_adv_success" not in gym or "arena_adv_success" not in after:
        return {"first_gym": "unmeasured", "first_gym_note": "the cycles record no arena adversary success"}
    return {
        "first_gym_cycle": gym.get("cycle"),
        "adv_success_before_gym": float(gym["arena_adv_success"]),
        "adv_success_after_gym": float(after["arena_adv_success"]),
        "adv_faithfulness_after_gym": float(faith),
        "faithfulness_source": source,
    }


def seed_figures(root: Path, profile: str, bootstrap_seed: int = 0) -> dict[str, Any]:
    """Every figure the criteria read, for one run folder."""
    metrics, evaluate = load_run(root, profile)
    path = root / "reports" / "metrics.json"
    da0, final = ("agents", "da0"), ("agents", "final")
    ceil = number(metrics, path, "ceiling", "strict_pass_advpool")
    sp_da0 = number(metrics, path, *da0, "strict_pass_advpool")
    sp_final = number(metrics, path, *final, "strict_pass_advpool")
    cycles = metrics["cycles"]
    trained = metrics.get("trained_history") or [c.get("trained") for c in cycles]
    return {
        "path": str(root),
        "seed": metrics.get("seed"),
        "n_heldout": metrics.get("n_heldout"),
        "expert_strict_pass_advpool": ceil,
        "da0_strict_pass_advpool": sp_da0,
        "final_strict_pass_advpool": sp_final,
        "pool_target": sp_da0 + (ceil - sp_da0) / 2,
        "final_minus_da0_advpool": sp_final - sp_da0,
        **pool_difference(evaluate, root / "reports" / "evaluate.json", bootstrap_seed),
        "routing_error_coop_da0": 1 - number(metrics, path, *da0, "routing_acc_coop"),
        "routing_error_coop_final": 1 - number(metrics, path, *final, "routing_acc_coop"),
        "strict_pass_camo_da0": number(metrics, path, *da0, "strict_pass_camo"),
        "strict_pass_camo_final": number(metrics, path, *final, "strict_pass_camo"),
        "trained_history": trained,
        "w_da_trajectory": metrics.get("w_da_trajectory", [c.get("w_da") for c in cycles]),
        "adv_success_trajectory": metrics.get("adv_success_trajectory", [c.get("arena_adv_success") for c in cycles]),
        **first_gym(cycles),
        **rl_gains(metrics),
        **pool_by_generation(evaluate, trained, metrics),
    }


def rl_gains(metrics: dict[str, Any]) -> dict[str, Any]:
    """metrics.json's paired gains (evaluate's, when DA1 was played): [mean, low, high] per pair and opponent."""
    gains = metrics.get("gains") or {}
    out = {f"gain_{pair}_{opp}": gains[pair][opp] for pair in gains for opp in gains[pair]}
    if "da1" in metrics.get("agents", {}):
        out["da1_strict_pass_advpool"] = metrics["agents"]["da1"].get("strict_pass_advpool")
    return out


def checks(f: dict[str, Any]) -> dict[str, bool | None]:
    """The criteria on one seed's figures, or on the means (``f`` with the same keys); None: unmeasured."""
    gym: bool | None = None
    if f.get("adv_success_after_gym") is not None:
        gym = f["adv_success_after_gym"] > f["adv_success_before_gym"] + EPS
        gym = gym and f["adv_faithfulness_after_gym"] >= FAITHFUL - EPS
    trained = f.get("trained_history")
    return {
        "expert_ceiling": f["expert_strict_pass_advpool"] >= EXPERT_FLOOR - EPS,
        "pool_half_gap": f["final_strict_pass_advpool"] >= f["pool_target"] - EPS,
        "coop_routing_camo": f["routing_error_coop_final"] <= ROUTING_ERROR_MAX + EPS
        and f["routing_error_coop_final"] <= f["routing_error_coop_da0"] + EPS
        and f["strict_pass_camo_final"] >= f["strict_pass_camo_da0"] - EPS,
        "both_sides_trained": None if trained is None else {"agent", "adversary"} <= set(trained),
        "first_gym": gym,
    }


def gain_checks(f: dict[str, Any]) -> dict[str, bool | None]:
    """Issue 63's criteria on one seed's paired gains (evaluate's ``gains``): DA1 - DA0 and final - DA0 vs the
    pool at least their floors with intervals above 0; final no lower than DA0 vs `_coop` and `_camo` beyond HELD."""
    return {
        "da1_gain": _gain_holds(f.get("gain_da1-da0_advpool"), DA1_GAIN),
        "final_gain": _gain_holds(f.get("gain_final-da0_advpool") or _pool_gain(f), FINAL_GAIN),
        "coop_camo_held": None
        if "gain_final-da0_coop" not in f
        else all(f[f"gain_final-da0_{o}"][0] >= -HELD - EPS for o in ("coop", "camo")),
    }


def _pool_gain(f: dict[str, Any]) -> list[float] | None:
    ci = f.get("final_minus_da0_advpool_ci")
    return [f["final_minus_da0_advpool"], *ci] if ci and "final_minus_da0_advpool" in f else None


def _gain_holds(gain: list[float] | None, floor: float) -> bool | None:
    """A paired gain [mean, low, high] of at least ``floor`` whose interval lies above 0; None: unmeasured."""
    return None if not gain else gain[0] >= floor - EPS and gain[1] > 0


def over_seeds(seeds: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, bool | None]]:
    """Mean figures (every seed's numbers; the first gym's over the seeds that measured it) and the criteria:
    1-3 on the means, 4 in every seed, 5 in every seed (null when a seed left it unmeasured and none failed)."""
    rows = list(seeds.values())
    mean: dict[str, Any] = {}
    for key, value in rows[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool) and key not in NOT_AVERAGED:
            values = [r[key] for r in rows if isinstance(r.get(key), int | float)]
            mean[key] = sum(values) / len(values)
    gyms = [r for r in rows if "adv_success_after_gym" in r]
    for key in ("adv_success_before_gym", "adv_success_after_gym", "adv_faithfulness_after_gym"):
        mean[key] = sum(r[key] for r in gyms) / len(gyms) if gyms else None
    mean["pool_target"] = (
        mean["da0_strict_pass_advpool"] + (mean["expert_strict_pass_advpool"] - mean["da0_strict_pass_advpool"]) / 2
    )  # DA0's mean + half the mean gap
    per_seed = [checks(r) for r in rows]
    on_mean = checks({**mean, "trained_history": None})
    gym = [c["first_gym"] for c in per_seed]
    criteria = {k: on_mean[k] for k in CRITERIA[:3]}
    criteria["both_sides_trained"] = all(c["both_sides_trained"] for c in per_seed)
    criteria["first_gym"] = False if False in gym else (None if None in gym else True)
    gains = [gain_checks(r) for r in rows]
    for name in PER_SEED:
        marks = [c[name] for c in gains]
        criteria[name] = False if False in marks else (None if None in marks else True)
    return mean, criteria


def verdict(value: bool | None) -> str:
    return "UNMEASURED" if value is None else ("PASS" if value else "FAIL")


def show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


def print_tables(seeds: dict[str, dict[str, Any]], mean: dict[str, Any], criteria: dict[str, bool | None]) -> None:
    for label, f in seeds.items():
        print(f"\n{label}: {f['path']} (seed {f['seed']}, {f['n_heldout']} held-out scenarios)")
        for key, value in f.items():
            if key not in ("path", "seed", "n_heldout"):
                print(f"  {key:36s} {show(value)}")
        for name, ok in {**checks(f), **gain_checks(f)}.items():
            print(f"  {'criterion ' + name:36s} {verdict(ok)}")
    print(f"\nmean over {len(seeds)} seed(s)")
    for key, value in mean.items():
        print(f"  {key:36s} {show(value)}")
    for name, ok in criteria.items():
        print(f"  {'criterion ' + name:36s} {verdict(ok)}")


def print_nested(nested: dict[str, dict[str, Any]]) -> None:
    if nested:
        print("\nover seeds: nested bootstrap seed -> scenario -> draw (95%)")
    for pair, by_opponent in nested.items():
        for opponent, row in by_opponent.items():
            print("  " + nested_line(f"{pair} vs {opponent}", row))


def finished(root: Path, profile: str, seed: int) -> bool:
    """Whether this copy's reports/metrics.json is complete for ``profile`` and ``seed``."""
    try:
        report = json.loads((root / "reports" / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return report.get("profile") == profile and report.get("seed") == seed


# A warm start's folders and stage reports, shared by every RL seed: what agent_rl, the cycles and evaluate read.
WARM_FOLDERS = (
    "data/ingest", "data/scenarios", "models/judge", "models/tokenizer", "models/agent_sft", "models/simulator_sft",
)  # fmt: skip
WARM_STAGES = ("ingest", "scenarios", "judge_models", "tokenizer", "agent_sft", "simulator_sft")
SCENARIO_SETS = ("train", "heldout", "gym", "validation", "arena")  # what agent_rl, the cycles and evaluate read
# `sparring stage NAME` without the upstream check: evaluate runs without the peer cohort and simulator_rl.
RUN_STAGE = "import sys; from pipelines.cli import run_stage; run_stage(sys.argv[1], check_upstream=False)"


def missing_warm_start(warm: Path) -> str | None:
    """What ``warm`` lacks of a warm start (its folders, the scenario sets), said; None when it is whole."""
    sets = [f"data/scenarios/{name}.jsonl" for name in SCENARIO_SETS]
    missing = [rel for rel in (*WARM_FOLDERS, *sets) if not (warm / rel).exists()]
    return f"{warm}: no {', '.join(missing)} (run its warm-start stages first)" if missing else None


def run_from_warm(workdir: Path, warm: Path, seed: int, profile: str) -> Path:
    """The finished copy for RL ``seed`` on ``warm``'s warm start (DA0, the simulator, the judge, the tokenizer, the
    ingested data and the scenario sets, copied: the draws DA0's demonstrations played): agent_rl, every cycle and
    evaluate; their output in run.log. Only the RL seed differs between copies."""
    root = workdir / f"seed_{seed}"
    if finished(root, profile, seed):
        return root
    if missing := missing_warm_start(warm):
        raise BadRun(missing)
    prepare_copy(ROOT, root, seed, profile)
    copy_stage_outputs(warm, root, WARM_FOLDERS, WARM_STAGES)
    _, env = copy_command(root)
    print(f"seed {seed}: agent_rl, cycles and evaluate in {root} from {warm} (log: {root / 'run.log'})", flush=True)
    stages = ["agent_rl", *(f"cycle_{k}" for k in range(1, n_cycles(root) + 1)), "evaluate"]
    with open(root / "run.log", "w", encoding="utf-8") as log:
        for name in stages:
            done = subprocess.run([sys.executable, "-c", RUN_STAGE, name], cwd=root, env=env, stdout=log, stderr=log)
            if done.returncode != 0:
                raise BadRun(f"stage {name} failed in {root} (exit {done.returncode}); see {root / 'run.log'}")
    return root


def n_cycles(root: Path) -> int:
    """The cycle stages the copy's graph holds (dvc.yaml's, as `sparring stage` reads them)."""
    return len([name for name in declared_stages(root) if name.startswith("cycle_")])


def run_outcomes(root: Path, profile: str) -> dict[str, Any]:
    """A finished run's per-episode strict PASS of every agent against every opponent, ids, draws and 0/1 only (no
    texts): ``{"scenario_ids": {opponent: [...]}, "draws": {opponent: [...]}, "strict_pass": {agent: {opponent:
    "0110..."}}}`` (``draws`` empty for a run from before draws)."""
    _, evaluate = load_run(root, profile)
    episodes = evaluate.get("episodes") or {}
    return {k: episodes.get(k, {}) for k in ("scenario_ids", "draws", "strict_pass")}


def run_seed(workdir: Path, seed: int, profile: str) -> Path:
    """The finished copy for ``seed``: ``sparring run`` in it unless done; its output in run.log."""
    root = workdir / f"seed_{seed}"
    if finished(root, profile, seed):
        return root
    prepare_copy(ROOT, root, seed, profile)
    cli, env = copy_command(root)
    print(f"seed {seed}: sparring run in {root} (log: {root / 'run.log'})", flush=True)
    with open(root / "run.log", "w", encoding="utf-8") as log:
        done = subprocess.run([*cli, "run"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise BadRun(f"the pipeline failed in {root} (exit {done.returncode}); see {root / 'run.log'}")
    return root


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", default=[], help="LABEL=DIR: a finished run's project folder")
    parser.add_argument("--seeds", type=int, nargs="+", default=[], help="run the pipeline for these seeds first")
    parser.add_argument("--workdir", type=Path, default=ROOT / "scratch" / "acceptance", help="where --seeds runs")
    parser.add_argument(
        "--warm-start", type=Path, default=None, help="with --seeds: share this project's DA0, simulator and judge"
    )
    parser.add_argument("--runs-json", type=Path, default=None, help="write every run's per-scenario outcomes here")
    parser.add_argument("--profile", default="default", help="the profile every run must have run (default)")
    parser.add_argument("--bootstrap-seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.run and not args.seeds:
        parser.error("give --run LABEL=DIR (finished runs) or --seeds N ... (runs the pipeline per seed)")
    runs = parse_runs(parser, args.run)
    for seed in args.seeds:
        try:
            if args.warm_start:
                runs[f"seed{seed}"] = run_from_warm(args.workdir, args.warm_start.resolve(), seed, args.profile)
            else:
                runs[f"seed{seed}"] = run_seed(args.workdir, seed, args.profile)
        except BadRun as e:
            print(f"error: --seeds {seed}: {e}", file=sys.stderr)
            return 2
    seeds = {}
    for label, root in runs.items():
        try:
            seeds[label] = seed_figures(root, args.profile, args.bootstrap_seed)
        except BadRun as e:
            print(f"error: --run {label}: {e}", file=sys.stderr)
            return 2
    mean, criteria = over_seeds(seeds)
    try:
        nested = nested_over_runs(runs, args.profile, args.bootstrap_seed)
    except BadRun as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_tables(seeds, mean, criteria)
    print_nested(nested)
    if args.runs_json:
        outcomes = {label: run_outcomes(root, args.profile) for label, root in runs.items()}
        args.runs_json.write_text(json.dumps({"profile": args.profile, "runs": outcomes}, indent=1) + "\n")
    print(json.dumps({"seeds": seeds, "mean": mean, "criteria": criteria, "over_seeds": nested}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
