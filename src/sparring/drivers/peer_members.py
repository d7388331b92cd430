"""The peer cohort's members of other model families as one run: each warm-started as DA0 is (its intent phase on
the train split, then the expert's demonstrations unless ``demos: false``), members sharing a recipe sharing its
demonstrations. The final co-evolved agent (a member with no model) is peer_rl's to load, not built here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sparring.lm.chat import AGENT_SYSTEM_PROMPT, known_intents
from sparring.lm.models import count_parameters
from sparring.settings import AgentSFTSettings, PeerMember
from sparring.timing import Phases
from sparring.train.demos import expert_demonstrations
from sparring.train.peer_reward import member_tokenizer, warm_start_member
from sparring.world.scenarios import Scenario


@dataclass
class MembersRun:
    models: dict[str, Any]  # per member built here: its warm-started model
    tokenizers: dict[str, Any]  # and the tokenizer it reads (a pretrained member: its own vocabulary)
    metrics: dict[str, float]
    phases: Phases = field(default_factory=Phases)


def run(
    members: dict[str, PeerMember],
    tokenizer: Any,
    utterances: pl.DataFrame,
    scenarios: list[Scenario],
    default: AgentSFTSettings,
    scratch: Path,
    seed: int,
) -> MembersRun:
    """Every member of ``members`` with a model, warm-started on ``utterances`` (the train split) and the expert's
    demonstrations on ``scenarios`` (train) by its ``warm_start`` recipe or ``default`` (agent_sft's);
    ``scratch``: one trainer folder per member under it."""
    phases = Phases()
    texts, intents = utterances["text"].to_list(), utterances["intent"].to_list()
    played: dict[tuple, list] = {}  # members sharing a recipe (the default's do) share its demos
    built, tokenizers, metrics = {}, {}, {}
    for name, member in members.items():
        if member.model is None:  # the final co-evolved agent: peer_rl loads it from the last cycle
            continue
        recipe = member.warm_start or default
        demos = _demos(name, recipe, scenarios, played, seed, phases) if member.demos else []
        tokenizers[name] = member_tokenizer(member, tokenizer, sorted(known_intents()))
        built[name] = warm_start_member(
            member, tokenizers[name], texts, intents, demos, default, scratch / name, seed=seed, phases=phases
        )
        metrics[f"{name}.parameters"] = float(count_parameters(built[name]))
    metrics["members"] = float(len(built))
    return MembersRun(built, tokenizers, metrics, phases)


def _demos(
    name: str, recipe: AgentSFTSettings, scenarios: list[Scenario], played: dict[tuple, list], seed: int, phases: Phases
) -> list:
    """Member ``name``'s expert demos as its warm-start recipe makes them, played once per recipe."""
    system = AGENT_SYSTEM_PROMPT if recipe.system_prompt else ""
    key = (recipe.demos, recipe.object_refs, system)
    if key not in played:
        with phases.time(f"{name}.expert_episodes") as counts:
            played[key] = expert_demonstrations(
                scenarios[: recipe.demos], seed, refs=recipe.object_refs, agent_system=system
            )
            counts["episodes"] = len(scenarios[: recipe.demos])
    return played[key]
