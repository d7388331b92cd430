"""The customer simulator, stage 1 of TRACER (arXiv 2609.28690): SFT on real user dialogues.

TRACER aligns a user simulator on behaviour, not only style: it models the user's (hidden, evolving) goal and
must end sessions as real users do. Stage 1 is supervised: the simulator learns to write the customer's turns of
real dialogues, each conditioned on a hidden goal in the system message. Stage 2 (multi-turn RL with outcome- and
trajectory-level rewards) starts from this model.

Training data is in the CUSTOMER's view (:func:`~sparring.agents.chat.swap_roles`): goal as ``system``, the
agent's turns as ``user``, the customer's own turns as ``assistant``, so the loss covers the customer's turns only.
Three sources:

(a) real / ingested dialogues: goal from the intent's description and control code, the persona's behaviour,
    the identity facts the customer gives in the dialogue, and (for a share ``outcome_hint_p``) how the session
    ends. Dropping the ending clause half the time teaches both: an outcome-steerable simulator, and, for goals
    without it (those of rollouts), the persona's own outcome tendency;
(b) utterances as one-turn openings: goal from intent + style;
(c) optionally, scripted episodes (``ExpertAgent`` vs ``CooperativeCustomer``): their goal is exactly
    :func:`~sparring.agents.scripted.customer_goal`, the system message rollouts give an LM customer, and they
    show the simulator giving the identity its goal lists when asked: without that no agent can ever pass.

Every goal is built by :func:`~sparring.agents.scripted.goal_text`, as ``customer_goal``'s is, so the trained
simulator plays in rollouts unchanged. Goals end with the problem, a seed phrasing (in rollouts the scenario's
own utterance, in training another customer's words for the same intent, so the simulator learns to reword a
seed, not to copy it) and the intent's control code. A tiny model from scratch first needs two drills:
:func:`copy_drill` to use its context at all, then :func:`opening_drill` to write a problem from its code.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from sparring.agents.chat import swap_roles
from sparring.agents.scripted import PERSONA_BEHAVIOUR, CooperativeCustomer, ExpertAgent, goal_text, intent_code
from sparring.agents.slots import delexicalize, identity_slots, slot_values
from sparring.rollout import Episode, run_episodes
from sparring.train.sft import SFTResult, SFTSettings, train_sft
from sparring.world.scenarios import Scenario
from sparring.world.taxonomy import load_taxonomy

# Where a training goal's seed phrasing comes from: "other": another customer's words for the same intent (the
# simulator learns to reword a seed); "own": the opening itself (to open with it verbatim); "none": no seed.
SEED_SOURCES = ("other", "own", "none")
# Utterance styles that have no persona of their own.
STYLE_BEHAVIOUR: dict[str, str] = {
    "cooperative": PERSONA_BEHAVIOUR["cooperative"],
    "vague": PERSONA_BEHAVIOUR["vague"],
    "camouflaged": PERSONA_BEHAVIOUR["camouflaging"],
    "multi_part": "You mention other things on your mind besides your main problem.",
}

# Identity facts a customer says in a dialogue (synthetic and Banking-style formats).
_DOB = re.compile(r"\b(\d{1,2}/\d{1,2}/\d{4}|\d{4}-\d{2}-\d{2})\b")
_POSTCODE = re.compile(r"\b([A-Z]{1,2}\d{1,2}[A-Z]? ?\d[A-Z]{2})\b")
_LAST4 = re.compile(r"(?:card ending|ending in|last four are|ends in|last 4 (?:digits )?are)\s+(\d{4})\b", re.I)
_EMAIL = re.compile(r"\b([\w.'+-]+@[\w-]+(?:\.[\w-]+)+)\b")
_CUSTOMER_ID = re.compile(r"\b(C\d{6})\b")
_NAME = re.compile(r"\b([A-Z][a-z]+ (?:[A-Z]')?[A-Z][a-z]+(?:-[A-Z][a-z]+)?)\b")
_ASKS_IDENTITY = re.compile(r"\bname\b|birth|postcode|digits|e-?mail|verif|identity|security", re.I)
_NOT_NAMES = {"Sure", "Yes", "Yeah", "Fine", "Okay", "Hello", "Hi", "Thanks", "Please", "Now", "Can", "It", "The"}


def extract_identity(turns: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """Identity facts the customer gave in a dialogue (``turns``: ``{role: customer|agent, text}``).

    Only answers to an agent turn that asks for identity count, so merchants, places and dates of the problem
    stay out."""
    facts: dict[str, str] = {}
    asked = False
    for turn in turns:
        text = str(turn.get("text") or "")
        if turn.get("role") == "agent":
            asked = bool(_ASKS_IDENTITY.search(text))
            continue
        if not asked:
            continue
        for key, pattern in (
            ("customer_id", _CUSTOMER_ID),
            ("date_of_birth", _DOB),
            ("postcode", _POSTCODE),
            ("card_last4", _LAST4),
            ("email", _EMAIL),
        ):
            found = pattern.search(text)
            if found and key not in facts:
                facts[key] = found.group(1)
        if "full_name" not in facts:
            name = next((m.group(1) for m in _NAME.finditer(text) if m.group(1).split()[0] not in _NOT_NAMES), None)
            if name:
                facts["full_name"] = name
        asked = False
    return facts


def identity_sentence(facts: Mapping[str, str]) -> str:
    """The facts in :func:`~sparring.agents.scripted.identity_text`'s wording ("" when there are none)."""
    parts = [
        f"My name is {facts['full_name']}" if "full_name" in facts else "",
        f"customer id {facts['customer_id']}" if "customer_id" in facts else "",
        f"date of birth {facts['date_of_birth']}" if "date_of_birth" in facts else "",
        f"postcode {facts['postcode']}" if "postcode" in facts else "",
        f"my card ending {facts['card_last4']}" if "card_last4" in facts else "",
        f"email {facts['email']}" if "email" in facts else "",
    ]
    parts = [p for p in parts if p]
    if not parts:
        return ""
    body = ", ".join(parts)
    return body[0].upper() + body[1:] + "."


