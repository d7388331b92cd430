"""Asset `tokenizer`: a byte-level BPE tokenizer with the chat template, trained on the ingested text; for a
pretrained `model.name_or_path`, that model's own tokenizer with sparring's tokens added."""

from __future__ import annotations

from sparring.catalog import TOKENIZER
from sparring.drivers import StageResult
from sparring.drivers.tokenizer import Inputs, run
from stagekit.stages import Stage, StageContext, stage_asset

STAGE = Stage(
    name="tokenizer",
    description="Byte-level BPE (special, intent and tool tokens; chat template) over utterances, dialogues "
    "and rendered expert episodes.",
    params=("tokenizer", "model"),
    # the corpus holds expert episodes: the scripted agents, the rollout, the world's tool results, their rendering
    outs=(TOKENIZER,),
    upstream=("ingest", "scenarios"),
    headline_metrics=("vocab_size",),
    group="data",
    kinds=("huggingface",),
)


@stage_asset(STAGE)
def tokenizer(ctx: StageContext) -> StageResult:
    data = ctx.catalog
    inputs = Inputs(
        utterances=data.utterances("train"),
        dialogues=data.dialogues("train"),
        scenarios=data.scenarios("train"),
        name_or_path=ctx.params.model.name_or_path,
    )
    return run(inputs, ctx.params.tokenizer, data.path(TOKENIZER), ctx.params.seed)
