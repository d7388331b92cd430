"""Asset `peer_members`: the peer-reward cohort's members of other model families, warm-started as DA0 is →
models/peer_members/<member>/ (sparring.drivers.peer_members). Apart from `peer_rl` so that it runs beside
simulator_sft and the cycles: it needs nothing of theirs, and `peer_rl` (after the last cycle) only loads what it
wrote."""

from __future__ import annotations

from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.atomic import replace_dir
from sparring.catalog import PEER_MEMBERS
from sparring.drivers.peer_members import run as run_members
from sparring.lm.checkpoints import save_checkpoint

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
def peer_members(ctx: StageContext) -> StageOutput:
    p, data = ctx.params, ctx.catalog
    done = run_members(
        p.peer_rl.members, data.tokenizer(), data.utterances("train"), data.scenarios("train"), p.agent_sft,
        data.scratch(STAGE.name), p.seed,
    )  # fmt: skip

    def write_all(folder):  # noqa: ANN001, ANN202
        for name, model in done.models.items():
            save_checkpoint(model, done.tokenizers[name], folder / name)

    with done.phases.time("save_checkpoints"):
        replace_dir(data.path(PEER_MEMBERS), write_all)
    return StageOutput(metrics=done.metrics, report={"members": sorted(done.models), "phases": done.phases.as_dict()})
