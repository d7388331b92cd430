"""Fit the judge's two trained models on ingested data and measure them on the held-out split.

The models themselves live in `oracle.py` (intent oracle, sentence encoder) and `realism.py` (realism
discriminator); this module re-exports their public names so callers need one import.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
from sklearn.metrics import f1_score, roc_auc_score

from sparring.judge.oracle import (
    IntentOracle,
    OracleConfig,
    embed,
    intent_named_outright,
    join_turns,
    load_encoder,
    naturally_named_intents,
)
from sparring.judge.realism import CORRUPTIONS, RealismConfig, RealismDiscriminator, corrupt

__all__ = [
    "CORRUPTIONS",
    "IntentOracle",
    "OracleConfig",
    "RealismConfig",
    "RealismDiscriminator",
    "build_judge_models",
    "corrupt",
    "embed",
    "intent_named_outright",
    "join_turns",
    "load_encoder",
    "naturally_named_intents",
    "stratified_sample",
]


def stratified_sample(df: pl.DataFrame, n: int | None, seed: int, by: str = "intent") -> pl.DataFrame:
    """At most `n` rows, every `by` group in proportion and each kept while n allows, in the original row
    order. Returns `df` itself when n is None or not smaller."""
    if n is None or n >= df.height:
        return df
    if n <= 0:
        raise ValueError(f"max rows must be positive, got {n}")
    # Each row's position within its shuffled group, as a quantile: taking the n smallest quantiles keeps
    # every group at the same share. Each group's first row goes ahead of all else so small groups survive.
    rank = pl.col("_u").rank("ordinal").over(by)
    ranked = (
        df.with_row_index("_row")
        .with_columns(pl.Series("_u", np.random.default_rng(seed).random(df.height)))
        .with_columns((rank > 1).alias("_later"), ((rank - 0.5) / pl.len().over(by)).alias("_q"))
    )
    picked = ranked.sort(["_later", "_q", "_u"]).head(n).sort("_row")
    return picked.drop("_row", "_u", "_later", "_q")


def _check(df: pl.DataFrame, name: str) -> None:
    missing = {"text", "intent"} - set(df.columns)
    if missing:
        raise ValueError(f"{name} lacks columns {sorted(missing)}; has {df.columns}")


def build_judge_models(
    train: pl.DataFrame,
    test: pl.DataFrame,
    seed: int,
    max_train: int | None = None,
    oracle_config: OracleConfig | None = None,
    realism_config: RealismConfig | None = None,
    extra_real: Sequence[str] = (),
) -> tuple[IntentOracle, RealismDiscriminator, dict[str, Any]]:
    """Fit the oracle and the discriminator on `train` (subsampled, stratified by intent, to `max_train`
    rows), and report on `test`: accuracy, macro F1, AUC against held-out corruptions, timings.

    `extra_real` adds real customer texts for the discriminator only, e.g. the later turns of real dialogues
    (identity answers, confirmations), which utterances alone do not show it.

    Over 60 lines: the oracle and the discriminator fit and measured on one split, in order."""
    _check(train, "train")
    _check(test, "test")
    train = stratified_sample(train.filter(pl.col("text").str.strip_chars() != ""), max_train, seed)
    texts, intents = train["text"].to_list(), train["intent"].to_list()
    test_texts, test_intents = test["text"].to_list(), test["intent"].to_list()

    load_encoder()  # loading is a one-off; keep it out of the fit timing
    start = time.perf_counter()
    oracle = IntentOracle.fit(texts, intents, seed, oracle_config)
    oracle_fit_s = time.perf_counter() - start
    start = time.perf_counter()
    disc = RealismDiscriminator.fit([*texts, *extra_real], seed, config=realism_config)
    disc_fit_s = time.perf_counter() - start

    metrics: dict[str, Any] = {
        "n_train": len(texts),
        "n_extra_real": len(extra_real),
        "n_test": len(test_texts),
        "n_intents": len(oracle.classes_),
        "oracle_fit_s": round(oracle_fit_s, 2),
        "discriminator_fit_s": round(disc_fit_s, 2),
        "natural_label_intents": len(oracle.natural_label_intents),
    }
    if test_texts:
        proba = oracle.predict_proba(test_texts)
        pred = [str(c) for c in oracle.classes_[proba.argmax(axis=1)]]
        col = {str(c): i for i, c in enumerate(oracle.classes_)}
        p_true = np.array([proba[r, col[i]] if i in col else 0.0 for r, i in enumerate(test_intents)])
        metrics["oracle_acc"] = float(np.mean([p == t for p, t in zip(pred, test_intents, strict=True)]))
        metrics["oracle_macro_f1"] = float(f1_score(test_intents, pred, average="macro", zero_division=0))
        metrics["oracle_mean_prob_true"] = float(p_true.mean())
        # A different seed from the one the discriminator trained on: these exact fakes are new to it.
        fakes, kinds = corrupt(test_texts, seed + 1)
        real_p, fake_p = disc.prob_real(test_texts), disc.prob_real(fakes)
        labels = np.r_[np.ones(len(real_p)), np.zeros(len(fake_p))]
        metrics["discriminator_auc_heldout_corruptions"] = float(roc_auc_score(labels, np.r_[real_p, fake_p]))
        metrics["discriminator_mean_prob_real_test"] = float(real_p.mean())
        kind_arr = np.array(kinds)
        for kind in CORRUPTIONS:
            sel = fake_p[kind_arr == kind]
            if len(sel):
                y = np.r_[np.ones(len(real_p)), np.zeros(len(sel))]
                metrics[f"discriminator_auc_{kind}"] = float(roc_auc_score(y, np.r_[real_p, sel]))
        metrics["intent_named_rate_test"] = float(
            np.mean([intent_named_outright(t, i) for t, i in zip(test_texts, test_intents, strict=True)])
        )
        sample = test_texts[:512]
        start = time.perf_counter()
        embed(sample, use_cache=False)  # the oracle just embedded these: time the encoder, not the memo
        metrics["embeddings_per_s"] = round(len(sample) / (time.perf_counter() - start), 1)
    return oracle, disc, metrics
