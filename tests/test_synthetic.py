"""Tests for the synthetic utterance and dialogue generator (sparring.data.synthetic)."""

from __future__ import annotations

import random
import re

import polars as pl
import pytest

from sparring.data.synthetic import (
    OUTCOMES,
    PERSONAS,
    STYLES,
    _lexicon,
    _Writer,
    generate_dialogues,
    generate_utterances,
)
from sparring.world.taxonomy import load_taxonomy

INTENTS = load_taxonomy().intent_names


@pytest.fixture(scope="module")
def utts() -> pl.DataFrame:
    return generate_utterances(20, seed=0)


@pytest.fixture(scope="module")
def dialogues() -> pl.DataFrame:
    return generate_dialogues(500, seed=0)


def test_lexicon_covers_every_intent() -> None:
    lex = _lexicon()["intents"]
    assert set(lex) == set(INTENTS)
    for name in INTENTS:
        spec = lex[name]
        assert len(spec["core"]) >= 6, name
        assert len(spec["vague"]) >= 3 and len(spec["camo"]) >= 3, name
        assert spec["summary"], name


def test_every_template_renders() -> None:
    # Catches unknown slot names and unbalanced [a|b] groups in the JSON before they surface at random.
    lex = _lexicon()
    writer = _Writer(random.Random(0), typo_rate=0.0)
    ctx = {k: "x" for k in ("first_name", "surname", "last4", "dob", "postcode", "email", "agent_name")}
    ctx |= {"summary": "x", "team": "x", "id_detail": "x", "complaint": "x"}
    templates = [
        t for key in ("openers", "closers", "context", "extras", "camo_prefix", "camo_suffix") for t in lex[key]
    ]
    templates += [t for spec in lex["intents"].values() for key in ("core", "vague", "camo") for t in spec[key]]

    def strings(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        values = node.values() if isinstance(node, dict) else node
        return [s for v in values for s in strings(v)]  # type: ignore[union-attr]

    templates += strings({k: v for k, v in lex["dialogue"].items() if k != "teams"})
    for template in templates:
        rendered = writer.fill(template, ctx)
        assert not re.search(r"[\[\]{}|]", rendered), (template, rendered)


def test_utterance_schema_and_exact_counts(utts: pl.DataFrame) -> None:
    assert utts.columns == ["text", "intent", "style"]
    assert all(dtype == pl.String for dtype in utts.dtypes)
    assert utts.height == 20 * len(INTENTS)
    counts = dict(utts.group_by("intent").len().iter_rows())
    assert counts == {name: 20 for name in INTENTS}


def test_every_intent_and_style_present(utts: pl.DataFrame) -> None:
    assert set(utts["intent"]) == set(INTENTS)
    assert set(utts["style"]) == set(STYLES)


def test_templates_fully_rendered(utts: pl.DataFrame) -> None:
    leftovers = utts.filter(pl.col("text").str.contains(r"[\[\]{}|]") | (pl.col("text").str.len_chars() < 5))
    assert leftovers.height == 0, leftovers["text"].head(5).to_list()


def test_determinism(utts: pl.DataFrame) -> None:
    assert generate_utterances(20, seed=0).equals(utts)
    other = generate_utterances(20, seed=1)
    assert not other.equals(utts)
    assert (other["text"] != utts["text"]).mean() > 0.5


def test_style_weights_and_validation() -> None:
    only_vague = generate_utterances(3, seed=0, style_weights={"vague": 1.0})
    assert set(only_vague["style"]) == {"vague"}
    with pytest.raises(ValueError):
        generate_utterances(3, seed=0, style_weights={"rude": 1.0})
    with pytest.raises(ValueError):
        generate_utterances(3, seed=0, style_weights={"vague": 0.0})
    assert generate_utterances(0, seed=0).height == 0


def test_distinct_fraction() -> None:
    df = generate_utterances(100, seed=0)
    assert df["text"].n_unique() / df.height >= 0.9


def test_tfidf_cross_seed_accuracy(utts: pl.DataFrame) -> None:
    # Intents must be recoverable from the text, but not so trivially that the test seed is pure memorisation.
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    test = generate_utterances(20, seed=1)
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    clf = OneVsRestClassifier(LogisticRegression(C=10, solver="liblinear"))
    clf.fit(vec.fit_transform(utts["text"].to_list()), utts["intent"].to_list())
    acc = float((clf.predict(vec.transform(test["text"].to_list())) == test["intent"].to_numpy()).mean())
    assert 0.75 <= acc <= 0.99, acc


def test_dialogue_schema(dialogues: pl.DataFrame) -> None:
    assert dialogues.columns == ["id", "intent", "persona", "outcome", "turns"]
    assert dialogues.schema["turns"] == pl.List(pl.Struct({"role": pl.String, "text": pl.String}))
    assert all(dialogues.schema[c] == pl.String for c in ("id", "intent", "persona", "outcome"))
    assert dialogues["id"][17] == "syn-dlg-000017"
    assert dialogues["id"].n_unique() == dialogues.height
    assert set(dialogues["persona"]) == set(PERSONAS)
    assert set(dialogues["outcome"]) == set(OUTCOMES)


def test_dialogue_turn_structure(dialogues: pl.DataFrame) -> None:
    for row in dialogues.iter_rows(named=True):
        roles = [t["role"] for t in row["turns"]]
        assert 2 <= len(roles) <= 6
        assert roles == ["customer" if i % 2 == 0 else "agent" for i in range(len(roles))], roles
        assert all(t["text"].strip() for t in row["turns"])
        assert not any(re.search(r"[\[\]{}]", t["text"]) for t in row["turns"])
        expected_last = "customer" if row["outcome"] == "abandoned" else "agent"
        assert roles[-1] == expected_last, row


def test_dialogue_endings_match_outcome(dialogues: pl.DataFrame) -> None:
    escalated = dialogues.filter(pl.col("outcome") == "escalated")
    last = escalated["turns"].list.last().struct.field("text").str.to_lowercase()
    assert last.str.contains("team").all()


def test_outcomes_depend_on_persona(dialogues: pl.DataFrame) -> None:
    rates = dialogues.group_by("persona").agg(
        (pl.col("outcome") == "abandoned").mean().alias("abandoned"),
        (pl.col("outcome") == "escalated").mean().alias("escalated"),
    )
    r = {p: (a, e) for p, a, e in rates.iter_rows()}
    assert r["impatient"][0] > r["cooperative"][0] + 0.2
    assert r["social_engineering"][1] > r["cooperative"][1] + 0.3


def test_dialogues_balanced_and_deterministic() -> None:
    df = generate_dialogues(2 * len(INTENTS), seed=3, max_turns=3)
    assert dict(df.group_by("intent").len().iter_rows()) == {name: 2 for name in INTENTS}
    assert df["turns"].list.len().max() <= 3
    assert df.equals(generate_dialogues(2 * len(INTENTS), seed=3, max_turns=3))
    assert not df.equals(generate_dialogues(2 * len(INTENTS), seed=4, max_turns=3))
    long = generate_dialogues(50, seed=0, max_turns=10)
    assert long["turns"].list.len().max() <= 10
    with pytest.raises(ValueError):
        generate_dialogues(5, seed=0, max_turns=2)
