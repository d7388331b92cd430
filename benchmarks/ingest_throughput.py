"""Ingestion throughput: rows/s of the synthetic generator and of the CSV reader, measured in one run.

    .venv/bin/python benchmarks/ingest_throughput.py [--csv ../shared/data/banking77/train.csv] [--repeats 3]

Prints human-readable lines, then one JSON object as the last line (../shared/METRICS.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import polars as pl

from sparring.data.dialogues import generate_dialogues
from sparring.data.ingest import deduplicate, stratified_split
from sparring.data.sources import read_intent_csv
from sparring.data.synthetic import generate_utterances


def best_rate(fn, rows_of, repeats: int) -> tuple[float, int]:
    best, rows = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
        rows = rows_of(out)
    return rows / best, rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--csv", default="../shared/data/banking77/train.csv")
    parser.add_argument("--per-intent", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    figures: dict[str, float] = {}
    rate, rows = best_rate(lambda: generate_utterances(args.per_intent, seed=0), len, args.repeats)
    print(f"synthetic utterances: {rows} rows, {rate:,.0f} rows/s")
    figures["synthetic_rows_per_s"] = round(rate)

    rate, rows = best_rate(lambda: generate_dialogues(1000, seed=0), len, args.repeats)
    print(f"synthetic dialogues:  {rows} dialogues, {rate:,.0f} dialogues/s")
    figures["synthetic_dialogues_per_s"] = round(rate)

    csv = Path(args.csv)
    if not csv.is_file():  # the real file lives outside the project; fall back to a synthetic CSV of its size
        frame = generate_utterances(130, seed=1).rename({"intent": "category"}).select("text", "category")
        csv = Path(tempfile.mkdtemp()) / "synthetic.csv"
        frame.write_csv(csv)
        print(f"(no {args.csv}; timing a synthetic CSV of {frame.height} rows instead)")
    rate, rows = best_rate(lambda: read_intent_csv(csv, 1000), len, args.repeats)
    print(f"CSV reader + validation ({csv.name}): {rows} rows, {rate:,.0f} rows/s")
    figures["csv_rows_per_s"] = round(rate)

    frame = read_intent_csv(csv, 1000).with_columns(
        pl.lit("real").alias("style"), pl.int_range(pl.len()).cast(pl.String).alias("id")
    )
    fractions = {"validation": 0.1, "test": 0.1}
    rate, rows = best_rate(lambda: stratified_split(deduplicate(frame)[0], "intent", fractions, 0), len, args.repeats)
    print(f"dedup + stratified split: {rows} rows, {rate:,.0f} rows/s")
    figures["dedup_split_rows_per_s"] = round(rate)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
