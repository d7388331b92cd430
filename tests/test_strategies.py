"""Strategy discovery: planted camouflage is found and named, plain requests are not, shares and success add up."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from sklearn.feature_extraction.text import HashingVectorizer

from sparring.evaluate import strategies as S
from sparring.evaluate.strategies import MessageRecord, discover_strategies, name_for, strategy_records

LOST, ARRIVAL = "lost_or_stolen_card", "card_arrival"
NAMES = ["Priya", "Oliver", "Chloe", "Kofi", "Mateo", "Hannah", "Yuki", "Omar"]
PLACES = ["Tesco", "Pret", "Greggs", "Boots", "Waitrose", "Camden Market"]
DAYS = ["Monday", "Tuesday", "Friday", "Sunday"]
# Long, concrete (names, places, amounts, times), and never the intent's keywords (lost/stolen, arrive/arrival).
CAMO = {
    LOST: [
        "So on {day} at {hour}pm I was at {place} buying a birthday cake for {name}, paid £{amount}, then took the "
        "{n} bus home with {name2}, and by the time I got to the flat my wallet with the card inside was nowhere.",
        "Long week: {name} moved into flat {n} on {day}, we carried boxes until {hour}pm, grabbed chips at {place} "
        "for £{amount}, and somewhere between the van and the sofa the card in my coat pocket simply vanished.",
    ],
    ARRIVAL: [
        "My flatmate {name} grabs the post every morning at {hour}am, and in the {n} days since I ordered the new "
        "plastic from you nothing with your logo has come through the door, though {name2} got a parcel on {day}.",
        "I've been paying cash at {place} like it's 1995, £{amount} on {day} alone, because the card you promised "
        "me {n} days ago still isn't in my letterbox and {name} keeps asking why I never tap.",
    ],
}
PLAIN = {
    LOST: [
        "I lost my card, please block it.",
        "My card was stolen, can you freeze it?",
        "I've lost my card, what should I do?",
        "Please block my lost card.",
        "Someone stole my card, cancel it please.",
    ],
    ARRIVAL: [
        "My new card hasn't arrived yet.",
        "The card I ordered never arrived.",
        "When will my card arrive?",
        "Still waiting for my card to arrive.",
        "My replacement card has not arrived, can you check?",
    ],
}
_HASH = HashingVectorizer(n_features=1024, ngram_range=(1, 2), alternate_sign=False)


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A fast stand-in for MiniLM: hashed word 1-2 grams, so camouflage and plain requests share few features."""
    return _HASH.transform(texts).toarray()


