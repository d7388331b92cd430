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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from sparring.agents.customer_view import dialogue_view
from sparring.agents.scripted import PERSONA_BEHAVIOUR, CooperativeCustomer, ExpertAgent, goal_text, intent_code
from sparring.agents.slots import delexicalize, slot_values
from sparring.rollout import Episode, run_episodes
from sparring.settings import SFTSettings, SimulatorSFTSettings
from sparring.train.sft import SFTResult, combine, train_sft
from sparring.world.scenarios import Scenario
from sparring.world.taxonomy import load_taxonomy

# Where a training goal's seed phrasing comes from: "other": another customer's words for the same intent (the
# simulator learns to reword a seed); "own": the opening itself (to open with it verbatim); "none": no seed.
SEED_SOURCES = ("other", "own", "none")
# Share of the scripted episodes whose expert first confirms a wrong request, so the simulator learns to say no.
MISCONFIRM = 0.25
# Utterance styles that have no persona of their own.
STYLE_BEHAVIOUR: dict[str, str] = {
    "cooperative": PERSONA_BEHAVIOUR["cooperative"],
    "vague": PERSONA_BEHAVIOUR["vague"],
    "camouflaged": PERSONA_BEHAVIOUR["camouflaging"],
    "multi_part": "You mention other things on your mind besides your main problem.",
}


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
    """ExpertAgent vs CooperativeCustomer rollouts (text only): the demonstrations of (c), which show the
    customer giving its identity when asked, naming the object when asked which one, and answering a
    confirmation with yes, or with a no that restates its need when the expert states a wrong request."""
    expert = ExpertAgent(refs="described", misconfirm=MISCONFIRM)
    return run_episodes(scenarios, expert, CooperativeCustomer(), max_turns=max_turns, seed=seed)


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
    (its goal-conditioned openings stayed at chance faithfulness). Repeating texts it has just read is the
    plainest copy task; its loss drops sharply once the model has learned to look back and copy, and the SFT that
    follows starts from a model that can (docs/results.md, simulator_sft.copy_drill).
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
    model: Any, tokenizer: Any, texts: Sequence[str], settings: SFTSettings, output_dir: Path, seed: int = 0
) -> SFTResult:
    """Phase 0 of the simulator's SFT, for a model trained from scratch: ``settings.max_steps`` optimizer steps of
    :func:`copy_exercises` over ``texts``. Without it the tiny simulator's openings stayed at chance faithfulness
    (docs/results.md)."""
    if settings.max_steps < 1:
        raise ValueError("the copy drill needs max_steps >= 1 (its exercises are drawn per step)")
    exercises = copy_exercises(texts, settings.max_steps * settings.batch_size, seed)
    return train_sft(model, tokenizer, exercises, settings, output_dir, seed=seed)


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
    model: Any, tokenizer: Any, utterances: pl.DataFrame, settings: SFTSettings, output_dir: Path, seed: int = 0
) -> SFTResult:
    """Phase 1, after the copy drill: :func:`opening_exercises`, every ingested utterance written from its intent's
    control code alone (~25 tokens each). Goals end with the same code, right before the customer's first turn,
    so what this drills is what rollouts ask."""
    return train_sft(model, tokenizer, opening_exercises(utterances), settings, output_dir, seed=seed)


def train_simulator(
    model: Any,
    tokenizer: Any,
    conversations: Sequence[Sequence[dict[str, Any]]],
    utterances: pl.DataFrame,
    settings: SimulatorSFTSettings,
    output_dir: Path,
    seed: int = 0,
    drills: bool = True,
) -> SFTResult:
    """TRACER stage 1 as the pipeline runs it: the copy drill and the opening drill (``drills``: for a model from
    config; a pretrained one reads its goal already), then SFT on ``conversations`` with the loss on the
    customer's own turns. Curves carry a ``phase`` key (0, 1, 2); ``phases`` holds each phase's result."""
    phases: dict[str, SFTResult] = {}
    if drills and settings.copy_drill is not None:
        texts = utterances["text"].to_list()
        phases["copy_drill"] = copy_drill(model, tokenizer, texts, settings.copy_drill, output_dir / "copy", seed)
        model = phases["copy_drill"].model
    if drills and settings.opening_drill is not None:
        drill = settings.opening_drill
        phases["opening_drill"] = opening_drill(model, tokenizer, utterances, drill, output_dir / "openings", seed)
        model = phases["opening_drill"].model
    phases["sft"] = train_sft(model, tokenizer, conversations, settings.sft, output_dir, seed=seed)
    return combine(phases, {"copy_drill": 0, "opening_drill": 1, "sft": 2})
