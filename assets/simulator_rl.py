"""Asset `simulator_rl`: the customer simulator, stage 2 of TRACER (GRPO on replayed sessions), and both
simulators' fidelity on the same held-out sessions, with DA0 played against each."""

from __future__ import annotations

from sparring.catalog import AGENT_SFT, SIMULATOR_RL, SIMULATOR_SFT
from sparring.drivers import StageResult
from sparring.drivers.simulator_rl import Inputs, run
from stagekit.stages import Stage, StageContext, stage_asset

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
def simulator_rl(ctx: StageContext) -> StageResult:
    p, data = ctx.params, ctx.catalog
    da0, _ = data.checkpoint(AGENT_SFT)
    simulator, tokenizer = data.checkpoint(SIMULATOR_SFT)
    inputs = Inputs(
        simulator=simulator,
        tokenizer=tokenizer,
        da0=da0,
        judge=data.judge_models(),
        dialogues=data.dialogues("train"),
        test_dialogues=data.dialogues("test"),
        heldout=data.scenarios("heldout", p.simulator_rl.eval_dialogues),
        agent_max_new_tokens=p.agent_sft.max_new_tokens,
        profile=p.profile,
    )
    return run(inputs, p.simulator_rl, data.path(SIMULATOR_RL), p.seed)