def camouflaged(i: int) -> tuple[str, str]:
    r = random.Random(i)
    intent = (LOST, ARRIVAL)[i % 2]
    text = CAMO[intent][(i // 2) % 2].format(
        day=r.choice(DAYS), hour=r.randint(1, 11), place=r.choice(PLACES), name=r.choice(NAMES),
        name2=r.choice(NAMES), amount=f"{r.randint(5, 60)}.{r.randint(10, 99)}", n=r.randint(10, 99),
    )  # fmt: skip
    return text, intent


def plain(i: int) -> tuple[str, str]:
    intent = (LOST, ARRIVAL)[i % 2]
    return PLAIN[intent][(i // 2) % 5], intent


def planted_mix() -> tuple[list[MessageRecord], set[str]]:
    """20 camouflaged (18 in generation 1, all won) and 20 plain (18 in generation 0, every 4th won)."""
    camo = [MessageRecord(*camouflaged(i), generation=int(i < 18), won=True) for i in range(20)]
    flat = [MessageRecord(*plain(i), generation=int(i >= 18), won=i % 4 == 0) for i in range(20)]
    return camo + flat, {r.text for r in camo}


def by_name(strategies: list[dict]) -> dict[str, dict]:
    names = [s["name"] for s in strategies]
    assert len(set(names)) == len(names), names  # names are unique
    return {s["name"]: s for s in strategies}


def assert_shares_sum_to_one(strategies: list[dict], n_gen: int) -> None:
    for g in range(n_gen):
        assert sum(s["share_by_cycle"][g] for s in strategies) == pytest.approx(1.0, abs=1e-3)


def test_planted_camouflage_is_found_named_and_tracked():
    records, camo_texts = planted_mix()
    found = by_name(discover_strategies(records, embedder=bag_of_words))
    camo = found["Contextual Camouflage"]
    assert camo["size"] == 20 and len(camo["examples"]) == 3 and set(camo["examples"]) <= camo_texts
    assert camo["share_by_cycle"] == [0.1, 0.9]  # planted: 2 of generation 0's 20 messages, 18 of generation 1's
    assert camo["success_rate"] == 1.0 and camo["success_by_cycle"] == [1.0, 1.0]
    t = camo["traits"]
    assert t["keyword_rate"] == 0.0 and t["detail_rate"] == 1.0 and t["mean_words"] > 30
    assert t["unrelated_share"] > 0.5 and t["length_vs_median"] > 1.75
    rest = [s for s in found.values() if s is not camo]
    assert sum(s["size"] for s in rest) == 20 and not any(set(s["examples"]) & camo_texts for s in rest)
    # Every 4th plain request won: 5 of 20 overall, whichever plain clusters they landed in.
    assert sum(s["success_rate"] * s["size"] for s in rest) == pytest.approx(5)
    assert "Direct Request" in found and found["Direct Request"]["traits"]["keyword_rate"] >= 0.6
    assert_shares_sum_to_one(list(found.values()), 2)
    assert any("birthday" in g or "flatmate" in g or "days" in g for g in camo["ngrams"])


def test_the_real_minilm_finds_the_planted_camouflage():
    records, camo_texts = planted_mix()
    strategies = discover_strategies(records)  # the packaged MiniLM (loads in ~10 s on a busy CPU)
    camo = by_name(strategies)["Contextual Camouflage"]
    assert set(camo["examples"]) <= camo_texts and camo["size"] >= 18
    assert camo["share_by_cycle"][1] - camo["share_by_cycle"][0] >= 0.6  # the planted shift towards camouflage
    assert camo["success_rate"] >= 0.9
    assert_shares_sum_to_one(strategies, 2)
    plain_only = discover_strategies([r for r in records if r.text not in camo_texts])
    assert "Contextual Camouflage" not in by_name(plain_only)


@pytest.mark.parametrize("extra_long", [False, True])
def test_plain_requests_alone_are_no_camouflage(extra_long):
    records = [MessageRecord(*plain(i), generation=0, won=False) for i in range(30)]
    if extra_long:  # long and detailed, but the request is said outright: a buried request at most
        records += [
            MessageRecord(
                f"My card was stolen at {p} on {d} around 6pm, I had £{20 + k}.50 on it, so please block it before "
                f"anyone uses it, {n} said I should call you straight away about the stolen card.",
                LOST,
                0,
                False,
            )
            for k, (p, d, n) in enumerate(zip(PLACES, DAYS * 2, NAMES, strict=False))
        ]
    found = by_name(discover_strategies(records, embedder=bag_of_words))
    assert "Contextual Camouflage" not in found and "Direct Request" in found
    if extra_long:
        assert "Buried Request" in found and found["Buried Request"]["traits"]["keyword_rate"] == 1.0


def test_identical_camouflage_clusters_merge_into_one_strategy():
    records, camo_texts = planted_mix()
    only_camo = [r for r in records if r.text in camo_texts]
    found = discover_strategies(only_camo, embedder=bag_of_words, max_clusters=4)
    # All-camouflage corpus: the median is itself long, the clamp keeps it camouflage, and every cluster merges.
    assert [s["name"] for s in found] == ["Contextual Camouflage"] and found[0]["size"] == 20


def test_tiny_inputs():
    assert discover_strategies([]) == []
    assert discover_strategies([MessageRecord("   ", LOST, 0, True)]) == []
    one = discover_strategies([MessageRecord("I lost my card, please block it.", LOST, 1, True)], n_generations=3)
    assert len(one) == 1 and one[0]["name"] == "Direct Request" and one[0]["size"] == 1
    assert one[0]["share_by_cycle"] == [0.0, 1.0, 0.0] and one[0]["success_by_cycle"] == [None, 1.0, None]
    assert one[0]["examples"] == ["I lost my card, please block it."]
    two = discover_strategies([MessageRecord(*plain(i), generation=0, won=i == 0) for i in range(2)])
    assert len(two) == 1 and two[0]["size"] == 2 and two[0]["success_rate"] == 0.5 and len(two[0]["examples"]) == 2
    same = discover_strategies([MessageRecord("where is my card?", ARRIVAL, 0, False)] * 5, embedder=bag_of_words)
    assert len(same) == 1 and same[0]["examples"] == ["where is my card?"]  # identical points cannot be split
    with pytest.raises(ValueError, match="generation"):
        discover_strategies([MessageRecord("hello", LOST, 2, False)], n_generations=2)


def _plain_types(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_types(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_types(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def test_output_is_plain_json_and_deterministic():
    records, _ = planted_mix()
    first = discover_strategies(records, embedder=bag_of_words, seed=3)
    assert _plain_types(first) and json.loads(json.dumps(first, allow_nan=False)) == first
    assert discover_strategies(records, embedder=bag_of_words, seed=3) == first
    for s in first:
        assert {"name", "share_by_cycle", "traits", "examples"} <= set(s) and len(s["share_by_cycle"]) == 2


BASE = {"mean_words": 30.0, "unrelated_share": 0.8, "keyword_rate": 0.1, "question_rate": 0.0, "hedge_rate": 0.0}
BASE |= {"detail_rate": 0.9}


@pytest.mark.parametrize(
    "change,expected",
    [
        ({}, "Contextual Camouflage"),
        ({"keyword_rate": 0.6}, "Buried Request"),
        ({"mean_words": 15.0}, None),  # under 1.75 x 9 words: not long
        ({"detail_rate": 0.4}, None),
        ({"unrelated_share": 0.4}, None),
        ({"mean_words": 8.0, "hedge_rate": 0.5, "detail_rate": 0.0}, "Vague Hedging"),
        ({"mean_words": 8.0, "hedge_rate": 0.5, "keyword_rate": 0.7}, None),  # hedged but keyworded
        ({"mean_words": 10.0, "question_rate": 0.8, "detail_rate": 0.0}, "Question Deflection"),
        ({"mean_words": 8.0, "keyword_rate": 0.9, "question_rate": 0.8}, "Direct Request"),
        ({"mean_words": 8.0, "keyword_rate": 0.5}, None),
    ],
)
def test_naming_rules_and_thresholds(change, expected):
    assert name_for(BASE | change, reference_words=9.0) == expected


def test_long_is_relative_to_the_clamped_median():
    assert name_for(BASE | {"mean_words": 20.0}, reference_words=S.REFERENCE_WORDS[1]) is None  # needs 21
    assert name_for(BASE | {"mean_words": 21.0}, reference_words=S.REFERENCE_WORDS[1]) == "Contextual Camouflage"


def test_message_traits():
    assert S.intent_keywords(LOST) == {"lost", "stole"} and S.intent_keywords(ARRIVAL) == {"arriv"}
    hedged = S.message_traits("Maybe it's kind of gone?", LOST)
    assert hedged["hedge"] == 1.0 and hedged["question"] == 1.0 and hedged["keyword"] == 0.0
    assert S.message_traits("my PIN is blocked at the ATM", "pin_blocked")["name"] == 0.0  # acronyms are no names
    assert S.message_traits("The card went missing", LOST)["name"] == 0.0  # a sentence's first word
    assert S.message_traits("Sarah says my card went missing", LOST)["name"] == 1.0  # a known name, even first
    paid = S.message_traits("I paid £12.50 at Tesco and then it was gone.", LOST)
    assert paid["number"] == 1.0 and paid["name"] == 1.0 and paid["detail"] == 1.0 and paid["words"] == 10.0
    assert S.message_traits("I lost my card, please block it.", LOST)["unrelated"] == 0.0
    assert S.message_traits("birthday cake on the bus with my flatmate", LOST)["unrelated"] == 1.0


def test_records_from_episodes_mask_identity_and_read_the_win():
    from sparring.agents.scripted import CamouflagingCustomer, ExpertAgent, RandomAgent
    from sparring.data.synthetic import utterance_frame
    from sparring.metrics import routed_correctly
    from sparring.rollout import run_episodes
    from sparring.world.scenarios import sample_scenarios

    scenarios = sample_scenarios(utterance_frame(1, seed=7), 4, seed=11)
    expert = run_episodes(scenarios, ExpertAgent(), CamouflagingCustomer(seed=2), max_turns=6, seed=0)
    random_ = run_episodes(scenarios, RandomAgent(seed=3), CamouflagingCustomer(seed=2), max_turns=4, seed=0)
    expert[0].rewards = {"adv_won": 1.0, "adv_misroute": 0.0}  # the judge's word wins over the routing fallback
    records = strategy_records([*expert, *random_], generation=2)
    assert len(records) == 8 and all(r.generation == 2 for r in records)
    assert [r.text for r in records[:4]] == [e.messages[1]["content"].strip() for e in expert]  # the openings
    assert [r.intent for r in records] == [e.scenario.intent for e in [*expert, *random_]]
    assert [r.won for r in records] == [True, False, False, False, *(not routed_correctly(e) for e in random_)]
    every = strategy_records(expert, generation=0, opening_only=False)
    users = [m for e in expert for m in e.messages if m["role"] == "user" and m["content"].strip()]
    assert len(every) == len(users) > len(expert)
    replies = [r.text for r in every if "[customer_id]" in r.text]
    assert replies and not any(e.scenario.customer_id in r.text for e in expert for r in every)
