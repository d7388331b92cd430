"""Asset `simulator_sft`: the customer simulator, stage 1 of TRACER (SFT on dialogues), with its fidelity
(sparring.drivers.simulator_sft)."""

from __future__ import annotations

from sparring.catalog import SIMULATOR_SFT
from sparring.drivers import StageResult
from sparring.drivers.simulator_sft import Inputs, run
from sparring.evaluate import checks
from stagekit.checks import report_check
from stagekit.stages import Plot, Stage, StageContext, stage_asset

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
def simulator_sft(ctx: StageContext) -> StageResult:
    data = ctx.catalog
    inputs = Inputs(
        model=ctx.params.model,
        tokenizer=data.tokenizer(),
        scenarios={name: data.scenarios(name) for name in ("train", "heldout")},
        utterances=data.utterances("train"),
        dialogues=data.dialogues("train"),
        test_dialogues=data.dialogues("test"),
        judge=data.judge_models(),
        scratch=data.scratch(STAGE.name),
        profile=ctx.params.profile,
    )
    return run(inputs, ctx.params.simulator_sft, data.path(SIMULATOR_SFT), ctx.params.seed)


simulator_is_faithful = report_check(
    "simulator_sft", "simulator_is_faithful", checks.simulator_is_faithful.__doc__.replace("\n", " "),
    checks.simulator_is_faithful,
)  # fmt: skip
