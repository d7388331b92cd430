"""Asset `ingest`: read the chosen sources, validate, deduplicate, split, write parquet."""

from __future__ import annotations

from dagster import AssetCheckResult, MetadataValue, asset_check

from pipelines.kit.resources import ProjectResource
from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import INGEST
from sparring.data.ingest import check_splits, run_ingest

STAGE = Stage(
    name="ingest",
    description="Customer utterances and dialogues → deduplicated, stratified train/validation/test parquet.",
    params=("ingest",),
    # taxonomy.py reads taxonomy.json (the intents and their tools); vocab.py shapes the generated dialogues
    outs=(INGEST,),
    headline_metrics=("rows_train",),
    group="data",
    kinds=("python", "polars"),
)


@stage_asset(STAGE)
def ingest(ctx: StageContext) -> StageOutput:
    result = run_ingest(ctx.params.ingest, ctx.params.seed, ctx.root, ctx.catalog.path(INGEST))
    ctx.log.json_artifact(result.label_counts, "label_counts.json")
    distribution = "| intent | train | validation | test |\n|---|---|---|---|\n" + "\n".join(
        f"| {i} | {n} | {result.label_counts['validation'].get(i, 0)} | {result.label_counts['test'].get(i, 0)} |"
        for i, n in result.label_counts["train"].items()
    )
    return StageOutput(
        metrics=result.metrics(),
        report={"label_counts": result.label_counts, "dropped": result.dropped, **result.extra},
        metadata={
            "label_distribution": MetadataValue.md(distribution),
            "out_dir": MetadataValue.path(str(result.out_dir)),
        },
    )


@asset_check(asset="ingest", description="Every intent in train and test; no utterance in two splits.")
def ingest_splits_are_sound(project: ProjectResource) -> AssetCheckResult:
    problems = check_splits(project.path() / INGEST)
    return AssetCheckResult(passed=not problems, metadata={"problems": MetadataValue.json(problems[:20])})
