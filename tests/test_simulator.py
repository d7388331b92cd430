"""Customer simulator (TRACER stage 1): customer-view SFT data, real learning, fidelity metrics in range."""

from __future__ import annotations

import math
import random
import zlib

import numpy as np
import polars as pl
import pytest
import torch

from sparring.agents.customer_prompt import (
    PERSONA_BEHAVIOUR,
    SEED_PHRASING,
    customer_goal,
    goal_text,
    identity_text,
    intent_code,
)
from sparring.agents.customer_view import asks_which_object, dialogue_view, extract_identity
from sparring.agents.scripted import CooperativeCustomer, describe_slots
from sparring.agents.slots import delexicalize, fact_values
from sparring.data.dialogues import generate_dialogues
from sparring.data.synthetic import OUTCOMES, utterance_frame
from sparring.evaluate.fidelity import customer_turn_nll, heldout_perplexity, outcome_f1, simulator_fidelity
from sparring.judge.models import IntentOracle, OracleConfig, RealismDiscriminator
from sparring.lm.chat import INTENT, known_intents
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.policies import LMPolicy
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import SFTSettings
from sparring.train.sft import train_sft
from sparring.train.tracer import (
    copy_drill,
    copy_exercises,
    dtw_distance,
    opening_drill,
    opening_exercises,
    scripted_episodes,
    simulator_conversations,
)
from sparring.world.scenarios import sample_scenarios
from sparring.world.taxonomy import load_taxonomy

torch.set_num_threads(1)
TAX = load_taxonomy()
SPEC = ModelSpec(
    hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=192, tie_word_embeddings=False
)
FIDELITY_NAMES = (
    "sim_faithfulness",
    "discriminator_auc",
    "outcome_f1",
    "group_outcome_rate_error",
    "trajectory_distance",
    "identity_given_rate",
)


def hashed_embedder(texts: list[str]) -> np.ndarray:
    """Bag of hashed words: a stand-in for MiniLM that costs nothing to load."""
    out = np.zeros((len(texts), 64))
    for i, text in enumerate(texts):
        for word in text.lower().split():
            out[i, zlib.crc32(word.encode()) % 64] += 1.0
    return out


@pytest.fixture(scope="module")
def data():
    dialogues = generate_dialogues(110, 0)
    utterances = utterance_frame(1, 0)
    episodes = scripted_episodes(sample_scenarios(utterances, 24, seed=0), seed=0)
    conversations = simulator_conversations(dialogues.head(90), utterances, episodes, seed=0)
    return {
        "train": dialogues.head(90),
        "heldout": dialogues.tail(20),
        "utterances": utterances,
        "episodes": episodes,
        "conversations": conversations,
        "scenarios": sample_scenarios(utterance_frame(1, 1), 6, seed=1),
    }


@pytest.fixture(scope="module")
def tok(data):
    texts = [m["content"] for c in data["conversations"] for m in c]
    return train_tokenizer(texts, 1000, sorted(known_intents()))


@pytest.fixture(scope="module")
def trained(data, tok, tmp_path_factory):
    model = build_model(SPEC, tok)
    before = heldout_perplexity(model, tok, data["heldout"])
    settings = SFTSettings(max_steps=24, batch_size=12, learning_rate=3e-3, warmup_steps=5, logging_steps=10)
    result = train_sft(model, tok, data["conversations"], settings, tmp_path_factory.mktemp("sim"))
    result.model.eval()
    return before, result


@pytest.fixture(scope="module")
def judges(data):
    utt = utterance_frame(3, 2)
    oracle = IntentOracle.fit(utt["text"].to_list(), utt["intent"].to_list(), 0, OracleConfig(use_embeddings=False))
    real = [t["text"] for row in data["train"]["turns"].to_list() for t in row if t["role"] == "customer"]
    return oracle, RealismDiscriminator.fit(utt["text"].to_list() + real, 0)


