"""Asset `agent_rl`: DA0 -> DA1, RL-ADA's GRPO bootstrap before any arena (sparring.train.agent_rl).

Resuming: the trainer checkpoints into scratch/agent_rl every `agent_rl.eval_every` steps, beside the validation
curve and the weights kept at each check; a run killed mid-stage and started again goes on from the last
checkpoint to the weights an uninterrupted run reaches. The scratch folder is removed once DA1 is in place.
"""

from __future__ import annotations

from typing import Any

from pipelines.graph_shape import PLAYS_RL_SIMULATOR
from pipelines.stages import Plot, Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import AGENT_RL, AGENT_SFT, SIMULATORS
from sparring.timing import Phases
from sparring.train.agent_rl import clear_scratch, train_agent_rl

STAGE = Stage(
    name="agent_rl",
    description="DA1: multi-turn GRPO of DA0 on the unplayed gym against the simulator (as the first adversary "
    "and the cooperative customer), the agent's reward from the world; validation strict PASS every K steps is "
    "its curve; the last step is DA1 (agent_rl.keep).",
    params=("agent_rl", "coevolution", "judge"),
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
    scratch = data.scratch(STAGE.name)
    result = train_agent_rl(
        data.path(AGENT_SFT),
        data.path(SIMULATORS[co.simulator]),
        data.scenarios("gym" if rl.gym == "unplayed" else "train"),
        data.scenarios("validation"),
        co,
        rl,
        p.judge.reward,
        data.path(AGENT_RL),
        scratch,
        seed=p.seed,
    )
    ctx.log.checkpoint(data.path(AGENT_RL), "")
    start = next(row for row in result.curve if row["step"] == 0)
    chosen = next(row for row in result.curve if row["step"] == result.step)
    for row in result.curve:  # the validation curve in MLflow, step by step
        ctx.log.metrics({f"val_{k}": v for k, v in row.items() if k != "step"}, row["step"])
    metrics = {
        "chosen_step": float(result.step),
        "resumed_from": float(result.resumed_from),
        "train_seconds": round(result.seconds, 2),
        **{f"val_{k}_da0": float(v) for k, v in start.items() if k != "step"},  # validation, DA0 and DA1
        **{f"val_{k}_da1": float(v) for k, v in chosen.items() if k != "step"},
    }
    if result.grpo is not None:
        metrics.update(
            grpo_seconds=result.grpo.seconds,
            grpo_rollout_seconds=result.grpo.rollout_seconds,
            grpo_rollout_episodes=float(result.grpo.rollout_episodes),
            **{f"grpo_{k}": v for k, v in result.grpo.reward_stats().items()},
        )
    clear_scratch(scratch)
    report = {"curve": result.curve, "chosen_step": result.step, "signals": result.grpo.steps if result.grpo else []}
    return StageOutput(metrics=metrics, report={**report, "phases": _phases(result)})


def _phases(result: Any) -> dict[str, dict[str, float]]:
    """Where the GRPO time went (main_job_profile reads it): rollouts (episodes and the judge), then the updates
    with the validation plays the trainer's callback runs between them."""
    phases = Phases()
    if result.grpo is not None:
        g = result.grpo
        phases.add("grpo_rollouts", g.rollout_seconds, episodes=g.rollout_episodes)
        phases.add("grpo_updates_and_validation", g.update_seconds, tokens=g.update_tokens)
    return phases.as_dict()
