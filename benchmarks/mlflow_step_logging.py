"""Seconds to log a peer member's step rows to MLflow: one call per row (peer_rl until 2026-12-06) against
``StageLog.series`` (batches of MLflow's cap), side by side, each into its own fresh sqlite store.

peer_rl logs every step row of each member on the member's child run and, prefixed, on the stage's run. Under
the banking77 profile that is 4,800 rows per learner, and the stage's wall exceeded its timed phases by ~134 s
(2026-12-06: the child runs' metric timestamps spanned 67 s each). The rows here are shaped like that stage's
(step, reward, entropy, unparseable, agree_teacher, vote_acc, target_acc); both arms must leave the same
(key, step, value) points on both runs, checked before the times are printed.

Prints readable lines, then one JSON object as the last line:
``{"rows": ..., "seconds": {"per_row": ..., "series": ...}, "ratio": series / per_row, "same_points": true}``.
Usage: ``python benchmarks/mlflow_step_logging.py [--rows 4800]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric

from stagekit.resources import StageLog

KEYS = ("reward", "entropy", "unparseable", "agree_teacher", "vote_acc", "target_acc")


def step_rows(n: int, seed: int = 0) -> list[dict[str, float]]:
    rng = random.Random(seed)
    return [{"step": step, **{k: rng.random() for k in KEYS}} for step in range(1, n + 1)]


def per_row(log: StageLog, rows: list[dict[str, float]]) -> None:
    """peer_rl's logging until 2026-12-06: two ``log_batch`` calls (own run, parent) per step row."""
    for row in rows:
        now, step = int(time.time() * 1000), int(row["step"])
        values = {k: v for k, v in row.items() if k != "step"}
        log.client.log_batch(log.run_id, metrics=[Metric(k, float(v), now, step) for k, v in values.items()])
        on_parent = [Metric(f"{log.stage}.{k}", float(v), now, step) for k, v in values.items()]
        log.client.log_batch(log.parent_id, metrics=on_parent)


def timed(arm: Any, rows: list[dict[str, float]], folder: Path) -> tuple[float, list[tuple]]:
    """Seconds ``arm`` takes to log ``rows`` into a fresh store under ``folder``, and the points it left."""
    db = folder / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    experiment = client.create_experiment("bench", artifact_location=str(folder / "artifacts"))
    parent = client.create_run(experiment).info.run_id
    child = client.create_run(experiment).info.run_id
    log = StageLog(client, child, parent, "member")
    start = time.perf_counter()
    arm(log, rows)
    seconds = time.perf_counter() - start
    query = "select run_uuid = ?, key, step, value from metrics order by 1, 2, 3"
    points = sqlite3.connect(db).execute(query, (child,)).fetchall()
    return seconds, points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4800, help="step rows of one member (banking77's learner: 4,800)")
    args = ap.parse_args()
    rows = step_rows(args.rows)
    seconds, points = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, arm in (("per_row", per_row), ("series", StageLog.series)):
            folder = Path(tmp) / name
            folder.mkdir()
            seconds[name], points[name] = timed(arm, rows, folder)
            print(f"{name:>8}: {args.rows:,} rows x {len(KEYS)} metrics x 2 runs in {seconds[name]:.2f} s")
    same = points["per_row"] == points["series"] and len(points["series"]) == 2 * args.rows * len(KEYS)
    ratio = seconds["series"] / seconds["per_row"]
    print(f"series / per_row: {ratio:.4f} (same points on both runs: {same})")
    print(json.dumps({"rows": args.rows, "seconds": seconds, "ratio": ratio, "same_points": same}))
    if not same:
        raise SystemExit("the two arms left different points")


if __name__ == "__main__":
    main()
