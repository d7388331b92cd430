"""The real Banking77 rows the peer-reward benchmarks measure on (read by path, never copied): an intent slice, one
seed's measure / probe / pool split, each member's routing of those parts (cached beside a warm start), and the
cohort's mean gain with its paired interval (shared by peer_reward, peer_expectation and peer_distil_ceiling)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sparring.data.sources import read_text_csv
from sparring.evaluate.episodes import paired_bootstrap
from sparring.lm.chat import known_intents
from sparring.rollout import agent_opening
from sparring.train.peer_reward import Label, route_intents

BANKING77 = Path(__file__).resolve().parents[2] / "shared" / "data" / "banking77" / "train.csv"


def intent_slice(n: int) -> list[str]:
    """``n`` of the 77 intents, evenly spaced in name order (all of them for n >= 77)."""
    names = sorted(known_intents() & set(read_text_csv(BANKING77)["category"].to_list()))
    return names if n >= len(names) else names[:: len(names) // n][:n]


def split_banking77(
    seed: int, n_measure: int, n_probe: int, intents: Sequence[str]
) -> dict[str, tuple[list[str], list[str]]]:
    """Banking77 train rows of ``intents`` shuffled by ``seed``: measure, probe and the pool (labels withheld)."""
    frame = read_text_csv(BANKING77)
    keep = set(intents)
    rows = [r for r in zip(frame["text"].to_list(), frame["category"].to_list(), strict=True) if r[1] in keep]
    random.Random(seed).shuffle(rows)
    parts = {"measure": rows[:n_measure], "probe": rows[n_measure : n_measure + n_probe]}
    parts["pool"] = rows[n_measure + n_probe :]
    return {k: ([t for t, _ in v], [i for _, i in v]) for k, v in parts.items()}


def split_row_ids(seed: int, intents: Sequence[str]) -> list[int]:
    """The Banking77 train.csv row index (0-based, header excluded) of every row :func:`split_banking77` keeps, in
    its split order (measure, probe, pool): ``random.shuffle``'s permutation depends on the length alone."""
    frame = read_text_csv(BANKING77)
    keep = set(intents)
    ids = [i for i, intent in enumerate(frame["category"].to_list()) if intent in keep]
    random.Random(seed).shuffle(ids)
    return ids


def quiet() -> contextlib.AbstractContextManager:
    """TRL's log dictionaries and warnings off the terminal."""
    sink = io.StringIO()
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(sink))
    stack.enter_context(contextlib.redirect_stderr(sink))
    return stack


def route_parts(model: Any, tokenizer: Any, parts: dict[str, list[str]]) -> tuple[dict[str, list[Label]], dict]:
    """Greedy routings of every part's texts in one batched pass, and its rate (prompt + 2 generated tokens each)."""
    texts = [t for part in parts.values() for t in part]
    start = time.perf_counter()
    votes = route_intents(model, tokenizer, texts)
    seconds = time.perf_counter() - start
    system = getattr(model.config, "agent_system_prompt", "")
    opening = [agent_opening(t, system) for t in texts]
    prompt = sum(len(tokenizer.apply_chat_template(m, add_generation_prompt=True, return_dict=False)) for m in opening)
    out, at = {}, 0
    for key, part in parts.items():
        out[key], at = votes[at : at + len(part)], at + len(part)
    rate = {"route_seconds": round(seconds, 1), "routings_per_s": len(texts) / seconds}
    return out, {**rate, "route_tokens_per_s": (prompt + 2 * len(texts)) / seconds}


def cached_route_parts(
    model: Any, tokenizer: Any, parts: dict[str, list[str]], cached: Path | None
) -> tuple[dict[str, list[Label]], dict]:
    """:func:`route_parts`, kept beside a cached warm start for the same texts (SmolLM2 routes ~5 utterances/s)."""
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    path = None if cached is None else cached / "votes.json"
    if path is not None and path.is_file():
        saved = json.loads(path.read_text())
        if saved["texts_sha256"] == key:
            return saved["votes"], saved["rate"]
    votes, rate = route_parts(model, tokenizer, parts)
    if path is not None:
        path.write_text(json.dumps({"texts_sha256": key, "votes": votes, "rate": rate}))
    return votes, rate


def mean_gain(before_ok: list[list[float]], after_ok: list[list[float]], seed: int) -> tuple[float, list[float]]:
    """The members' mean accuracy after − before and its paired bootstrap 95% interval over the utterances."""
    before_mean = [statistics.mean(col) for col in zip(*before_ok, strict=True)]  # per utterance, over members
    after_mean = [statistics.mean(col) for col in zip(*after_ok, strict=True)]
    low, high = paired_bootstrap(before_mean, after_mean, seed=seed)
    return statistics.mean(after_mean) - statistics.mean(before_mean), [low, high]
