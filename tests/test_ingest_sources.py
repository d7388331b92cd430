"""User-supplied sources: the Banking77-style CSV and dialogue JSONL readers, and their validation."""

import json
from pathlib import Path

import pytest

from sparring.data.sources import read_dialogues_jsonl, read_intent_csv

BANKING77 = Path(__file__).resolve().parents[2] / "shared" / "data" / "banking77" / "train.csv"


def test_csv_quoted_fields_may_hold_newlines(tmp_path):
    path = tmp_path / "u.csv"
    path.write_text('text,category\n"my card,\nit never came",card_arrival\nhow do I top up?,topping_up_by_card\n')
    frame = read_intent_csv(path, 1000)
    assert frame.columns == ["text", "intent"]
    assert frame["text"].to_list() == ["my card,\nit never came", "how do I top up?"]
    assert frame["intent"].to_list() == ["card_arrival", "topping_up_by_card"]


@pytest.mark.skipif(not BANKING77.is_file(), reason="the real Banking77 file lives outside the project")
def test_reads_the_real_banking77_train_split():
    frame = read_intent_csv(BANKING77, 1000)
    assert frame.height == 10_003
    assert frame["intent"].n_unique() == 77
    assert frame.filter(frame["text"].str.contains("\n")).height >= 1  # multi-line quoted fields survived


def test_dialogues_jsonl(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = [
        {
            "id": "a",
            "intent": "card_arrival",
            "outcome": "resolved",
            "turns": [
                {"role": "customer", "text": "where is my card"},
                {"role": "agent", "text": "Let me check."},
            ],
        },
        {
            "id": "b",
            "intent": "cancel_transfer",
            "outcome": "abandoned",
            "persona": "impatient",
            "turns": [{"role": "customer", "text": "stop that payment now"}],
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    frame = read_dialogues_jsonl(path, 1000)
    assert frame["id"].to_list() == ["a", "b"]
    assert frame["persona"].to_list() == ["unknown", "impatient"]
    assert frame["turns"][0].to_list()[1] == {"role": "agent", "text": "Let me check."}
