"""Bad input is refused with the file, row/line and column named, a non-zero exit, and the earlier good output
left exactly as it was."""

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pipelines.cli import app
from sparring.atomic import MANIFEST
from sparring.world.taxonomy import load_taxonomy

ROOT = Path(__file__).resolve().parents[1]
INTENTS = load_taxonomy().intent_names


def good_csv() -> str:
    rows = [f'"help me with {i.replace("_", " ")}, case {k}",{i}' for i in INTENTS for k in range(4)]
    return "text,category\n" + "\n".join(rows) + "\n"


def good_jsonl() -> str:
    lines = []
    for n, intent in enumerate(INTENTS):
        turns = [
            {"role": "customer", "text": f"about {intent} number {n}"},
            {"role": "agent", "text": "On it."},
        ]
        lines.append(json.dumps({"id": f"d{n}", "intent": intent, "outcome": "resolved", "turns": turns}))
    return "\n".join(lines) + "\n"


def jsonl(*dialogues: dict) -> bytes:
    base = {"intent": "card_arrival", "outcome": "resolved", "turns": [{"role": "customer", "text": "x"}]}
    return "".join(json.dumps({**base, **d}) + "\n" for d in dialogues).encode()


def snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture()
def project(tmp_path):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["ingest"]["utterances"].update(source="banking77_csv", path="u.csv")
    raw["ingest"]["dialogues"].update(source="dialogues_jsonl", path="d.jsonl")
    raw["ingest"]["max_text_chars"] = 500
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "u.csv").write_text(good_csv())
    (tmp_path / "d.jsonl").write_text(good_jsonl())
    result = ingest(tmp_path)
    assert result.exit_code == 0, result.output
    return tmp_path


def ingest(root: Path):
    args = ["ingest", "--profile", "quick", "--params", str(root / "params.yaml"), "--out", str(root / "out")]
    return CliRunner().invoke(app, args)


def test_good_input_is_ingested(project):
    files = snapshot(project / "out")
    parquet = {f"{p}{s}.parquet" for p in ("", "dialogues_") for s in ("train", "validation", "test")}
    assert set(files) == parquet | {MANIFEST}  # the manifest marks the folder as sparring's own output
    assert set(json.loads((project / "out" / MANIFEST).read_text())["files"]) == parquet


CASES = {
    "missing file": ("u.csv", None, "u.csv: no such file"),
    "empty file": ("u.csv", b"", "u.csv: the file is empty"),
    "header only": ("u.csv", b"text,category\n", "u.csv: the file has a header but no data rows"),
    "missing column": ("u.csv", b"text,label\nhi,card_arrival\n", "u.csv: missing column 'category'"),
    "unknown intent": (
        "u.csv",
        b"text,category\nhi,card_arrival\nyo,card_arival\n",
        "row 2, column 'category': unknown intent 'card_arival'",
    ),
    "empty text": (
        "u.csv",
        b'text,category\nhi,card_arrival\n"  ",card_arrival\n',
        "row 2, column 'text': empty text",
    ),
    "non-UTF-8": (
        "u.csv",
        b"text,category\nhi,card_arrival\ncaf\xe9 card,card_arrival\n",
        "u.csv: line 3: not valid UTF-8",
    ),
    "absurdly long": (
        "u.csv",
        b"text,category\nhi,card_arrival\n" + b"a" * 600 + b",card_arrival\n",
        "row 2, column 'text': text of 600 characters exceeds max_text_chars=500",
    ),
    "duplicate id": (
        "d.jsonl",
        jsonl({"id": "a"}, {"id": "a", "turns": [{"role": "customer", "text": "y"}]}),
        "line 2, key 'id': duplicate id 'a' (first on line 1)",
    ),
    "malformed JSON": (
        "d.jsonl",
        b'{"id": "a", "intent": "card_arrival",\n',
        "d.jsonl: 1 problem(s):\n  line 1: malformed JSON",
    ),
    "unknown outcome": (
        "d.jsonl",
        jsonl({"id": "a", "outcome": "happy"}),
        "line 1, key 'outcome': 'happy' is not one of",
    ),
    "bad role": (
        "d.jsonl",
        jsonl({"id": "a", "turns": [{"role": "bot", "text": "x"}]}),
        "line 1, key 'turns[0]': each turn needs a role",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_and_loses_nothing(project, case):
    name, content, expected = CASES[case]
    before = snapshot(project / "out")
    target = project / name
    if content is None:
        target.unlink()
    else:
        target.write_bytes(content)
    result = ingest(project)
    assert result.exit_code != 0
    message = " ".join(result.output.split())  # rich may wrap long lines
    assert str(target) in message or str(target) in result.output.replace("\n", "")
    assert " ".join(expected.split()) in message
    assert snapshot(project / "out") == before
    assert not [p for p in project.iterdir() if p.name.startswith(".out.")]  # no temp folder left behind
