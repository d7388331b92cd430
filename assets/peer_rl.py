"""Asset `peer_rl`: Co-RL, a cohort (the final co-evolved agent + members of other families) adapts its routing to
the unlabeled pool by rewarding each other's answers → models/peer_rl/<member>/ (evaluate plays `final` as
`peer_final`), reports/peer_rl.json."""

from __future__ import annotations

import polars as pl

from sparring.catalog import PEER_MEMBERS, PEER_RL, cycle_dir
from sparring.data.ingest import load_unlabeled
from sparring.drivers import StageResult
from sparring.drivers.peer_rl import Inputs, run
from sparring.train.cycle_state import CycleState
from stagekit.graph_shape import LAST_CYCLE, N_CYCLES
from stagekit.stages import Stage, StageContext, stage_asset

STAGE = Stage(
    name="peer_rl",
    description="Peer-reward RL (Co-RL): the final agent and members of other model families adapt their routing "
    "to unlabeled real utterances by each other's labels (the cohort's joint vote in exact expectation; or ring / "
    "majority / self / a teacher); intent accuracy before and after on labelled utterances held out of the pool, "
    "Co-RL's diversity probe, a collapse guard.",
    params=("ingest", "peer_rl", "agent_sft"),
    outs=(PEER_RL,),
    upstream=(LAST_CYCLE, "peer_members", "ingest", "tokenizer", "scenarios"),
    group="peer_reward",
    kinds=("pytorch", "mlflow"),
)


@stage_asset(STAGE)
def peer_rl(ctx: StageContext) -> StageResult:
    p, data = ctx.params, ctx.catalog
    validation, test = data.utterances("validation"), data.utterances("test")
    inputs = Inputs(
        final_agent=data.path(CycleState.load(data.path(cycle_dir(N_CYCLES))).agent_dir),
        members_dir=data.path(PEER_MEMBERS),
        # ingest.unlabeled, without the validation and test splits' texts
        unlabeled=load_unlabeled(p.ingest, p.seed, ctx.root, pl.concat([validation, test])["text"]),
        validation=validation,
        test=test,
        scenarios=data.scenarios("train"),
        object_refs=p.agent_sft.object_refs,
        scratch=data.scratch(STAGE.name, "grpo"),
        profile=p.profile,
    )
    return run(inputs, p.peer_rl, data.path(PEER_RL), p.seed)
