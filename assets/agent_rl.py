"""Asset `agent_rl`: DA0 -> DA1, RL-ADA's GRPO bootstrap before any arena (sparring.drivers.agent_rl).

Resuming: the trainer checkpoints into scratch/agent_rl every `agent_rl.eval_every` steps, beside the validation
curve and the weights kept at each check; a run killed mid-stage and started again goes on from the last
checkpoint to the weights an uninterrupted run reaches. The scratch folder is removed once DA1 is in place.
"""

from __future__ import annotations

from sparring.catalog import AGENT_RL, AGENT_SFT, SIMULATORS
from sparring.drivers import StageResult
from sparring.drivers.agent_rl import Inputs, run
from stagekit.graph_shape import PLAYS_RL_SIMULATOR
from stagekit.stages import Plot, Stage, StageContext, stage_asset

STAGE = Stage(
    name="agent_rl",
    description="DA1: multi-turn GRPO of DA0 on the unplayed gym against the simulator (as the first adversary "
    "and the cooperative customer), the agent's reward from the world; validation strict PASS every K steps is "
    "its curve; the last step is DA1 (agent_rl.keep).",
    params=("agent_rl", "coevolution", "judge", "agent_sft"),
    outs=(AGENT_RL,),
    upstream=("scenarios", "agent_sft", "simulator_sft", *(("simulator_rl",) * PLAYS_RL_SIMULATOR)),
    priority=2,  # on the longest chain (agent_sft -> agent_rl -> the cycles): before simulator_rl when both are ready
    headline_metrics=("val_score_da1",),
    series=Plot("step", "strict_pass_advpool", "agent_rl: validation strict PASS vs the pool per step"),
    group="warm_start",
    kinds=("pytorch", "huggingface", "mlflow"),
)


@stage_asset(STAGE)
def agent_rl(ctx: StageContext) -> StageResult:
    data, p = ctx.catalog, ctx.params
    inputs = Inputs(
        da0=data.path(AGENT_SFT),
        simulator=data.path(SIMULATORS[p.coevolution.simulator]),
        gym=data.scenarios("gym"),
        train=data.scenarios("train"),
        validation=data.scenarios("validation"),
        heldout=data.scenarios("heldout"),
        utterances=data.utterances("train"),
        coevolution=p.coevolution,
        reward=p.judge.reward,
        agent_sft=p.agent_sft,
        scratch=data.scratch(STAGE.name),
    )
    return run(inputs, p.agent_rl, data.path(AGENT_RL), p.seed)
