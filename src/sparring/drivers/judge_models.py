"""The judge_models stage: the judge's intent oracle (MiniLM + TF-IDF → logistic regression) and realism
discriminator, fitted on the ingested train split (and the dialogues' later customer turns), measured on the test
split, saved together."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import polars as pl

from sparring.atomic import replace_dir
from sparring.drivers import StageResult
from sparring.judge.loading import save_judge_models
from sparring.judge.models import build_judge_models
from sparring.params import Judge


@dataclass
class Inputs:
    utterances: pl.DataFrame  # the train split: both models are fitted on it
    test: pl.DataFrame  # the test split: both models are measured on it
    dialogues: pl.DataFrame  # the train split's dialogues: their later customer turns are more real speech
    source: str  # params' `ingest.utterances.source`: where the utterances came from (the report says)


def run(inputs: Inputs, settings: Judge, out_dir: Path, seed: int) -> StageResult:
    """The oracle and the discriminator fitted, measured and saved to ``out_dir``."""
    # Later customer turns (identity answers, confirmations) are real speech the utterances lack.
    turns = inputs.dialogues["turns"].to_list()
    later_turns = [t["text"] for dialogue in turns for t in dialogue[1:] if t["role"] == "customer"]
    oracle, discriminator, metrics = build_judge_models(
        inputs.utterances, inputs.test, seed=seed, max_train=settings.max_train, extra_real=later_turns
    )
    # the folder is replaced whole, once both models are saved
    replace_dir(out_dir, partial(save_judge_models, oracle=oracle, discriminator=discriminator))
    return StageResult(
        metrics={k: v for k, v in metrics.items() if isinstance(v, int | float)},
        report={"source": inputs.source},
    )