def test_conversations_are_in_the_customer_view_and_never_name_the_label(data):
    convs = data["conversations"]
    assert len(convs) == 90 + data["utterances"].height + len(data["episodes"])
    labels = [name for name in known_intents() if "_" in name]
    for conv in convs:
        assert conv[0]["role"] == "system" and "Your problem:" in conv[0]["content"]
        assert "Never name a category" in conv[0]["content"]
        roles = [m["role"] for m in conv[1:]]
        assert "assistant" in roles and set(roles) <= {"user", "assistant"}
        assert all(a != b for a, b in zip(roles, roles[1:], strict=False))  # turns alternate
        # The label is in the goal only as its closing control code, and nowhere in any turn.
        code = conv[0]["content"].rsplit(" ", 1)[1]
        assert code.startswith(INTENT) and code[len(INTENT) :] in TAX.intents
        for m in [{"content": conv[0]["content"][: -len(code)]}, *conv[1:]]:
            assert not any(label in m["content"] for label in labels), m["content"]
    # The customer's own turns are the dialogues' customer turns: first turn of each dialogue is the opening.
    openings = {row[0]["text"] for row in data["train"]["turns"].to_list()}
    assert sum(c[1]["role"] == "assistant" and c[1]["content"] in openings for c in convs) >= 85
    # Scripted episodes keep the rollout's goal verbatim, and show the identity being given when asked.
    goals = {customer_goal(ep.scenario) for ep in data["episodes"]}
    assert sum(c[0]["content"] in goals for c in convs) == len(data["episodes"])
    for ep in data["episodes"]:
        own = [m["content"] for m in ep.customer_messages if m["role"] == "assistant"]
        assert any(ep.scenario.identity["customer_id"] in text for text in own)


def test_openings_are_seeded_with_another_customers_words_for_the_same_problem():
    utterances = utterance_frame(3, 5)
    convs = simulator_conversations(generate_dialogues(0, 0), utterances, seed=0)
    seeded = [c for c in convs if SEED_PHRASING in c[0]["content"]]
    assert len(seeded) >= 0.9 * utterances.height
    intent_of = {t.strip(): i for t, i in zip(utterances["text"], utterances["intent"], strict=True)}
    for system, opening in seeded:
        seed_text, code = system["content"].split(SEED_PHRASING, 1)[1].rsplit(" ", 1)
        assert seed_text != opening["content"] and intent_of[seed_text] == intent_of[opening["content"]]
        assert code == intent_code(intent_of[opening["content"]])
    own = simulator_conversations(generate_dialogues(0, 0), utterances, seed=0, seed_from="own")
    assert all(f"{SEED_PHRASING}{c[1]['content']} {INTENT}" in c[0]["content"] for c in own)
    none = simulator_conversations(generate_dialogues(0, 0), utterances, seed=0, seed_from="none")
    assert not any(SEED_PHRASING in c[0]["content"] for c in none)
    with pytest.raises(ValueError, match="seed_from"):
        simulator_conversations(generate_dialogues(0, 0), utterances, seed=0, seed_from="others")


def test_goal_layout_matches_customer_goal(data):
    for ep in data["episodes"]:
        sc = ep.scenario
        if sc.persona == "social_engineering":
            continue
        built = goal_text(
            sc.intent,
            PERSONA_BEHAVIOUR[sc.persona],
            identity_text(sc),
            details=describe_slots(sc),
            seed_phrasing=sc.utterance,
        )
        assert delexicalize(built, fact_values(sc)) == customer_goal(sc)
    turns = [
        {"role": "customer", "text": "My card from 3/4/2024 is missing."},
        {"role": "agent", "text": "Could you confirm your full name and date of birth?"},
        {"role": "customer", "text": "Sure, it's Tom O'Brien, born 23/2/1980."},
    ]
    assert extract_identity(turns) == {"full_name": "Tom O'Brien", "date_of_birth": "23/2/1980"}
    goal = goal_text("card_arrival", outcome="abandoned")
    assert "leave before it is solved" in goal and goal.endswith(" <intent>card_arrival")
    assert goal.count("card_arrival") == 1  # only as the code


