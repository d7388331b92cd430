"""Credit arms side by side from their per-episode outcomes (issue 57): IAPO, MT-GRPO against GRPO, per seed and
over the seeds, recomputed from the JSON that ``agent_learning_curve.py --arms-json`` wrote (and that docs/runs
keeps), so anyone can check the intervals without playing an episode.

Every file holds one seed's start and one or more arms' checkpoints; arms from one warm start and seed played the
same held-out scenarios under the same customer draws (common random numbers), so their outcomes pair by (scenario,
draw). A row is [scenario id, opponent, strict pass, failure kind, draw]; a row from before draws (four fields) is
draw 0. Intervals come from :mod:`sparring.evaluate.intervals`: per arm and seed, pool strict PASS at every
checkpoint, the last checkpoint's gain over the start with its 95% interval resampling scenarios (each with its
draws), ``_coop``'s change, and the refused-act and misroute shares. Then each arm minus ``--base`` at the last
checkpoint: pooled over every seed's scenarios (2 seeds x 240 scenarios = 480 pairs of scenario means), and the
ratio of the gains. Where two or more seeds are given, every seed's figure and the nested bootstrap over them
(seed -> scenario -> draw: mean, interval, IQM, probability of improvement) of each arm's gain over its start
(``over_seeds``) and of each arm minus the base (``versus_base.<arm>.nested``). A checkpoint ``--collapsed`` names
(ARM:SEED, from the curve's printout of a collapsed checkpoint) is reported and left out of the pooled and nested
figures.

Usage: ``python benchmarks/credit_arms.py FILE [FILE ...] [--base grpo] [--collapsed iapo:1] [--out F]``.
JSON last line: ``{"arms": {"<arm>": {"<seed>": {...}}}, "over_seeds": {"<arm>": {...} | null},
"versus_base": {"<arm>": {...}}}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from sparring.evaluate.episodes import outcome_matrix
from sparring.evaluate.intervals import cluster_bootstrap, nested_bootstrap, paired_difference

KINDS = ("refused", "misroute", "undescribed", "left")  # failure kinds shown beside the gains


def load(files: list[Path]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(seed -> start outcomes, arm -> seed -> step -> outcomes); a second file's start must equal the first's."""
    starts: dict[str, Any] = {}
    arms: dict[str, dict[str, Any]] = {}
    for path in files:
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"error: {path}: not a readable --arms-json file ({exc})") from None
        for name, arm in saved.get("arms", {}).items():
            seed = str(arm["seed"])
            if seed in starts and starts[seed] != saved["start"]:
                raise SystemExit(f"error: {path}: seed {seed}'s start differs from another file's: not one warm start")
            starts[seed] = saved["start"]
            arms.setdefault(name, {})[seed] = {int(k): v for k, v in arm["checkpoints"].items()}
    if not arms:
        raise SystemExit("error: no arm's checkpoints in " + ", ".join(map(str, files)))
    return starts, arms


def draw_of(row: list[Any]) -> int:
    """A row's customer draw: its fifth field, or 0 for a row from before draws (four fields)."""
    return int(row[4]) if len(row) > 4 else 0


def pass_matrix(outcomes: list[list[Any]]) -> np.ndarray:
    """Strict PASS as an (n_scenarios, K) array: scenarios sorted by id, draws ascending (``outcome_matrix``)."""
    return outcome_matrix({(row[0], draw_of(row)): int(row[2]) for row in outcomes})


