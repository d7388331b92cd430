"""The ingest stage: read the chosen sources (paths relative to the project's root), validate, deduplicate, split
stratified by intent and write the splits' parquet (sparring.data.ingest); the label distribution is shown beside
the metrics and kept as an artifact."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sparring.data.ingest import run_ingest
from sparring.drivers import StageResult
from sparring.params import Ingest


@dataclass
class Inputs:
    root: Path  # the project's root: the sources' relative paths are read from it


def run(inputs: Inputs, settings: Ingest, out_dir: Path, seed: int) -> StageResult:
    """The sources read, deduplicated and split into ``out_dir``; their counts and label distribution measured."""
    result = run_ingest(settings, seed, inputs.root, out_dir)
    return StageResult(
        metrics=result.metrics(),
        report={"label_counts": result.label_counts, "dropped": result.dropped, **result.extra},
        json_artifacts={"label_counts.json": result.label_counts},
        shown={"label_distribution": label_table(result.label_counts), "out_dir": result.out_dir},
    )


def label_table(label_counts: dict[str, dict[str, int]]) -> str:
    """A markdown table of each intent's rows per split, in the train split's order."""
    rows = "\n".join(
        f"| {i} | {n} | {label_counts['validation'].get(i, 0)} | {label_counts['test'].get(i, 0)} |"
        for i, n in label_counts["train"].items()
    )
    return "| intent | train | validation | test |\n|---|---|---|---|\n" + rows
