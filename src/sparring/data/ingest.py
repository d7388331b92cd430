"""The ingestion stage: read the chosen sources, deduplicate, split stratified by intent, write parquet.

Outputs (one folder, replaced atomically so a failed run never leaves half-written files where good ones stood):

    <out>/{train,validation,test}.parquet            utterances: id, text, intent, tool, style, source
    <out>/dialogues_{train,validation,test}.parquet  dialogues: id, intent, persona, outcome, turns

The unlabeled pool of peer-reward RL (``ingest.unlabeled``) is read by :func:`load_unlabeled`, which the
``peer_rl`` stage calls on these splits: it is not written here, only read once to refuse a bad source early.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from sparring.atomic import check_replaceable, replace_dir
from sparring.data import synthetic
from sparring.data.dialogues import generate_dialogues
from sparring.data.sources import (
    DIALOGUE_SCHEMA,
    IngestError,
    read_dialogues_jsonl,
    read_intent_csv,
    read_unlabeled_csv,
)
from sparring.params import Ingest
from sparring.world.taxonomy import load_taxonomy

SPLITS = ("train", "validation", "test")
# What an ingest folder holds: an earlier output (even one written before manifests) is recognized by these names.
OUTPUT_FILES = tuple(f"{prefix}{split}.parquet" for prefix in ("", "dialogues_") for split in SPLITS)


@dataclass
class IngestResult:
    out_dir: Path
    rows: dict[str, int]  # utterances per split
    dialogue_rows: dict[str, int]
    label_counts: dict[str, dict[str, int]]  # split -> intent -> count
    dropped: dict[str, int]  # why -> how many rows deduplication removed
    seconds: float
    extra: dict = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """Flat metrics with stable names, for MLflow, Dagster metadata and reports/ingest.json."""
        m: dict[str, float] = {f"rows_{s}": n for s, n in self.rows.items()}
        m.update({f"dialogues_{s}": n for s, n in self.dialogue_rows.items()})
        m.update({f"dropped_{why}": n for why, n in self.dropped.items()})
        train = self.label_counts["train"].values()
        m["n_intents"] = len(self.label_counts["train"])
        m["train_min_per_intent"] = min(train)
        m["train_max_per_intent"] = max(train)
        return m


def _normalize(text: pl.Expr) -> pl.Expr:
    return text.str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars()


def _stable_id(prefix: str, *parts: str) -> str:
    return f"{prefix}-" + hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]


def deduplicate(utterances: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """Drop repeated texts (same normalized text and intent), and texts labelled with more than one intent:
    a contradictory label teaches a classifier nothing and poisons evaluation."""
    keyed = utterances.with_columns(_normalize(pl.col("text")).alias("_key"))
    unique = keyed.unique(subset=["_key", "intent"], keep="first", maintain_order=True)
    n_labels = unique.group_by("_key").agg(pl.col("intent").n_unique().alias("_n"))
    conflicting = n_labels.filter(pl.col("_n") > 1).select("_key")
    clean = unique.join(conflicting, on="_key", how="anti", maintain_order="left")
    dropped = {"duplicates": keyed.height - unique.height, "conflicting": unique.height - clean.height}
    return clean.drop("_key"), dropped


def stratified_split(frame: pl.DataFrame, by: str, fractions: dict[str, float], seed: int) -> pl.DataFrame:
    """Add a `split` column, stratified by column `by`, deterministic given the seed and the rows' ids.

    Every class with at least 3 rows gets at least one validation (if its fraction > 0) and one test row, so
    per-intent metrics exist for every intent."""
    rng = np.random.default_rng(seed)
    ordered = frame.sort("id")
    order = rng.permutation(ordered.height)
    ordered = ordered.with_columns(pl.Series("_r", order)).sort("_r")
    ordered = ordered.with_columns(pl.int_range(pl.len()).over(by).alias("_rank"), pl.len().over(by).alias("_n"))

    def quota(fraction: float) -> pl.Expr:
        n = (pl.col("_n") * fraction).round(0).cast(pl.Int64)
        minimum = 1 if fraction > 0 else 0
        return pl.when(pl.col("_n") >= 3).then(pl.max_horizontal(n, pl.lit(minimum))).otherwise(n)

    n_test, n_val = quota(fractions["test"]), quota(fractions["validation"])
    split = (
        pl.when(pl.col("_rank") < n_test)
        .then(pl.lit("test"))
        .when(pl.col("_rank") < n_test + n_val)
        .then(pl.lit("validation"))
        .otherwise(pl.lit("train"))
    )
    return ordered.with_columns(split.alias("split")).drop("_r", "_rank", "_n").sort("id")


HELDOUT_SEED_OFFSET = 1_000_003


def load_utterances(cfg: Ingest, seed: int, root: Path) -> pl.DataFrame:
    """The utterance source as id, text, intent, tool, style, source, heldout_pool.

    Synthetic held-out rows come from a second generator seed: each seed writes with its own subset of the
    hand-written phrasings (a different population of customers), so validation and test hold wording the
    train split never saw. Splitting one seed's rows at random would leak phrasings into the test set and
    inflate every accuracy measured on it.
    """
    source = cfg.utterances
    if source.source == "synthetic":
        held = cfg.split.validation + cfg.split.test
        n_heldout = max(4, round(source.per_intent * held))  # ≥ 1 validation and 1 test row per intent

        def generate(n: int, seed: int) -> pl.DataFrame:
            return synthetic.generate_utterances(
                n, seed=seed, style_weights=dict(source.style_weights), typo_rate=source.typo_rate
            )

        frame = pl.concat(
            [
                generate(max(1, source.per_intent - n_heldout), seed).with_columns(heldout_pool=False),
                generate(n_heldout, seed + HELDOUT_SEED_OFFSET).with_columns(heldout_pool=True),
            ]
        )
        too_long = frame.filter(pl.col("text").str.len_chars() > cfg.max_text_chars).height
        if too_long:
            raise ValueError(f"the synthetic generator made {too_long} texts over max_text_chars")
    else:
        frame = read_intent_csv(root / source.path, cfg.max_text_chars).with_columns(
            style=pl.lit("real"), heldout_pool=pl.lit(None, dtype=pl.Boolean)
        )
    tools = {name: i.tool for name, i in load_taxonomy().intents.items()}
    return frame.select(
        pl.struct("intent", "text")
        .map_elements(lambda r: _stable_id("u", r["intent"], r["text"]), return_dtype=pl.String)
        .alias("id"),
        "text",
        "intent",
        pl.col("intent").replace_strict(tools, return_dtype=pl.String).alias("tool"),
        "style",
        pl.lit(source.source).alias("source"),
        "heldout_pool",
    )


def load_dialogues(cfg: Ingest, seed: int, root: Path) -> pl.DataFrame:
    source = cfg.dialogues
    if source.source == "synthetic":
        frame = generate_dialogues(source.count, seed=seed, max_turns=source.max_turns)
    else:
        frame = read_dialogues_jsonl(root / source.path, cfg.max_text_chars)
    frame = frame.select(list(DIALOGUE_SCHEMA)).cast(DIALOGUE_SCHEMA)
    # Identical dialogues (same intent, same turns) add weight, not information.
    texts = frame["turns"].map_elements(
        lambda ts: "\x1e".join(f"{t['role']}:{t['text']}" for t in ts), return_dtype=pl.String
    )
    return (
        frame.with_columns(texts.alias("_key"))
        .unique(subset=["intent", "_key"], keep="first", maintain_order=True)
        .drop("_key")
    )


def load_unlabeled(cfg: Ingest, seed: int, root: Path, heldout_texts: pl.Series) -> pl.DataFrame:
    """The unlabeled pool as id, text, intent (withheld from training), source: the synthetic generator's
    held-out phrasing seed (a population of wording the train split never saw) or a CSV; texts of the validation
    and test splits (``heldout_texts``), where accuracy is measured, are dropped, and so are repeats."""
    source = cfg.unlabeled
    if source.source == "synthetic":
        n = max(1, -(-source.count // len(load_taxonomy().intents)))
        frame = synthetic.generate_utterances(
            n, seed=seed + HELDOUT_SEED_OFFSET, style_weights=dict(cfg.utterances.style_weights)
        ).select("text", "intent")
    else:
        frame = read_unlabeled_csv(root / source.path, cfg.max_text_chars)
    held = pl.DataFrame({"_key": heldout_texts}).select(_normalize(pl.col("_key")))
    keyed = frame.with_columns(_normalize(pl.col("text")).alias("_key"))
    pool = keyed.join(held, on="_key", how="anti", maintain_order="left")
    pool = pool.unique(subset=["_key"], keep="first", maintain_order=True)
    return pool.select(
        pl.col("_key").map_elements(lambda t: _stable_id("x", t), return_dtype=pl.String).alias("id"),
        "text",
        "intent",
        pl.lit(source.source).alias("source"),
    )


def _source_name(cfg: Ingest, root: Path, kind: str) -> str:
    source = getattr(cfg, kind)
    return str(root / source.path) if source.source != "synthetic" else f"ingest.{kind} (synthetic)"


def _refuse_degenerate(cfg: Ingest, root: Path, frames: dict[str, pl.DataFrame], dropped: dict[str, int]) -> None:
    """Refuse, with the counts, a dataset that cannot be split: a split left empty, or an intent missing from a
    split (too few distinct rows: it needs one in train, one in test and, if validation > 0, one there)."""
    needed = [s for s in SPLITS if s != "validation" or cfg.split.validation > 0]
    counts = {s: dict(frames[s]["intent"].value_counts().iter_rows()) for s in SPLITS}
    intents = sorted(set().union(*counts.values()))
    short = [i for i in intents if any(counts[s].get(i, 0) == 0 for s in needed)]
    if short or any(frames[s].height == 0 for s in needed):
        rows = ", ".join(f"{s} {frames[s].height}" for s in SPLITS)
        shown = "; ".join(
            f"intent {i!r}: " + ", ".join(f"{s} {counts[s].get(i, 0)}" for s in SPLITS) for i in short[:5]
        )
        more = f" (and {len(short) - 5} more intents)" if len(short) > 5 else ""
        raise IngestError(
            f"{_source_name(cfg, root, 'utterances')}: too few distinct rows to split: {rows} rows after "
            f"dropping {dropped['duplicates']} duplicate(s) and {dropped['conflicting']} conflicting"
            + (f"; {shown}{more}" if short else "")
            + f"; every intent needs at least {len(needed)} distinct rows, one per split"
        )
    empty = [s for s in needed if frames[f"dialogues_{s}"].height == 0]
    if empty:
        rows = ", ".join(f"{s} {frames[f'dialogues_{s}'].height}" for s in SPLITS)
        raise IngestError(
            f"{_source_name(cfg, root, 'dialogues')}: too few distinct dialogues to split: {rows} after "
            f"deduplication; the {', '.join(empty)} split(s) would be empty (an outcome needs at least 3 dialogues "
            "to reach every split)"
        )


def _split_utterances(utterances: pl.DataFrame, fractions: dict[str, float], seed: int) -> pl.DataFrame:
    if utterances["heldout_pool"].is_null().all():
        return stratified_split(utterances, "intent", fractions, seed).drop("heldout_pool")
    # synthetic: the train pool is train; the held-out pool is split into validation and test
    held = fractions["validation"] + fractions["test"]
    heldout = stratified_split(
        utterances.filter(pl.col("heldout_pool")),
        "intent",
        {"validation": fractions["validation"] / held, "test": fractions["test"] / held},
        seed,
    )
    train = utterances.filter(~pl.col("heldout_pool")).with_columns(split=pl.lit("train"))
    return pl.concat([train, heldout]).sort("id").drop("heldout_pool")


def run_ingest(cfg: Ingest, seed: int, root: Path, out_dir: Path) -> IngestResult:
    """Read, validate, deduplicate and split both sources, then write them; nothing is written on any error.

    Refused before anything is read: an ``out_dir`` holding anything but sparring's own earlier ingest output
    (:class:`~sparring.atomic.OutputRefused`). Refused after reading: a dataset too small to split (IngestError)."""
    start = time.perf_counter()
    check_replaceable(out_dir, recognizes=OUTPUT_FILES)
    fractions = cfg.split.model_dump()
    utterances, dropped = deduplicate(load_utterances(cfg, seed, root))  # keeps the first: train-pool rows win
    utterances = _split_utterances(utterances, fractions, seed)
    # Intents are too many to stratify a few hundred dialogues by; their outcomes are what simulators match.
    dialogues = stratified_split(load_dialogues(cfg, seed, root), "outcome", fractions, seed)

    frames: dict[str, pl.DataFrame] = {}
    for split in SPLITS:
        frames[split] = utterances.filter(pl.col("split") == split).drop("split")
        frames[f"dialogues_{split}"] = dialogues.filter(pl.col("split") == split).drop("split")
    _refuse_degenerate(cfg, root, frames, dropped)
    # peer_rl reads the unlabeled pool at the run's end; a missing or bad file is refused here, at its start
    heldout = pl.concat([frames["validation"], frames["test"]])["text"]
    unlabeled = load_unlabeled(cfg, seed, root, heldout)

    def write_all(folder: Path) -> None:
        for name, frame in frames.items():
            frame.write_parquet(folder / f"{name}.parquet")

    replace_dir(out_dir, write_all, recognizes=OUTPUT_FILES)

    label_counts = {split: dict(sorted(frames[split]["intent"].value_counts().iter_rows())) for split in SPLITS}
    return IngestResult(
        out_dir=out_dir,
        rows={s: frames[s].height for s in SPLITS},
        dialogue_rows={s: frames[f"dialogues_{s}"].height for s in SPLITS},
        label_counts=label_counts,
        dropped=dropped,
        seconds=time.perf_counter() - start,
        extra={
            "outcomes": dict(sorted(dialogues["outcome"].value_counts().iter_rows())),
            "unlabeled_rows": unlabeled.height,
        },
    )


def check_splits(out_dir: Path) -> list[str]:
    """Problems with written splits (empty list = healthy): missing files, intents absent from train,
    an utterance in more than one split, or a held-out split without an intent that has ≥ 3 rows."""
    problems = []
    missing = [s for s in SPLITS if not (out_dir / f"{s}.parquet").is_file()]
    if missing:
        return [f"{out_dir}: missing split file(s) {missing}"]
    frames = {s: pl.read_parquet(out_dir / f"{s}.parquet") for s in SPLITS}
    seen: dict[str, str] = {}
    for split, frame in frames.items():
        for text_id in frame["id"]:
            if text_id in seen:
                problems.append(f"utterance {text_id} is in both {seen[text_id]} and {split}")
            seen[text_id] = split
    all_intents = pl.concat(frames.values())["intent"].value_counts()
    big = set(all_intents.filter(pl.col("count") >= 3)["intent"])
    for intent in sorted(big - set(frames["train"]["intent"])):
        problems.append(f"intent {intent!r} has no train rows")
    for intent in sorted(big - set(frames["test"]["intent"])):
        problems.append(f"intent {intent!r} has no test rows")
    return problems
