"""The peer-reward cohort's members: built from a model spec and warm-started by the agent's own recipe, and
measured on labelled utterances (:mod:`sparring.train.peer_reward` trains them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from sparring.agents.added_rows import rows_from_name_words
from sparring.agents.chat import AGENT_SYSTEM_PROMPT
from sparring.agents.models import build_model
from sparring.agents.policies import LMPolicy
from sparring.agents.pretrained import resolve_model_path
from sparring.agents.tokenizer import stage_tokenizer
from sparring.rollout import route_utterances
from sparring.settings import AgentSFTSettings, PeerMember
from sparring.timing import Phases, sft_phases
from sparring.train.demos import intent_examples, warm_start
from sparring.train.peer_reward import Label, diversity, targets
from sparring.train.sft import combine, train_sft


def warm_start_member(
    member: PeerMember,
    tokenizer: Any,
    texts: Sequence[str],
    intents: Sequence[str],
    demos: Sequence[Sequence[dict[str, Any]]],
    default: AgentSFTSettings,
    output_dir: Path,
    seed: int = 0,
    phases: Phases | None = None,
) -> Any:
    """A member from its model spec (``tokenizer``: :func:`member_tokenizer`'s), warm-started as DA0 is
    (:func:`warm_start`, ``member.warm_start`` or ``default``); with ``member.demos`` false, its intent phase alone
    (utterance -> ``<intent>NAME``). ``phases`` records its SFT phases (:func:`~sparring.timing.sft_phases`), named
    ``<output_dir's name>.<phase>``."""
    if member.model is None:
        raise ValueError("the final agent is loaded from its cycle, not built")
    cfg = member.warm_start or default
    model = build_model(member.model, tokenizer, seed=seed)
    if member.model.name_or_path is not None and member.name_rows == "words":
        rows_from_name_words(
            model, tokenizer, AutoTokenizer.from_pretrained(resolve_model_path(member.model.name_or_path))
        )
    system = AGENT_SYSTEM_PROMPT if cfg.system_prompt else ""
    model.config.agent_system_prompt = system  # as DA0: whoever loads it prompts it as it was trained
    if member.demos:
        result = warm_start(model, tokenizer, demos, texts, intents, cfg, output_dir, seed=seed)
    else:
        if cfg.intent is None:
            raise ValueError("a member without demos needs its warm start's intent phase (warm_start.intent is null)")
        examples = intent_examples(texts, intents, system or None)
        intent = train_sft(model, tokenizer, examples, cfg.intent, output_dir / "intent", seed=seed)
        result = combine({"intent": intent}, {"intent": 1})
    if phases is not None:
        sft_phases(phases, result, prefix=f"{output_dir.name}.")
    return result.model


def member_tokenizer(member: PeerMember, shared: Any, intents: Sequence[str]) -> Any:
    """The tokenizer ``member`` reads: a pretrained model's own vocabulary with sparring's tokens (``intents`` among
    them, :func:`~sparring.agents.tokenizer.stage_tokenizer`), else the cohort's ``shared`` one."""
    if member.model is None or member.model.name_or_path is None:
        return shared
    return stage_tokenizer(member.model.name_or_path, [], 0, intents)


def route_intents(model: Any, tokenizer: Any, texts: Sequence[str], max_new_tokens: int = 2) -> list[Label]:
    """The intent each text's greedy first reply names (None: none), as ``sparring route`` reads it."""
    policy = LMPolicy(model, tokenizer, "agent", max_new_tokens=max_new_tokens, greedy=True)
    return [r["intent"] for r in route_utterances(policy, texts)]


def accuracy(predicted: Sequence[Label], gold: Sequence[str]) -> float:
    """Share of predictions equal to the gold intent."""
    return sum(p == g for p, g in zip(predicted, gold, strict=True)) / len(gold) if gold else 0.0


def probe(models: dict[str, Any], tokenizer: Any, texts: Sequence[str], gold: Sequence[str]) -> dict[str, Any]:
    """Co-RL's diversity probe on labelled ``texts``: κ, c, w per pair and their means (greedy routings)."""
    return diversity({k: route_intents(m, tokenizer, texts) for k, m in models.items()}, gold)


def target_label_accuracy(
    votes: dict[str, Sequence[Label]], gold: Sequence[str], reward: str, teacher: str | None = None
) -> dict[str, float]:
    """The bound's half per member: the accuracy against ``gold`` of the labels ``reward`` would reward it for
    agreeing with, from each member's one greedy vote per utterance (``votes``, in ring order): its ring peer's
    vote, the plurality of the other members' votes, its own, or ``teacher``'s
    (:func:`~sparring.train.peer_reward.targets`)."""
    goal = targets({k: [[v] for v in vs] for k, vs in votes.items()}, reward, teacher=teacher)
    return {k: accuracy(goal[k], gold) for k in votes}
