"""The judge's trained models: held-out oracle accuracy per representation, discriminator AUC, speed.

    .venv/bin/python benchmarks/judge_models.py [--csv ../shared/data/banking77/train.csv] [--compare]
        [--max-train N] [--synthetic-per-intent 60]

With --csv (Banking77-style `text,category`), splits it 80/20 stratified by intent (seed 0) and fits both
judge models on the 80%; without, does the same on the embedded synthetic generator. --compare also fits the
oracle on TF-IDF alone and on embeddings alone. One thread throughout (the project's policy on small VMs).
Prints human-readable lines, then one JSON object as the last line (../shared/METRICS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import polars as pl
import torch
from sklearn.model_selection import train_test_split

from sparring.judge.models import IntentOracle, OracleConfig, build_judge_models, embed, load_encoder


def split(df: pl.DataFrame, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    tr, te = train_test_split(np.arange(df.height), test_size=0.2, stratify=df["intent"].to_numpy(), random_state=seed)
    return df[np.sort(tr)], df[np.sort(te)]


def synthetic(per_intent: int, seed: int) -> pl.DataFrame:
    from sparring.data.synthetic import generate_utterances

    df = generate_utterances(per_intent, seed).select("text", "intent")
    return df.unique("text", keep="first", maintain_order=True)


def oracle_acc(train: pl.DataFrame, test: pl.DataFrame, config: OracleConfig) -> tuple[float, float]:
    start = time.perf_counter()
    oracle = IntentOracle.fit(train["text"].to_list(), train["intent"].to_list(), 0, config)
    fit_s = time.perf_counter() - start
    pred = np.array(oracle.predict(test["text"].to_list()))
    return float(np.mean(pred == test["intent"].to_numpy())), fit_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", default=None, help="Banking77-style CSV (text,category); read, never copied")
    parser.add_argument("--max-train", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", action="store_true", help="also fit TF-IDF-only and embedding-only oracles")
    parser.add_argument("--synthetic-per-intent", type=int, default=60, help="0 skips the synthetic run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    figures: dict[str, float] = {}

    load_encoder()
    probe = [f"my card number {i} has not arrived yet, what should I do?" for i in range(256)]
    start = time.perf_counter()
    embed(probe, use_cache=False)
    figures["embeddings_per_s_1thread"] = round(len(probe) / (time.perf_counter() - start), 1)
    print(f"encoder: {figures['embeddings_per_s_1thread']} short texts/s on 1 thread")

    if args.csv:
        raw = pl.read_csv(args.csv).rename({"category": "intent"}).select("text", "intent")
        train, test = split(raw, args.seed)
        _, _, metrics = build_judge_models(train, test, args.seed, args.max_train)
        for key, value in metrics.items():
            print(f"csv {key}: {value}")
            figures[f"csv_{key}"] = value
        if args.compare:
            if args.max_train:
                from sparring.judge.models import stratified_sample

                train = stratified_sample(train, args.max_train, args.seed)
            for name, config in {
                "tfidf": OracleConfig(use_embeddings=False),
                "emb": OracleConfig(use_tfidf=False),
                "tfidf_emb1": OracleConfig(emb_weight=1.0),
            }.items():
                acc, fit_s = oracle_acc(train, test, config)
                print(f"csv oracle [{name}]: acc {acc:.4f}, fit {fit_s:.1f}s")
                figures[f"csv_oracle_acc_{name}"] = acc

    if args.synthetic_per_intent > 0:
        try:
            df = synthetic(args.synthetic_per_intent, args.seed)
        except ImportError:
            print("synthetic: sparring.data.synthetic not available, skipped")
        else:
            train, test = split(df, args.seed)
            _, _, metrics = build_judge_models(train, test, args.seed, args.max_train)
            for key, value in metrics.items():
                print(f"synthetic {key}: {value}")
                figures[f"synthetic_{key}"] = value
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
