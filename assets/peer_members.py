"""Asset `peer_members`: the peer-reward cohort's members of other model families, warm-started as DA0 is →
models/peer_members/<member>/ (sparring.drivers.peer_members). Apart from `peer_rl` so that it runs beside
simulator_sft and the cycles: it needs nothing of theirs, and `peer_rl` (after the last cycle) only loads what it
wrote."""

from __future__ import annotations

from sparring.catalog import PEER_MEMBERS
from sparring.drivers import StageResult
from sparring.drivers.peer_members import Inputs, run
from stagekit.stages import Stage, StageContext, stage_asset

STAGE = Stage(
    name="peer_members",
    description="The peer cohort's members of other model families (peer_rl.members with a model), each "
    "warm-started as DA0 is (intent phase, then expert demos unless `demos: false`); peer_rl trains them.",
    params=("ingest", "agent_sft", "peer_rl"),
    outs=(PEER_MEMBERS,),
    upstream=("ingest", "scenarios", "tokenizer"),
    priority=-1,  # only peer_rl, after the last cycle, needs it: it fills an idle core
    group="peer_reward",
    kinds=("pytorch", "huggingface"),
)


@stage_asset(STAGE)
def peer_members(ctx: StageContext) -> StageResult:
    data = ctx.catalog
    inputs = Inputs(
        tokenizer=data.tokenizer(),
        utterances=data.utterances("train"),
        scenarios=data.scenarios("train"),
        default_recipe=ctx.params.agent_sft,
        scratch=data.scratch(STAGE.name),
    )
    return run(inputs, ctx.params.peer_rl, data.path(PEER_MEMBERS), ctx.params.seed)