def test_a_dialogues_which_answer_is_the_details_placeholder_and_no_identity():
    """A recorded answer to "which card?" names another account's card: the view states it as [details] (filled
    from the scenario in rollouts), its digits are no identity fact, and an answer that leaves stays."""
    turns = [
        {"role": "customer", "text": "My card isn't working."},
        {
            "role": "agent",
            "text": "For security, can you give me your full name and the last four digits of your card?",
        },  # noqa: E501
        {"role": "customer", "text": "Ana Lima, card ending in 4321."},
        {"role": "agent", "text": "Could you tell me which card it is — the type and the last 4 digits?"},
        {"role": "customer", "text": "Sure, the virtual card ending in 9876."},
        {"role": "agent", "text": "Thanks. If I understand correctly, your card isn't working at all?"},
        {"role": "customer", "text": "Yes, exactly."},
    ]
    assert extract_identity(turns) == {"full_name": "Ana Lima", "card_last4": "4321"}
    row = {"intent": "card_not_working", "persona": "cooperative", "outcome": "resolved", "turns": turns}
    said = [m["content"] for m in dialogue_view(row) if m["role"] == "assistant"]
    assert said == [
        "My card isn't working.",
        "[full_name], card ending in [my_card_last4].",
        "Sure. [details]",
        "Yes, exactly.",
    ]
    assert not asks_which_object(turns[1]["text"]) and not asks_which_object(turns[5]["text"])
    left = dialogue_view({**row, "turns": [*turns[:4], {"role": "customer", "text": "Forget it, bye."}]})
    assert left[-1]["content"] == "Forget it, bye."


def test_training_lowers_heldout_perplexity(trained, data, tok):
    before, result = trained
    after = heldout_perplexity(result.model, tok, data["heldout"])
    assert math.isfinite(before) and before > 100  # near-uniform over the vocabulary
    assert after < 0.5 * before, (before, after)
    assert result.curves and result.final_loss < math.log(len(tok))


@pytest.mark.parametrize("kind", ["untrained", "trained"])
def test_fidelity_metrics_in_range(kind, trained, data, tok, judges):
    model = build_model(SPEC, tok) if kind == "untrained" else trained[1].model
    policy = LMPolicy(model, tok, "customer", max_new_tokens=24)
    oracle, disc = judges
    m = simulator_fidelity(
        policy,
        data["scenarios"],
        data["heldout"].head(8),
        oracle,
        disc,
        seed=0,
        max_turns=3,
        embedder=hashed_embedder,
    )
    for name in (*FIDELITY_NAMES, "strict_pass_coop", "sim_prob_real", "identity_fact_acc", "identity_attempt_rate"):
        assert 0.0 <= m[name] <= 1.0, (name, m[name])
    assert 0.0 <= m["trajectory_distance"] <= 2.0
    assert m["heldout_perplexity"] > 1.0
    assert m["n_sim_episodes"] == 6 and m["n_replayed"] == 8
    assert sum(m[f"sim_rate_{o}"] for o in OUTCOMES) == pytest.approx(1.0)


def test_fidelity_anchors_on_the_scripted_customer(data, judges):
    """The scripted cooperative customer always lets the expert identify it, so every episode passes."""
    oracle, disc = judges
    m = simulator_fidelity(
        CooperativeCustomer(),
        data["scenarios"],
        data["heldout"].head(8),
        oracle,
        disc,
        seed=0,
        embedder=hashed_embedder,
    )
    assert "heldout_perplexity" not in m  # no model to score
    assert m["identity_given_rate"] == m["identity_fact_acc"] == m["identity_attempt_rate"] == 1.0
    assert m["strict_pass_coop"] == 1.0
    assert m["sim_rate_resolved"] == 1.0  # replays too: the expert resolves every cooperative session
    assert 0.0 <= m["outcome_f1"] <= 1.0 and 0.0 <= m["group_outcome_rate_error"] <= 1.0


