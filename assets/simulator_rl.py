"""Asset `simulator_rl`: the customer simulator, stage 2 of TRACER (GRPO on replayed sessions), and both
simulators' fidelity on the same held-out sessions, with DA0 played against each."""

from __future__ import annotations

from typing import Any

from pipelines.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import AGENT_SFT, FIDELITY, SIMULATOR_RL, SIMULATOR_SFT
from sparring.drivers.simulator_rl import run as run_simulator_rl
from sparring.evaluate.fidelity import better_count
from sparring.lm.checkpoints import save_checkpoint
from sparring.timing import Phases

STAGE = Stage(
    name="simulator_rl",
    description="Customer simulator (TRACER stage 2): multi-turn GRPO on replayed training sessions against the "
    "scripted expert, rewarded by how the session ends and how its customer turns follow the real ones; both "
    "simulators' fidelity on the same held-out sessions, and DA0 against each.",
    params=("simulator_rl", "agent_sft"),
    outs=(SIMULATOR_RL,),
    upstream=("ingest", "scenarios", "judge_models", "simulator_sft", "agent_sft"),
    # started first when ready: evaluate waits for it, and its ~20 min outlast the cycles and peer_rl beside it
    priority=1,
    headline_metrics=("rl.outcome_f1", "sft.outcome_f1", "rl_better_on"),
    group="warm_start",
    kinds=("pytorch", "huggingface", "mlflow"),
)


@stage_asset(STAGE)
def simulator_rl(ctx: StageContext) -> StageOutput:
    p, data, phases = ctx.params, ctx.catalog, Phases()
    da0, _ = data.checkpoint(AGENT_SFT)
    model, tokenizer = data.checkpoint(SIMULATOR_SFT)
    ran = run_simulator_rl(
        model, tokenizer, da0, data.judge_models(), (data.dialogues("train"), data.dialogues("test")),
        data.scenarios("heldout", p.simulator_rl.eval_dialogues), p.simulator_rl, p.agent_sft.max_new_tokens,
        p.seed, phases,
    )  # fmt: skip
    ctx.log.curves(ran.result.curves)
    for row in ran.history:
        for name, value in row.items():
            if name != "step":
                ctx.log.trajectory(f"train_{name}", value, int(row["step"]))
    with phases.time("save_checkpoint"):  # both stages' fidelity beside the weights: evaluate's `simulator`
        results = {FIDELITY: {"profile": p.profile, **ran.fidelity()}}
        save_checkpoint(ran.result.model, tokenizer, data.path(SIMULATOR_RL), results)
        ctx.log.checkpoint(data.path(SIMULATOR_RL), "")
    metrics = {
        **_metrics(ran.sft, ran.rl, ran.result, ran.history),
        **{f"ceiling.{k}": v for k, v in ran.ceiling.items()},
    }
    report = {"phases": phases.as_dict(), **ran.fidelity(), "train_history": ran.history}
    return StageOutput(metrics=metrics, report={**report, "steps": ran.result.steps})


def _metrics(sft: dict[str, float], rl: dict[str, float], result: Any, history: list[dict]) -> dict[str, float]:
    """Both simulators' fidelity side by side, how many figures RL wins, and the training's first and last step."""
    metrics = {
        **{f"sft.{k}": v for k, v in sft.items()},
        **{f"rl.{k}": v for k, v in rl.items()},
        "rl_better_on": better_count(sft, rl),  # of outcome F1, group error, trajectory distance
        "train_seconds": round(result.seconds, 2),
        "train_episodes": result.rollout_episodes,
        # the rewards TRL saw are group-normalized (mean 0 by construction): the raw parts per step say more
        "train_frac_zero_std_groups": result.reward_stats().get("frac_zero_std_groups", 0.0),
    }
    if history:
        first, last = history[0], history[-1]
        metrics.update({f"train_first_{k}": v for k, v in first.items() if k != "step"})
        metrics.update({f"train_last_{k}": v for k, v in last.items() if k != "step"})
    return metrics
