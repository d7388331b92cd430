"""Readers for user-supplied data, validated at the edge.

Every problem is reported with the file, the row (or line) and the column at fault, and nothing is written
until a whole source has been read and checked. Up to ``MAX_REPORTED`` problems are listed at once so a user can
fix a file in one pass.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl

from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import DOMAIN

MAX_REPORTED = 5
ROLES = ("customer", "agent")
OUTCOMES = ("resolved", "escalated", "abandoned")


class IngestError(ValueError):
    """Input data that cannot be ingested; the message names the file and the row/line and column at fault."""


def _raise_if(problems: list[str], path: Path, total: int | None = None) -> None:
    if not problems:
        return
    total = total if total is not None else len(problems)
    more = f"\n  … and {total - MAX_REPORTED} more" if total > MAX_REPORTED else ""
    raise IngestError(f"{path}: {total} problem(s):\n  " + "\n  ".join(problems[:MAX_REPORTED]) + more)


def _read_utf8(path: Path) -> str:
    if not path.exists():
        raise IngestError(f"{path}: no such file")
    if not path.is_file():
        raise IngestError(f"{path}: not a regular file")
    data = path.read_bytes()
    if not data.strip():
        raise IngestError(f"{path}: the file is empty")
    try:
        return data.decode("utf-8-sig")  # tolerate a BOM, which spreadsheet exports add
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise IngestError(
            f"{path}: line {line}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "re-save the file as UTF-8"
        ) from None


def _check_text(text: object, where: str, max_chars: int, problems: list[str]) -> None:
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}: empty text")
    elif len(text) > max_chars:
        problems.append(f"{where}: text of {len(text)} characters exceeds max_text_chars={max_chars}")


def read_intent_csv(path: str | Path, max_text_chars: int) -> pl.DataFrame:
    """A Banking77-style CSV with columns ``text,category`` → DataFrame[text, intent].

    Quoted fields may hold newlines, so rows are counted by the CSV parser, not by lines: "row N" is the N-th
    data row after the header.
    """
    path = Path(path)
    content = _read_utf8(path)
    try:
        frame = pl.read_csv(io.StringIO(content), infer_schema=False, truncate_ragged_lines=False)
    except Exception as exc:  # polars raises several error types for malformed CSV
        raise IngestError(f"{path}: not a readable CSV: {exc}") from None
    if frame.height == 0:
        raise IngestError(f"{path}: the file has a header but no data rows")
    missing = [c for c in ("text", "category") if c not in frame.columns]
    if missing:
        raise IngestError(f"{path}: missing column {missing[0]!r} (found columns: {frame.columns})")

    intents = set(load_taxonomy().intents)
    problems: list[str] = []
    for row, (text, category) in enumerate(frame.select("text", "category").iter_rows(), start=1):
        _check_text(text, f"row {row}, column 'text'", max_text_chars, problems)
        if category not in intents:
            problems.append(f"row {row}, column 'category': unknown intent {category!r}")
    _raise_if(problems, path)
    return frame.select(pl.col("text").str.strip_chars(), pl.col("category").alias("intent"))


def read_dialogues_jsonl(path: str | Path, max_text_chars: int) -> pl.DataFrame:
    """One dialogue per line: ``{"id", "turns": [{"role", "text"}], "intent", "outcome"}`` (persona optional).

    Over 60 lines: one check per field of a dialogue line, each naming the line and field at fault."""
    path = Path(path)
    content = _read_utf8(path)
    intents = set(load_taxonomy().intents)
    problems: list[str] = []
    first_line_of: dict[str, int] = {}
    records: list[dict] = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: malformed JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{where}: expected a JSON object, got {type(obj).__name__}")
            continue
        missing = [k for k in ("id", "turns", "intent", "outcome") if k not in obj]
        if missing:
            problems.append(f"{where}: missing key {missing[0]!r}")
            continue
        dialogue_id = obj["id"]
        if not isinstance(dialogue_id, str) or not dialogue_id.strip():
            problems.append(f"{where}, key 'id': must be a non-empty string")
        elif dialogue_id in first_line_of:
            problems.append(
                f"{where}, key 'id': duplicate id {dialogue_id!r} (first on line {first_line_of[dialogue_id]})"
            )
        else:
            first_line_of[dialogue_id] = number
        if obj["intent"] not in intents:
            problems.append(f"{where}, key 'intent': unknown intent {obj['intent']!r}")
        if obj["outcome"] not in OUTCOMES:
            problems.append(f"{where}, key 'outcome': {obj['outcome']!r} is not one of {list(OUTCOMES)}")
        turns = obj["turns"]
        if not isinstance(turns, list) or not turns:
            problems.append(f"{where}, key 'turns': must be a non-empty list")
            continue
        for t, turn in enumerate(turns):
            at = f"{where}, key 'turns[{t}]'"
            if not isinstance(turn, dict) or turn.get("role") not in ROLES:
                problems.append(f"{at}: each turn needs a role in {list(ROLES)}")
                continue
            _check_text(turn.get("text"), at, max_text_chars, problems)
        if not any(isinstance(t, dict) and t.get("role") == "customer" for t in turns):
            problems.append(f"{where}, key 'turns': no customer turn")
        records.append(
            {
                "id": str(dialogue_id),
                "intent": obj["intent"],
                "persona": str(obj.get("persona") or "unknown"),
                "outcome": obj["outcome"],
                "turns": [{"role": t["role"], "text": str(t["text"]).strip()} for t in turns if isinstance(t, dict)],
            }
        )
    if not records and not problems:
        raise IngestError(f"{path}: the file holds no dialogues")
    _raise_if(problems, path)
    return pl.DataFrame(records, schema=DIALOGUE_SCHEMA)


DIALOGUE_SCHEMA = {
    "id": pl.String,
    "intent": pl.String,
    "persona": pl.String,
    "outcome": pl.String,
    "turns": pl.List(pl.Struct({"role": pl.String, "text": pl.String})),
}


def read_text_csv(path: str | Path, max_text_chars: int = 100_000) -> pl.DataFrame:
    """A CSV with at least a `text` column (other columns are kept), for batch inference."""
    path = Path(path)
    content = _read_utf8(path)
    try:
        frame = pl.read_csv(io.StringIO(content), infer_schema=False)
    except Exception as exc:
        raise IngestError(f"{path}: not a readable CSV: {exc}") from None
    if "text" not in frame.columns:
        raise IngestError(f"{path}: missing column 'text' (found columns: {frame.columns})")
    if frame.height == 0:
        raise IngestError(f"{path}: the file has a header but no data rows")
    problems: list[str] = []
    for row, text in enumerate(frame["text"], start=1):
        _check_text(text, f"row {row}, column 'text'", max_text_chars, problems)
    _raise_if(problems, path)
    return frame


def read_unlabeled_csv(path: str | Path, max_text_chars: int) -> pl.DataFrame:
    """An unlabeled pool: a CSV with a ``text`` column (a one-column file, or Banking77-style ``text,category``)
    → DataFrame[text, intent], ``intent`` the row's known category or null. Those labels are withheld from training:
    peer-reward RL only measures its pseudo-labels against them."""
    frame = read_text_csv(path, max_text_chars)
    intents = set(load_taxonomy().intents)
    labels = frame["category"] if "category" in frame.columns else pl.Series([None] * frame.height, dtype=pl.String)
    named = {c for c in labels.to_list() if c}
    if named and not named & intents:  # another domain's customers (Banking77's in a shop): not this world's words
        example = sorted(named)[0]
        raise IngestError(
            f"{path}: none of its {len(named)} categories is an intent of this domain ({DOMAIN.name}; e.g. "
            f"{example!r}): its customers are another domain's. Use ingest.unlabeled.source: synthetic, or a CSV of "
            f"this domain's customers"
        )
    return pl.DataFrame(
        {
            "text": frame["text"].str.strip_chars(),
            "intent": [c if c in intents else None for c in labels.to_list()],
        },
        schema={"text": pl.String, "intent": pl.String},
    )