def dialogue_goal(row: Mapping[str, Any], with_outcome: bool = False, seed_phrasing: str = "") -> str:
    """The goal of a dialogue row (``intent``, ``persona``, ``outcome``, ``turns``)."""
    return goal_text(
        row["intent"],
        PERSONA_BEHAVIOUR.get(str(row.get("persona") or ""), ""),
        identity_sentence(extract_identity(row["turns"])),
        row.get("outcome") if with_outcome else None,
        seed_phrasing=seed_phrasing,
    )


def dialogue_view(row: Mapping[str, Any], with_outcome: bool = False, seed_phrasing: str = "") -> list[dict[str, str]]:
    """A dialogue in the customer's view: goal, then agent turns as ``user``, the customer's as ``assistant``;
    the identity facts the customer gave are placeholders in its goal and turns (:mod:`sparring.agents.slots`).

    Dialogues may end on the agent's closing turn; kept, it costs no loss and shows how sessions end."""
    values = identity_slots(extract_identity(row["turns"]))
    agent_view = [
        {
            "role": "user" if t["role"] == "customer" else "assistant",
            "content": delexicalize(str(t["text"]), values) if t["role"] == "customer" else str(t["text"]),
        }
        for t in row["turns"]
        if str(t.get("text") or "").strip()
    ]
    return swap_roles(agent_view, delexicalize(dialogue_goal(row, with_outcome, seed_phrasing), values))


def utterance_view(text: str, intent: str, style: str = "", seed_phrasing: str = "") -> list[dict[str, str]]:
    """A one-turn opening: goal from intent + style (+ a seed phrasing), the utterance as the customer's first
    message."""
    return [
        {"role": "system", "content": goal_text(intent, STYLE_BEHAVIOUR.get(style, ""), seed_phrasing=seed_phrasing)},
        {"role": "assistant", "content": text.strip()},
    ]


