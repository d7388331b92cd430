"""Asset `simulator_sft`: the customer simulator, stage 1 of TRACER (SFT on dialogues), with its fidelity
(sparring.drivers.simulator_sft)."""

from __future__ import annotations

from pipelines.kit.checks import report_check
from pipelines.kit.stages import Plot, Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import FIDELITY, SIMULATOR_SFT
from sparring.drivers.simulator_sft import run as run_simulator_sft
from sparring.evaluate import checks
from sparring.lm.checkpoints import save_checkpoint

STAGE = Stage(
    name="simulator_sft",
    description="Customer simulator (TRACER stage 1): a copy drill and an opening drill, then SFT on dialogues, "
    "utterances and scripted episodes, each turn conditioned on the hidden goal and persona; fidelity on held-out "
    "data.",
    params=("model", "simulator_sft"),
    # besides the trainer: the model it builds, the scripted episodes it trains on, the judge models and outcome
    # classes (data/synthetic.py's OUTCOMES) its fidelity is measured with
    outs=(SIMULATOR_SFT,),
    upstream=("ingest", "scenarios", "tokenizer", "judge_models"),
    priority=1,  # the longest chain to the cycles: start it before anything else that is ready
    headline_metrics=("sim_faithfulness",),
    series=Plot("step", "train_loss", "simulator SFT: training loss (drills, then SFT)"),
    group="warm_start",
    kinds=("pytorch", "huggingface", "mlflow"),
)


@stage_asset(STAGE)
def simulator_sft(ctx: StageContext) -> StageOutput:
    p, data = ctx.params, ctx.catalog
    tokenizer, scenarios = data.tokenizer(), {name: data.scenarios(name) for name in ("train", "heldout")}
    done = run_simulator_sft(
        p.model, tokenizer, data.utterances("train"), (data.dialogues("train"), data.dialogues("test")), scenarios,
        data.judge_models(), p.simulator_sft, data.scratch(STAGE.name), p.seed,
    )  # fmt: skip
    ctx.log.curves(done.curves)
    with done.phases.time("save_checkpoint"):  # the fidelity beside the weights: evaluate reads it (catalog.FIDELITY)
        results = {FIDELITY: {"profile": p.profile, "sft": done.fidelity}}
        save_checkpoint(done.model, tokenizer, data.path(SIMULATOR_SFT), results)
        ctx.log.checkpoint(data.path(SIMULATOR_SFT), "")
    return StageOutput(metrics=done.metrics, report={"phases": done.phases.as_dict(), "sessions": done.sessions})


simulator_is_faithful = report_check(
    "simulator_sft", "simulator_is_faithful", checks.simulator_is_faithful.__doc__.replace("\n", " "),
    checks.simulator_is_faithful,
)  # fmt: skip