def test_outcome_f1_is_sklearns_macro_f1_over_the_three_endings():
    from sklearn.metrics import f1_score

    resolved, escalated, abandoned = OUTCOMES
    assert outcome_f1(list(OUTCOMES), list(OUTCOMES)) == 1.0
    assert outcome_f1([resolved, escalated], [resolved, escalated]) == pytest.approx(2 / 3)  # abandoned: 0
    # resolved: 2·1/(2·1 + 1) = 2/3; escalated: no hit, one miss = 0; abandoned in neither: 0
    assert outcome_f1([resolved, resolved], [resolved, escalated]) == pytest.approx((2 / 3) / 3)
    rng = random.Random(3)
    for n in (1, 3, 40):
        for _ in range(100):
            real = [rng.choice(OUTCOMES[: rng.randint(1, 3)]) for _ in range(n)]
            simulated = [rng.choice(OUTCOMES) for _ in range(n)]
            expected = f1_score(real, simulated, labels=list(OUTCOMES), average="macro", zero_division=0)
            assert outcome_f1(real, simulated) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="2 real endings but 1 simulated"):
        outcome_f1([resolved, resolved], [resolved])


def test_dtw_distance():
    a = np.eye(3)
    assert dtw_distance(a, a) == 0.0
    assert dtw_distance(a, a[[0, 0, 1, 2]]) == 0.0  # a repeated turn aligns for free
    assert dtw_distance(a[:1], a[1:]) == pytest.approx(1.0)  # orthogonal turns: cosine distance 1


def test_copy_exercises_repeat_the_text_and_refuse_an_empty_pool():
    texts = ["my card is lost", "  ", "how do I top up?"]
    drills = copy_exercises(texts, 12, seed=3)
    assert len(drills) == 12 and drills == copy_exercises(texts, 12, seed=3)
    for user, assistant in drills:
        assert user["role"] == "user" and assistant["role"] == "assistant"
        assert user["content"] == assistant["content"] and user["content"] in {"my card is lost", "how do I top up?"}
    with pytest.raises(ValueError, match="non-empty"):
        copy_exercises(["", " "], 3, seed=0)


def test_copy_drill_trains_the_given_steps_and_lowers_copy_loss(data, tok, tmp_path):
    texts = data["utterances"]["text"].to_list()
    unseen = utterance_frame(1, 1)["text"].to_list()  # another generator seed: texts the drill never repeats
    heldout = [tok.apply_chat_template(c, tokenize=False) for c in copy_exercises(unseen, 16, seed=99)]

    def copy_loss(model) -> float:
        batch = tok(heldout, return_tensors="pt", padding=True, add_special_tokens=False)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        with torch.no_grad():
            return float(model(**batch, labels=labels).loss)

    model = build_model(SPEC, tok)
    before = copy_loss(model)
    settings = SFTSettings(max_steps=40, batch_size=8, learning_rate=3e-3, logging_steps=5, max_length=512)
    result = copy_drill(model, tok, texts, settings, tmp_path, seed=0)
    assert max(c.get("step", 0) for c in result.curves) == 40
    assert copy_loss(result.model.eval()) < before - 0.5, before


def test_opening_drill_teaches_the_intent_code(tok, tmp_path):
    """After the drill an utterance is likelier under its own intent's code than under another's: the model
    reads the code (a model that ignored it would score both alike)."""
    frame = utterance_frame(12, 0)
    utterances = frame.filter(pl.col("intent").is_in(sorted(set(frame["intent"]))[:6]))  # 6 problems, ~70 texts
    exercises = opening_exercises(utterances)
    assert len(exercises) == utterances.height
    assert all(s["content"] == intent_code(i) for (s, _), i in zip(exercises, utterances["intent"], strict=True))
    intents = sorted(set(utterances["intent"]))
    other = {i: intents[(k + 1) % len(intents)] for k, i in enumerate(intents)}
    wrong = [
        [{"role": "system", "content": intent_code(other[i])}, a]
        for (_, a), i in zip(exercises, utterances["intent"], strict=True)
    ]

    def nll(model, convs) -> float:
        total, count = customer_turn_nll(model, tok, convs)
        return total / count

    settings = SFTSettings(
        epochs=25, batch_size=8, learning_rate=3e-3, warmup_steps=5, logging_steps=10, max_length=512
    )
    result = opening_drill(build_model(SPEC, tok), tok, utterances, settings, tmp_path, seed=0)
    model = result.model.eval()
    own, swapped = nll(model, exercises), nll(model, wrong)
    assert own < swapped - 0.1, (own, swapped)
