"""Asset `ingest`: read the chosen sources, validate, deduplicate, split, write parquet."""

from __future__ import annotations

from dagster import AssetCheckResult, MetadataValue, asset_check

from sparring.catalog import INGEST
from sparring.data.ingest import check_splits
from sparring.drivers import StageResult
from sparring.drivers.ingest import Inputs, run
from stagekit.resources import ProjectResource
from stagekit.stages import Stage, StageContext, stage_asset

STAGE = Stage(
    name="ingest",
    description="Customer utterances and dialogues → deduplicated, stratified train/validation/test parquet.",
    params=("ingest",),
    # the domain file (sparring/domains/banking.yaml) holds the intents and their tools; vocab.py binds it
    outs=(INGEST,),
    headline_metrics=("rows_train",),
    group="data",
    kinds=("python", "polars"),
)


@stage_asset(STAGE)
def ingest(ctx: StageContext) -> StageResult:
    return run(Inputs(root=ctx.root), ctx.params.ingest, ctx.catalog.path(INGEST), ctx.params.seed)


@asset_check(asset="ingest", description="Every intent in train and test; no utterance in two splits.")
def ingest_splits_are_sound(project: ProjectResource) -> AssetCheckResult:
    problems = check_splits(project.path() / INGEST)
    return AssetCheckResult(passed=not problems, metadata={"problems": MetadataValue.json(problems[:20])})
