"""Retail's synthetic support dialogues (sparring.data.dialogues over retail_lexicon.json's dialogue key; run by
tests/test_domain_retail.py in a process of its own, SPARRING_DOMAIN=retail): the lexicon holds every key the
generator reads, in banking's shape; every intent and persona writes dialogues with nothing left unfilled; each ending
follows its outcome; the identity a customer gives reads back (customer_view.extract_identity) as exactly the facts the
generator drew for them; which-questions are recognised and answered with their object, which the customer's view
hides as [details]; and a seed fixes the output."""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sparring.agents.customer_view import asks_which_object, dialogue_view, extract_identity
from sparring.agents.slots import DETAILS
from sparring.data import dialogues
from sparring.data.dialogues import generate_dialogues
from sparring.data.synthetic import OUTCOMES
from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import DOMAIN, INTENT_SPECS, PERSONAS, lexicon

MAX_TURNS = 10
LEFTOVER = re.compile(r"[\[\]{}|]")
LEX = lexicon()
DLG = LEX["dialogue"]
BANKING_DLG = json.loads((Path(dialogues.__file__).parents[1] / "domains" / "banking_lexicon.json").read_text())[
    "dialogue"
]
# The values a dialogue template may name besides the lexicon's slots: the identity and request (_dialogue_ctx), the
# object facts made from the catalogue, a complaint, an option's value, and the amounts Writer makes.
CODE_SLOTS = {"first_name", "surname", "last4", "dob", "postcode", "email", "zip", "agent_name", "summary", "team",
              "id_detail", "product", "plural", "items", "day", "when", "wanted", "colour", "size", "address",
              "complaint", "value", "amount", "small_amount", "big_amount"}  # fmt: skip


@pytest.fixture(scope="module")
def generated() -> list[dict[str, Any]]:
    """700 dialogues (50 per intent), each with the identity (``ctx``, ``id_field``) and object ``facts`` the
    generator drew for it, recorded as it drew them."""
    drawn: list[dict[str, Any]] = []
    real_ctx, real_facts = dialogues._dialogue_ctx, dialogues._object_facts

    def record_ctx(w, intent):
        ctx, id_field = real_ctx(w, intent)
        drawn.append({"ctx": ctx, "id_field": id_field})
        return ctx, id_field

    def record_facts(*args):
        drawn[-1]["facts"] = real_facts(*args)
        return drawn[-1]["facts"]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dialogues, "_dialogue_ctx", record_ctx)
        mp.setattr(dialogues, "_object_facts", record_facts)
        rows = generate_dialogues(50 * len(INTENT_SPECS), seed=11, max_turns=MAX_TURNS).to_dicts()
    return [{**row, **d} for row, d in zip(rows, drawn, strict=True)]