def episode_view(episode: Episode) -> list[dict[str, str]]:
    """A rollout's customer view (its goal is ``customer_goal``), without the agent's turns after the last
    customer one: they carry no loss. The customer's own turns state their facts as placeholders, as its goal
    does (a scripted customer's say the values)."""
    values = slot_values(episode.scenario)
    view = [{"role": m["role"], "content": str(m.get("content") or "")} for m in episode.customer_messages]
    for m in view:
        if m["role"] == "assistant":
            m["content"] = delexicalize(m["content"], values)
    while view and view[-1]["role"] == "user":
        view.pop()
    return view


def scripted_episodes(scenarios: Sequence[Scenario], seed: int, max_turns: int = 6) -> list[Episode]:
    """ExpertAgent vs CooperativeCustomer rollouts (text only): the identity-giving demonstrations of (c)."""
    return run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), max_turns=max_turns, seed=seed)


def simulator_conversations(
    dialogues: pl.DataFrame,
    utterances: pl.DataFrame,
    episodes: Sequence[Episode] | None = None,
    seed: int = 0,
    *,
    max_utterances: int | None = 1000,
    outcome_hint_p: float = 0.5,
    seed_from: str = "other",
) -> list[list[dict[str, str]]]:
    """SFT conversations for the simulator, in the customer's view, shuffled (deterministic in ``seed``).

    ``dialogues``: id, intent, persona, outcome, turns (the ingest schema); ``utterances``: text, intent and
    optionally style; ``max_utterances`` keeps a seeded sample of the openings (None: all). Measured with a tiny
    model at equal steps, fewer openings and more scripted episodes lowered held-out perplexity and raised
    identity-copy accuracy, and ~9k ingested openings would outweigh the dialogues and the CPU budget.
    ``outcome_hint_p``: share of dialogue goals that say how the session ends."""
    if not 0.0 <= outcome_hint_p <= 1.0:
        raise ValueError("outcome_hint_p must be in [0, 1]")
    if seed_from not in SEED_SOURCES:
        raise ValueError(f"seed_from must be one of {SEED_SOURCES}, got {seed_from!r}")
    rng = random.Random(f"simulator:{seed}")
    known = set(load_taxonomy().intents)
    rows = [r for r in utterances.iter_rows(named=True) if r["intent"] in known and str(r["text"]).strip()]
    by_intent: dict[str, list[str]] = {}
    for r in rows:
        by_intent.setdefault(r["intent"], []).append(str(r["text"]).strip())

    def seed_phrasing(intent: str, own: str) -> str:
        if seed_from == "none":
            return ""
        if seed_from == "own":
            return own.strip()
        pool = [text for text in by_intent.get(intent, []) if text != own.strip()]
        return rng.choice(pool) if pool else ""

    conversations: list[list[dict[str, str]]] = []
    for row in dialogues.iter_rows(named=True):
        if row["intent"] not in known or not any(t["role"] == "customer" for t in row["turns"]):
            continue
        with_outcome = rng.random() < outcome_hint_p
        opening = next(str(t["text"]) for t in row["turns"] if t["role"] == "customer")
        conversations.append(dialogue_view(row, with_outcome, seed_phrasing(row["intent"], opening)))
    if max_utterances is not None and len(rows) > max_utterances:
        rows = rng.sample(rows, max_utterances)
    conversations += [
        utterance_view(r["text"], r["intent"], str(r.get("style") or ""), seed_phrasing(r["intent"], r["text"]))
        for r in rows
    ]
    for episode in episodes or ():
        view = episode_view(episode)
        if any(m["role"] == "assistant" for m in view):
            conversations.append(view)
    rng.shuffle(conversations)
    return conversations


