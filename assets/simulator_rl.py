"""Asset `simulator_rl`: the customer simulator, stage 2 of TRACER (GRPO on replayed sessions), and both
simulators' fidelity on the same held-out sessions, with DA0 played against each."""

from __future__ import annotations

from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import AGENT_SFT, FIDELITY, SIMULATOR_RL, SIMULATOR_SFT
from sparring.drivers.simulator_rl import run as run_simulator_rl
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
    report = {"phases": phases.as_dict(), **ran.fidelity(), "train_history": ran.history, "sessions": ran.sessions}
    return StageOutput(metrics=ran.metrics(), report={**report, "steps": ran.result.steps})