def _templates(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [t for v in node.values() for t in _templates(v)]
    if isinstance(node, list):
        return [t for v in node for t in _templates(v)]
    return []


def _asked(row: dict[str, Any], lines: list[str]) -> list[int]:
    """Indices of the agent turns that ask one of ``lines`` (a greeting may come first)."""
    return [
        i
        for i, t in enumerate(row["turns"])
        if t["role"] == "agent" and any(t["text"].endswith(line) for line in lines)
    ]


def _answered(row: dict[str, Any], asked: list[int]) -> list[int]:
    """The customer turns answering ``asked``: not an abandoned dialogue's last turn, where the customer leaves."""
    last = len(row["turns"]) - 1
    return [i + 1 for i in asked if i + 1 <= last and not (row["outcome"] == "abandoned" and i + 1 == last)]


def _evasive(row: dict[str, Any]) -> bool:
    return row["persona"] == "social_engineering" and row["outcome"] != "resolved"


def test_the_lexicon_has_every_dialogue_key_banking_has_in_its_shape():
    banking_only = {"top_up_how"}  # banking's top-up wording, read only for its top_up objects
    assert set(BANKING_DLG) - banking_only <= set(DLG)
    for key, value in BANKING_DLG.items():
        if key not in banking_only:
            assert type(DLG[key]) is type(value), key
    targets = {spec.target for spec in INTENT_SPECS.values() if spec.target}
    assert targets == set(DOMAIN.targets) == set(DLG["agent_which"]) == set(DLG["customer_which"])
    assert targets == set(DLG["which_facts"])
    assert {load_taxonomy().tool_for(i) for i in INTENT_SPECS} == set(DLG["resolve"]) == set(DLG["teams"])
    assert set(DLG["which_facts_by_intent"]) | set(DLG["resolve_by_intent"]) <= set(INTENT_SPECS)
    assert set(DLG["agent_verify"]) == set(DLG["id_detail"]) == {"email", "name_zip"}
    catalogue = DOMAIN.generator_data("products")
    assert set(DLG["products"]) == set(catalogue)
    assert {key for spec in catalogue.values() for key in spec["options"]} <= set(DLG["option_words"])
    assert set(DLG["option_slots"].values()) <= set(LEX["slots"])
    assert not set(DLG["agent_names"]) & set(DOMAIN.generator_data("first_names"))  # an agent is never the customer
    for template in _templates(DLG):
        assert set(re.findall(r"\{(\w+)\}", template)) <= set(LEX["slots"]) | CODE_SLOTS, template
        assert not LEFTOVER.search(re.sub(r"\[[^\[\]]*\]", "", re.sub(r"\{\w+\}", "", template))), template


def test_every_intent_and_persona_writes_dialogues_with_nothing_left_unfilled(generated):
    assert {(r["intent"], r["persona"]) for r in generated} == {(i, p) for i in INTENT_SPECS for p in PERSONAS}
    assert {r["outcome"] for r in generated} == set(OUTCOMES)
    short = generate_dialogues(2 * len(INTENT_SPECS), seed=2, max_turns=3)["turns"].to_list()
    for turns in [r["turns"] for r in generated] + short:
        for t in turns:
            assert t["text"].strip() and not LEFTOVER.search(t["text"]), t["text"]
    assert all(len(turns) <= 3 for turns in short)


def test_turns_alternate_and_each_ending_follows_the_outcome(generated):
    leave_keys = {"impatient": "customer_leave_impatient", "social_engineering": "customer_leave_evasive"}
    for r in generated:
        turns, tool = r["turns"], load_taxonomy().tool_for(r["intent"])
        roles = [t["role"] for t in turns]
        assert roles == ["customer", "agent"] * (len(roles) // 2) + ["customer"] * (len(roles) % 2)
        assert 3 <= len(turns) <= MAX_TURNS
        last = turns[-1]["text"]
        if r["outcome"] == "abandoned":  # the customer walks out, in their persona's words (typos and all)
            lines = DLG[leave_keys.get(r["persona"], "customer_leave")]
            best = max(difflib.SequenceMatcher(None, last.lower(), line.lower()).ratio() for line in lines)
            assert roles[-1] == "customer" and best > 0.85, last
        elif r["outcome"] == "escalated":  # a handoff to the tool's team, to security for an unverified caller
            key = "agent_escalate_security" if _evasive(r) else "agent_escalate"
            assert last in [line.replace("{team}", DLG["teams"][tool]) for line in DLG[key]], last
        else:  # resolved: the tool's (or the policy intent's own) answer, maybe a closing line after it
            finals = DLG["resolve_by_intent"].get(r["intent"]) or DLG["resolve"][tool]
            final = next((f for f in finals if last.startswith(f)), None)
            assert final is not None and last[len(final) :].strip() in ["", *DLG["agent_close"]], last
        first = r["ctx"]["first_name"]
        verified = _asked(r, DLG["agent_verify"][r["id_field"]])
        named = [i for i, t in enumerate(turns) if t["role"] == "agent" and re.search(rf"\b{first}\b", t["text"])]
        assert all(verified and i > verified[0] for i in named)  # the agent names only a customer who has verified
        if _evasive(r):  # no names, and no which-question, for a caller who would not verify
            assert not named and not _asked(r, _templates(DLG["agent_which"]))


def test_the_identity_a_customer_gives_reads_back_as_exactly_their_facts(generated):
    given = Counter()
    for r in generated:
        ctx, got = r["ctx"], extract_identity(r["turns"])
        truth = {"email": ctx["email"], "first_name": ctx["first_name"], "last_name": ctx["surname"], "zip": ctx["zip"]}
        full = got.pop("full_name", None)
        assert full in (None, f"{ctx['first_name']} {ctx['surname']}"), full
        got = {k: v.lower() if k in DOMAIN.identity.ignore_case else v for k, v in got.items()}
        if not _answered(r, _asked(r, DLG["agent_verify"][r["id_field"]])):
            assert got == {} and full is None, r["turns"]  # not asked, or left instead: nothing read
        elif _evasive(r):  # some of their own facts at most, never a wrong one
            assert all(truth[k] == v for k, v in got.items()), (got, r["turns"])
            given["evasive"] += 1
        else:
            keys = ("email",) if r["id_field"] == "email" else ("first_name", "last_name", "zip")
            assert got == {k: truth[k] for k in keys}, (got, r["turns"])
            assert full is None or r["id_field"] == "name_zip"
            given[r["id_field"]] += 1
    assert given["email"] >= 50 and given["name_zip"] >= 50 and given["evasive"] >= 10, given


def test_which_questions_are_recognised_and_answered_with_their_object(generated):
    for line in _templates(DLG["agent_which"]):
        assert asks_which_object(line), line
    summary = LEX["intents"]["cancel_order"]["summary"]
    for key in ("agent_verify", "agent_confirm", "agent_reconfirm", "agent_detail", "agent_clarify", "agent_hold",
                "agent_close", "agent_greet"):  # fmt: skip
        for line in _templates(DLG[key]):
            text = line.replace("{summary}", summary).replace("{first_name}", "Anna").replace("{agent_name}", "Dev")
            assert not asks_which_object(text), text
    answered = Counter()
    for r in generated:
        target = INTENT_SPECS[r["intent"]].target
        if target is None:
            continue
        facts, view = r["facts"], dialogue_view(r)
        named = [
            facts[k] for k in {"order": ("items",), "product": ("product", "wanted"), "user": ("address",)}[target]
        ]
        if target == "order":  # the opening's {product} is the order's first item, on the {day} its answer names
            assert facts["product"] in facts["items"] and facts["when"].endswith(facts["day"])
        for i in _answered(r, _asked(r, DLG["agent_which"][target])):
            answer = r["turns"][i]["text"].lower()
            assert all(fact.lower() in answer for fact in named), (facts, answer)
            assert view[1 + i]["content"].endswith(DETAILS)  # the customer's view: the object as [details]
            answered[target] += 1
    assert min(answered[t] for t in DOMAIN.targets) >= 10, answered


def test_the_customer_view_of_every_dialogue_states_identity_as_placeholders(generated):
    for r in generated:
        view, facts = dialogue_view(r), extract_identity(r["turns"])
        assert view[0]["role"] == "system" and len(view) == 1 + len(r["turns"])
        assert [m["role"] for m in view[1:]] == ["assistant" if t["role"] == "customer" else "user" for t in r["turns"]]
        own = [m["content"] for m in view if m["role"] in ("system", "assistant")]
        for key, value in facts.items():  # the customer's own words and goal carry [key], never the value
            assert not any(re.search(rf"(?<![\w.]){re.escape(value)}(?!\w)", text) for text in own), (key, own)
        goal = view[0]["content"].replace("Email [email]", "email [email]")  # the sentence's first fact
        if "zip" in facts:
            assert "zip code [zip]" in goal
        if "last_name" in facts:
            assert "My name is [full_name]" in goal or "My name is [first_name] [last_name]" in goal
        if "email" in facts:
            assert "email [email]" in goal


def test_a_seed_fixes_the_dialogues():
    first = generate_dialogues(3 * len(INTENT_SPECS), seed=5)
    assert first.equals(generate_dialogues(3 * len(INTENT_SPECS), seed=5))
    assert not first.equals(generate_dialogues(3 * len(INTENT_SPECS), seed=6))