def copy_exercises(texts: Sequence[str], n: int, seed: int) -> list[list[dict[str, str]]]:
    """``n`` conversations ``user: text`` / ``assistant: the same text``, texts drawn with replacement.

    A copy drill: a tiny model trained from scratch does not learn to copy from its context within an SFT budget
    (measured: goal-conditioned openings stayed at chance faithfulness in six variants, one with the intent's
    label in the goal, one asked to repeat its seed word for word). Repeating texts it has just read is the
    plainest copy task; its loss drops sharply once the model has learned to look back and copy (measured: 2.4
    after 600 steps, 0.8 after 2,500 at batch 8), and the SFT that follows starts from a model that can.
    """
    pool = [t.strip() for t in texts if t.strip()]
    if not pool:
        raise ValueError("copy_exercises needs at least one non-empty text")
    rng = random.Random(f"copy:{seed}")
    return [
        [{"role": "user", "content": text}, {"role": "assistant", "content": text}]
        for text in (rng.choice(pool) for _ in range(n))
    ]


def copy_drill(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    settings: SFTSettings,
    steps: int,
    batch_size: int,
    learning_rate: float,
    output_dir: Path,
) -> SFTResult:
    """Phase 0 of the simulator's SFT, for a model trained from scratch: ``steps`` optimizer steps of
    :func:`copy_exercises` over ``texts`` (``settings`` gives the rest: seed, Adam betas, schedule).

    Measured on the default model (120 held-out scenarios): without it the simulator's openings stayed at chance
    faithfulness (0.013) in six variants; with 2,500 steps at batch 8 (~3 min) before 2 SFT epochs, 0.158,
    and held-out perplexity 12.6 instead of 23; 6 SFT epochs without it, 0.025 (these with a weaker oracle
    than the default one: see :func:`opening_drill`)."""
    exercises = copy_exercises(texts, steps * batch_size, settings.seed)
    drill = replace(settings, max_steps=steps, warmup_steps=max(1, steps // 100))
    return _drill(model, tokenizer, exercises, drill, batch_size, learning_rate, output_dir)


def opening_exercises(utterances: pl.DataFrame) -> list[list[dict[str, str]]]:
    """One conversation per utterance of a known intent: ``system: <intent>NAME`` / ``assistant: the text``."""
    known = set(load_taxonomy().intents)
    return [
        [
            {"role": "system", "content": intent_code(r["intent"])},
            {"role": "assistant", "content": str(r["text"]).strip()},
        ]
        for r in utterances.iter_rows(named=True)
        if r["intent"] in known and str(r["text"]).strip()
    ]


def opening_drill(
    model: Any,
    tokenizer: Any,
    utterances: pl.DataFrame,
    settings: SFTSettings,
    epochs: float,
    batch_size: int,
    learning_rate: float,
    output_dir: Path,
) -> SFTResult:
    """Phase 1, after the copy drill: ``epochs`` over :func:`opening_exercises`, every ingested utterance
    written from its intent's control code alone (~25 tokens each, so ~9k of them cost ~3 min).

    Goals end with the same code, right before the customer's first turn, so what this drills is what rollouts
    ask. Measured on the default model (120 held-out scenarios): faithfulness 0.19 before (copy drill, 2 SFT
    epochs), 0.50 with this phase, the code last in the goal and 4 SFT epochs. With the weaker oracle of the
    quick profile, which ranks alike: 0.20 without this phase, 0.40 with it, 0.21 with the code first in the
    goal (200 tokens from the turn), 0.15 with 2 SFT epochs after it; perplexity 7.7 -> 4.7."""
    drill = replace(settings, epochs=epochs, warmup_steps=min(settings.warmup_steps, 30))
    return _drill(model, tokenizer, opening_exercises(utterances), drill, batch_size, learning_rate, output_dir)


def _drill(
    model: Any,
    tokenizer: Any,
    exercises: list[list[dict[str, str]]],
    settings: SFTSettings,
    batch_size: int,
    learning_rate: float,
    output_dir: Path,
) -> SFTResult:
    """SFT on short exercises: ``settings`` with this batch size and learning rate, and a context for two
    utterances."""
    short = replace(settings, batch_size=batch_size, learning_rate=learning_rate, max_length=512)
    return train_sft(model, tokenizer, exercises, short, output_dir)
