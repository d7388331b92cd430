"""Asset `judge_models`: the judge's intent oracle and realism discriminator, fitted on ingested data."""

from __future__ import annotations

from functools import partial

from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.atomic import replace_dir
from sparring.catalog import JUDGE
from sparring.judge.loading import save_judge_models
from sparring.judge.models import build_judge_models

STAGE = Stage(
    name="judge_models",
    description="Intent oracle (MiniLM + TF-IDF → logistic regression) and realism discriminator for the judge.",
    params=("judge",),
    # the oracle's classes and the discriminator's label patterns come from the taxonomy
    outs=(JUDGE,),
    upstream=("ingest",),
    priority=1,  # simulator_sft waits for it: the longest chain
    headline_metrics=("oracle_acc",),
    group="data",
    kinds=("scikitlearn", "huggingface"),
)


@stage_asset(STAGE)
def judge_models(ctx: StageContext) -> StageOutput:
    dialogues = ctx.catalog.dialogues("train")
    # Later customer turns (identity answers, confirmations) are real speech the utterances lack.
    later_turns = [t["text"] for turns in dialogues["turns"].to_list() for t in turns[1:] if t["role"] == "customer"]
    oracle, discriminator, metrics = build_judge_models(
        ctx.catalog.utterances("train"),
        ctx.catalog.utterances("test"),
        seed=ctx.params.seed,
        max_train=ctx.params.judge.max_train,
        extra_real=later_turns,
    )
    # the folder is replaced whole, once both models are saved
    replace_dir(ctx.catalog.path(JUDGE), partial(save_judge_models, oracle=oracle, discriminator=discriminator))
    return StageOutput(
        metrics={k: v for k, v in metrics.items() if isinstance(v, int | float)},
        report={"source": ctx.params.ingest.utterances.source},
    )
