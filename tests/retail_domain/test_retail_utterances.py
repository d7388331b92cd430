"""The retail domain's synthetic customer openings (sparring.data.synthetic reading retail_lexicon.json; run by
tests/test_domain_retail.py in a process of its own, SPARRING_DOMAIN=retail): the lexicon holds every key the
generator reads, every template renders, every intent and style writes text, no opening names an id or an identity
fact, and a seed fixes the output."""

from __future__ import annotations

import random
import re

import pytest

from sparring.data.synthetic import _SHARED_POOLS, STYLES, Writer, _lexicon, generate_utterances
from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import DOMAIN

INTENTS = load_taxonomy().intent_names
PHRASINGS = ("core", "vague", "camo")
CODE_SLOTS = {"amount", "small_amount", "big_amount"}  # Writer._slot makes these; every other slot is the lexicon's
LEFTOVER = re.compile(r"[\[\]{}|]")
# What a customer's first message must not say: an email, a zip, an order/product/item or user id, "I'm <Name>".
IDS_AND_FACTS = re.compile(
    r"@|\b\d{5}\b|#\s*W?\d|\bW\d{4,}|\d{6,}|\b[a-z]+_[a-z]+_\d+\b|\b(?:name is|I am|I'm)\s+[A-Z][a-z]",
)


@pytest.fixture(scope="module")
def lex() -> dict:
    return _lexicon()


def _templates(lex: dict) -> list[str]:
    shared = [t for key in _SHARED_POOLS for t in lex[key]]
    per_intent = [t for spec in lex["intents"].values() for key in PHRASINGS for t in spec[key]]
    return shared + per_intent + [v for values in lex["slots"].values() for v in values]


def test_the_active_lexicon_is_retails_and_has_every_key_the_generator_reads(lex):
    assert DOMAIN.name == "retail" and DOMAIN.lexicon.name == "retail_lexicon.json"
    for key in _SHARED_POOLS:
        assert len(lex[key]) >= 5 and all(isinstance(t, str) and t.strip() for t in lex[key]), key
    assert set(lex["intents"]) == set(INTENTS)
    for name, spec in lex["intents"].items():
        assert isinstance(spec["summary"], str) and spec["summary"], name
        assert len(spec["core"]) >= 6 and 4 <= len(spec["vague"]) <= 6 and 3 <= len(spec["camo"]) <= 5, name
        phrasings = [t for key in PHRASINGS for t in spec[key]]
        assert len(set(phrasings)) == len(phrasings), name  # no phrasing twice within an intent
    assert all(c["weight"] > 0 and c["words"] for c in lex["currencies"].values())


def test_every_slot_a_template_names_is_defined_and_every_alternative_is_balanced(lex):
    defined = set(lex["slots"]) | CODE_SLOTS
    for template in _templates(lex):
        assert set(re.findall(r"\{(\w+)\}", template)) <= defined, template
        assert not LEFTOVER.search(re.sub(r"\{\w+\}", "", re.sub(r"\[[^\[\]{}]*\]", "", template))), template
    for name, values in lex["slots"].items():
        assert values and all("[" not in v for v in values), name  # Writer._slot fills slots but picks no [a|b]
    assert not set(lex["slots"]) & CODE_SLOTS  # a lexicon slot of that name would be shadowed by the code's


def test_every_intent_and_style_writes_fully_rendered_text():
    writer = Writer(random.Random(0), typo_rate=0.05)
    for intent in INTENTS:
        for i in range(200):
            style = STYLES[i % len(STYLES)]
            text = writer.utterance(intent, style, plain=i % 8 == 0)
            assert len(text) >= 5 and not LEFTOVER.search(text), (intent, style, text)


@pytest.mark.parametrize("style", STYLES)
def test_generate_utterances_works_for_every_style(style):
    frame = generate_utterances(5, seed=0, style_weights={style: 1.0})
    assert frame.height == 5 * len(INTENTS)
    assert set(frame["style"]) == {style} and frame["intent"].to_list() == [i for i in INTENTS for _ in range(5)]
    assert all(len(t) >= 5 and not LEFTOVER.search(t) for t in frame["text"])


def test_no_opening_names_an_id_or_an_identity_fact():
    frame = generate_utterances(200, seed=1, typo_rate=0.0, phrase_keep=1.0)
    names = [
        *DOMAIN.generator_data("first_names"),
        *DOMAIN.generator_data("last_names"),
        *DOMAIN.generator_data("streets"),
        *(city for city, _, _ in DOMAIN.generator_data("cities")),
    ]
    known = re.compile(rf"\b(?:{'|'.join(map(re.escape, names))})\b")
    for text in frame["text"]:
        assert not IDS_AND_FACTS.search(text) and not known.search(text), text


def test_amounts_are_in_the_shops_currency():
    writer = Writer(random.Random(2), typo_rate=0.0)
    amounts = [writer.fill(slot) for _ in range(300) for slot in ("{amount}", "{small_amount}", "{big_amount}")]
    dollars = re.compile(r"\$\d[\d,]*(?:\.\d\d)?|\d[\d,]*(?:\.\d\d)? (?:dollars|bucks|USD)")
    assert all(dollars.fullmatch(a) for a in amounts), [a for a in amounts if not dollars.fullmatch(a)][:5]
    assert {"$", "bucks"} <= {w for a in amounts for w in ("$", "bucks") if w in a}  # both forms are written


def test_a_seed_fixes_the_output_and_another_seed_changes_it():
    first = generate_utterances(10, seed=7)
    assert first.equals(generate_utterances(10, seed=7))
    assert not first.equals(generate_utterances(10, seed=8))
    assert len(set(first["text"])) > 0.8 * first.height  # varied, not one template repeated
