"""Asset `scenarios`: hidden customer goals for training (train split) and evaluation (test split), disjoint."""

from __future__ import annotations

from sparring.catalog import SCENARIOS
from sparring.drivers import StageResult
from sparring.drivers.scenarios import Inputs, run
from stagekit.stages import Stage, StageContext, stage_asset

STAGE = Stage(
    name="scenarios",
    description="Scenarios (intent, world, customer, slots, persona, expected calls): train, held-out, the "
    "agent gym's unplayed set, and validation and arena sets from the validation split.",
    params=("scenarios",),
    outs=(SCENARIOS,),
    upstream=("ingest",),
    headline_metrics=("n_train",),
    group="data",
)


@stage_asset(STAGE)
def scenarios(ctx: StageContext) -> StageResult:
    data = ctx.catalog
    inputs = Inputs(utterances={split: data.utterances(split) for split in ("train", "validation", "test")})
    return run(inputs, ctx.params.scenarios, data.path(SCENARIOS), ctx.params.seed)
