"""Asset `judge_models`: the judge's intent oracle and realism discriminator, fitted on ingested data."""

from __future__ import annotations

from sparring.catalog import JUDGE
from sparring.drivers import StageResult
from sparring.drivers.judge_models import Inputs, run
from stagekit.stages import Stage, StageContext, stage_asset

STAGE = Stage(
    name="judge_models",
    description="Intent oracle (MiniLM + TF-IDF → logistic regression) and realism discriminator for the judge.",
    params=("judge", "ingest"),  # ingest: the utterance source its report names
    # the oracle's classes and the discriminator's label patterns come from the taxonomy
    outs=(JUDGE,),
    upstream=("ingest",),
    priority=1,  # simulator_sft waits for it: the longest chain
    headline_metrics=("oracle_acc",),
    group="data",
    kinds=("scikitlearn", "huggingface"),
)


@stage_asset(STAGE)
def judge_models(ctx: StageContext) -> StageResult:
    data = ctx.catalog
    inputs = Inputs(
        utterances=data.utterances("train"),
        test=data.utterances("test"),
        dialogues=data.dialogues("train"),
        source=ctx.params.ingest.utterances.source,
    )
    return run(inputs, ctx.params.judge, data.path(JUDGE), ctx.params.seed)