def paired(before: list[list[Any]], after: list[list[Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Both checkpoints' strict PASS matrices, row and column alike (scenario, draw); refused by SystemExit when
    they played other (scenario, draw) pairs."""
    if {(r[0], draw_of(r)) for r in before} != {(r[0], draw_of(r)) for r in after}:
        raise SystemExit("error: two checkpoints played other (scenario, draw) pairs: not one held-out play")
    return pass_matrix(before), pass_matrix(after)


def shares(outcomes: list[list[Any]]) -> dict[str, float]:
    return {k: sum(row[3] == k for row in outcomes) / len(outcomes) for k in KINDS}


def arm_seed(start: dict[str, Any], steps: dict[int, Any], seed: int) -> dict[str, Any]:
    """One arm on one seed: its curve, its last checkpoint's gain over (scenario, draw) with the interval that
    resamples scenarios, ``_coop``'s change."""
    last = max(steps)
    base, end = paired(start["advpool"], steps[last]["advpool"])
    mean, low, high = paired_difference(base, end, seed=seed)
    coop = [float(pass_matrix(start["coop"]).mean())] + [
        float(pass_matrix(steps[k]["coop"]).mean()) for k in sorted(steps)
    ]
    return {
        "steps": [0, *sorted(steps)],
        "draws": int(base.shape[1]),
        "pool": [float(base.mean())] + [float(pass_matrix(steps[k]["advpool"]).mean()) for k in sorted(steps)],
        "coop": coop,
        "gain": mean,
        "gain_ci": [low, high],
        "coop_change": coop[-1] - coop[0],
        "failures_start": shares(start["advpool"]),
        "failures_last": shares(steps[last]["advpool"]),
    }


def kept(arms: dict[str, Any], name: str, skip: set[str]) -> list[str]:
    """``name``'s seeds that no ``--collapsed`` leaves out."""
    return sorted(s for s in arms[name] if f"{name}:{s}" not in skip)


def last(steps: dict[int, Any]) -> list[list[Any]]:
    return steps[max(steps)]["advpool"]


def over_seeds(arms: dict[str, Any], starts: dict[str, Any], name: str, skip: set[str]) -> dict[str, Any] | None:
    """``name``'s last-checkpoint gain over its start: every uncollapsed seed's figure and the nested bootstrap over
    them (seed -> scenario -> draw); None under two seeds."""
    seeds = kept(arms, name, skip)
    if len(seeds) < 2:
        return None
    diffs = [b - a for a, b in (paired(starts[s]["advpool"], last(arms[name][s])) for s in seeds)]
    return {"seeds": seeds, **nested_bootstrap(diffs)}


def versus(arms: dict[str, Any], starts: dict[str, Any], name: str, base: str, skip: set[str]) -> dict[str, Any]:
    """``name`` − ``base`` at each one's last checkpoint over every seed both ran: pooled (each seed's scenarios
    clusters of their draws, resampled together) and, over two or more seeds, the nested bootstrap."""
    seeds = sorted(set(kept(arms, name, skip)) & set(kept(arms, base, skip)))
    if not seeds:
        return {"seeds": [], "note": "no seed both arms ran uncollapsed"}
    diffs, gain, base_gain = [], [], []
    for s in seeds:
        start, b = paired(starts[s]["advpool"], last(arms[base][s]))
        a = paired(starts[s]["advpool"], last(arms[name][s]))[1]
        diffs.append(a - b)
        gain.append((a - start).mean(axis=1))
        base_gain.append((b - start).mean(axis=1))
    rows = np.concatenate([d.mean(axis=1) for d in diffs])  # a scenario's mean over its draws: its cluster
    mean, low, high = cluster_bootstrap(rows, seed=0)
    gain_arm, gain_base = float(np.concatenate(gain).mean()), float(np.concatenate(base_gain).mean())
    return {
        "seeds": seeds,
        "pairs": sum(d.size for d in diffs),
        "scenarios": len(rows),
        "difference": mean,
        "difference_ci": [low, high],
        "gain": gain_arm,
        "base_gain": gain_base,
        "gain_ratio": gain_arm / gain_base if gain_base > 0 else None,  # the paper's 1.4x reads only over a gain
        "nested": {"seeds": seeds, **nested_bootstrap(diffs)} if len(seeds) > 1 else None,
    }


def nested_line(label: str, row: dict[str, Any]) -> str:
    """One printed line of a nested bootstrap over seeds, every seed's figure beside it."""
    per_seed = ", ".join(f"{s}: {v:+.3f}" for s, v in zip(row["seeds"], row["per_seed"], strict=True))
    seeds = f"{row['n_seeds']} seed{'s' * (row['n_seeds'] != 1)}"
    return (
        f"{label} over {seeds}: {row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}], "
        f"IQM {row['iqm']:+.3f} [{row['iqm_low']:+.3f}, {row['iqm_high']:+.3f}], P(improvement) "
        f"{row['prob_improvement']:.2f} [{row['prob_improvement_low']:.2f}, {row['prob_improvement_high']:.2f}]; "
        f"per seed {per_seed}"
    )


def print_table(table: dict[str, Any], skip: set[str]) -> None:
    print("arm        seed  pool strict PASS by checkpoint            gain [95% CI]            coop   refused misroute")
    for name, by_seed in table.items():
        for s, row in by_seed.items():
            curve = " ".join(f"{k}:{v:.3f}" for k, v in zip(row["steps"], row["pool"], strict=True))
            f = row["failures_last"]
            mark = "  COLLAPSED" if f"{name}:{s}" in skip else ""
            low, high = row["gain_ci"]
            print(
                f"{name:<10} {s:>4}  {curve:<40} {row['gain']:+.3f} [{low:+.3f}, {high:+.3f}]"
                f"  {row['coop_change']:+.3f}  {f['refused']:.3f}   {f['misroute']:.3f}{mark}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="+", help="--arms-json files of one warm start")
    parser.add_argument("--base", default="grpo", help="the arm the others are compared with")
    parser.add_argument("--collapsed", action="append", default=[], help="ARM:SEED left out of pooled figures")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    starts, arms = load(args.files)
    if args.base not in arms:
        raise SystemExit(f"error: --base {args.base}: no such arm in the files (arms: {', '.join(sorted(arms))})")
    skip = set(args.collapsed)  # a collapsed arm-seed is out of the pooled figures
    table = {
        name: {s: arm_seed(starts[s], steps, int(s)) for s, steps in sorted(by_seed.items())}
        for name, by_seed in arms.items()
    }
    print_table(table, skip)
    seeds = {name: over_seeds(arms, starts, name, skip) for name in arms}
    for name, row in seeds.items():
        if row:
            print(nested_line(f"{name} gain", row))
    against = {name: versus(arms, starts, name, args.base, skip) for name in arms if name != args.base}
    for name, row in against.items():
        if row["seeds"]:
            low, high = row["difference_ci"]
            print(
                f"{name} - {args.base} over {row['scenarios']} scenarios ({row['pairs']} pairs): "
                f"{row['difference']:+.3f} [{low:+.3f}, {high:+.3f}]; "
                f"gains {row['gain']:+.3f} vs {row['base_gain']:+.3f}"
            )
        if row.get("nested"):
            print(nested_line(f"{name} - {args.base}", row["nested"]))
    summary = {
        "base": args.base,
        "collapsed": args.collapsed,
        "arms": table,
        "over_seeds": seeds,
        "versus_base": against,
    }
    if args.out:
        args.out.write_text(json.dumps(summary) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
