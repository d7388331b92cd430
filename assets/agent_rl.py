"""Asset `agent_rl`: DA0 -> DA1, RL-ADA's GRPO bootstrap before any arena (sparring.drivers.agent_rl).

Resuming: the trainer checkpoints into scratch/agent_rl every `agent_rl.eval_every` steps, beside the validation
curve and the weights kept at each check; a run killed mid-stage and started again goes on from the last
checkpoint to the weights an uninterrupted run reaches. The scratch folder is removed once DA1 is in place.
"""

from __future__ import annotations

from pipelines.kit.graph_shape import PLAYS_RL_SIMULATOR
from pipelines.kit.stages import Plot, Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import AGENT_RL, AGENT_SFT, SIMULATORS
from sparring.drivers.agent_rl import run as run_agent_rl

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
def agent_rl(ctx: StageContext) -> StageOutput:
    p, data, rl, co = ctx.params, ctx.catalog, ctx.params.agent_rl, ctx.params.coevolution
    done = run_agent_rl(
        data.path(AGENT_SFT),
        data.path(SIMULATORS[co.simulator]),
        data.scenarios("gym" if rl.gym == "unplayed" else "train"),
        data.scenarios("validation"),
        co,
        rl,
        p.judge.reward,
        data.path(AGENT_RL),
        data.scratch(STAGE.name),
        seed=p.seed,
        heldout=data.scenarios("heldout"),
        demo_scenarios=data.scenarios("train"),
        agent_sft=p.agent_sft,
        utterances=data.utterances("train"),
    )
    ctx.log.checkpoint(data.path(AGENT_RL), "")
    result = done.result
    for row in result.curve:  # the validation curve in MLflow, step by step
        ctx.log.metrics({f"val_{k}": v for k, v in row.items() if k != "step"}, row["step"])
    report = {"curve": result.curve, "chosen_step": result.step, "signals": result.grpo.steps if result.grpo else [],
              "self_training": result.self_training}  # fmt: skip
    return StageOutput(metrics=done.metrics, report={**report, "phases": done.phases.as_dict()})
