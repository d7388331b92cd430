"""Credit arms side by side from their per-scenario outcomes (issue 57): IAPO, MT-GRPO against GRPO, per seed and
over both seeds' pairs, recomputed from the JSON that ``agent_learning_curve.py --arms-json`` wrote (and that
docs/runs keeps), so anyone can check the intervals without playing an episode.

Every file holds one seed's start and one or more arms' checkpoints; arms from one warm start and seed played the
same held-out scenarios with the same seed, so their outcomes pair scenario by scenario. Per arm and seed: pool
strict PASS at every checkpoint, the last checkpoint's gain over the start with its paired bootstrap 95% interval,
``_coop``'s change, and the refused-act and misroute shares. Then each arm minus ``--base`` at the last checkpoint,
over all seeds' pairs pooled (2 seeds x 240 scenarios = 480 pairs), and the ratio of the gains. A checkpoint
``--collapsed`` names (ARM:SEED, from the curve's printout of a collapsed checkpoint) is reported and left out of
the pooled figures.

Usage: ``python benchmarks/credit_arms.py FILE [FILE ...] [--base grpo] [--collapsed iapo:1] [--out F]``.
JSON last line: ``{"arms": {"<arm>": {"<seed>": {...}}}, "versus_base": {"<arm>": {...}}}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from sparring.evaluate.episodes import paired_bootstrap

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


def passes(outcomes: list[list[Any]]) -> list[int]:
    """Strict PASS per scenario in file order ([scenario id, opponent, strict pass, failure kind] rows)."""
    return [int(row[2]) for row in outcomes]


def shares(outcomes: list[list[Any]]) -> dict[str, float]:
    return {k: sum(row[3] == k for row in outcomes) / len(outcomes) for k in KINDS}


def arm_seed(start: dict[str, Any], steps: dict[int, Any], seed: int) -> dict[str, Any]:
    """One arm on one seed: its curve, its last checkpoint's gain with the interval, ``_coop``'s change."""
    last = max(steps)
    base, end = passes(start["advpool"]), passes(steps[last]["advpool"])
    low, high = paired_bootstrap(base, end, seed=seed)
    return {
        "steps": [0, *sorted(steps)],
        "pool": [statistics.mean(base)] + [statistics.mean(passes(steps[k]["advpool"])) for k in sorted(steps)],
        "coop": [statistics.mean(passes(start["coop"]))]
        + [statistics.mean(passes(steps[k]["coop"])) for k in sorted(steps)],
        "gain": statistics.mean(end) - statistics.mean(base),
        "gain_ci": [low, high],
        "coop_change": statistics.mean(passes(steps[last]["coop"])) - statistics.mean(passes(start["coop"])),
        "failures_start": shares(start["advpool"]),
        "failures_last": shares(steps[last]["advpool"]),
    }


def versus(arms: dict[str, Any], starts: dict[str, Any], name: str, base: str, skip: set[str]) -> dict[str, Any]:
    """``name`` − ``base`` at each one's last checkpoint, the pairs of every seed both ran pooled."""
    seeds = sorted(
        s for s in set(arms[name]) & set(arms[base]) if f"{name}:{s}" not in skip and f"{base}:{s}" not in skip
    )
    if not seeds:
        return {"seeds": [], "note": "no seed both arms ran uncollapsed"}
    a, b, s0 = [], [], []
    for s in seeds:
        a += passes(arms[base][s][max(arms[base][s])]["advpool"])
        b += passes(arms[name][s][max(arms[name][s])]["advpool"])
        s0 += passes(starts[s]["advpool"])
    low, high = paired_bootstrap(a, b, seed=0)
    gain_arm, gain_base = statistics.mean(b) - statistics.mean(s0), statistics.mean(a) - statistics.mean(s0)
    return {
        "seeds": seeds,
        "pairs": len(a),
        "difference": statistics.mean(b) - statistics.mean(a),
        "difference_ci": [low, high],
        "gain": gain_arm,
        "base_gain": gain_base,
        "gain_ratio": gain_arm / gain_base if gain_base > 0 else None,  # the paper's 1.4x reads only over a gain
    }


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
    against = {name: versus(arms, starts, name, args.base, skip) for name in arms if name != args.base}
    for name, row in against.items():
        if row["seeds"]:
            low, high = row["difference_ci"]
            print(
                f"{name} - {args.base} over {row['pairs']} pairs: {row['difference']:+.3f} [{low:+.3f}, {high:+.3f}]; "
                f"gains {row['gain']:+.3f} vs {row['base_gain']:+.3f}"
            )
    summary = {"base": args.base, "collapsed": args.collapsed, "arms": table, "versus_base": against}
    if args.out:
        args.out.write_text(json.dumps(summary) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
