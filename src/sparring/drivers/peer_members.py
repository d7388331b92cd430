"""The peer cohort's members of other model families as one run: each warm-started as DA0 is (its intent phase on
the train split, then the expert's demonstrations unless ``demos: false``), members sharing a recipe sharing its
demonstrations; saved one folder per member. The final co-evolved agent (a member with no model) is peer_rl's to
load, not built here."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from sparring.atomic import replace_dir
from sparring.drivers import StageResult
from sparring.lm.chat import AGENT_SYSTEM_PROMPT, known_intents
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.models import count_parameters
from sparring.settings import AgentSFTSettings, PeerRewardSettings
from sparring.timing import Phases
from sparring.train.demos import expert_demonstrations
from sparring.train.peer_reward import member_tokenizer, warm_start_member
from sparring.world.scenarios import Scenario


@dataclass
class Inputs:
    tokenizer: Any  # the tokenizer stage's: a member from config reads it (a pretrained one: its own, extended)
    utterances: pl.DataFrame  # the train split: every member's intent phase
    scenarios: list[Scenario]  # the train scenarios: the expert's demonstrations are played on them
    default_recipe: AgentSFTSettings  # params' agent_sft: the warm start of a member that names none
    scratch: Path  # one trainer folder per member under it


def run(inputs: Inputs, settings: PeerRewardSettings, out_dir: Path, seed: int) -> StageResult:
    """Every member of ``settings.members`` with a model, warm-started on the train split and the expert's
    demonstrations on the train scenarios by its ``warm_start`` recipe or agent_sft's; saved to
    ``out_dir/<member>``."""
    phases = Phases()
    texts, intents = inputs.utterances["text"].to_list(), inputs.utterances["intent"].to_list()
    played: dict[tuple, list] = {}  # members sharing a recipe (the default's do) share its demos
    built, tokenizers, metrics = {}, {}, {}
    default = inputs.default_recipe
    for name, member in settings.members.items():
        if member.model is None:  # the final co-evolved agent: peer_rl loads it from the last cycle
            continue
        recipe = member.warm_start or default
        demos = _demos(name, recipe, inputs.scenarios, played, seed, phases) if member.demos else []
        tokenizers[name] = member_tokenizer(member, inputs.tokenizer, sorted(known_intents()))
        built[name] = warm_start_member(
            member, tokenizers[name], texts, intents, demos, default, inputs.scratch / name, seed=seed, phases=phases
        )
        metrics[f"{name}.parameters"] = float(count_parameters(built[name]))
    metrics["members"] = float(len(built))
    with phases.time("save_checkpoints"):
        replace_dir(out_dir, partial(_save_all, built, tokenizers))
    return StageResult(metrics, report={"members": sorted(built)}, phases=phases)


def _save_all(models: dict[str, Any], tokenizers: dict[str, Any], folder: Path) -> None:
    """Each member's checkpoint under ``folder/<member>``."""
    for name, model in models.items():
        save_checkpoint(model, tokenizers[name], folder / name)


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
