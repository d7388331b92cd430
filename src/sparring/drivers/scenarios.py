"""The scenarios stage: hidden customer goals (intent, world, customer, slots, persona, expected calls) drawn from
the ingested splits: train and held-out sets from the train and test splits, disjoint, the agent gym's unplayed set,
and validation and arena sets from the validation split."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sparring.agents.leaving import gives_up
from sparring.atomic import replace_dir
from sparring.catalog import scenario_file
from sparring.drivers import StageResult
from sparring.params import Scenarios
from sparring.world.scenarios import Scenario, save_scenarios, scenario_sets


@dataclass
class Inputs:
    utterances: dict[str, pl.DataFrame]  # the ingested splits by name: train, validation and test


def run(inputs: Inputs, settings: Scenarios, out_dir: Path, seed: int) -> StageResult:
    """Every scenario set drawn from the splits and written to ``out_dir``; their sizes and personas counted."""
    cfg = settings
    sizes = {"train": cfg.n_train, "heldout": cfg.n_heldout, "gym": cfg.n_gym}
    sizes.update(validation=cfg.n_validation, arena=cfg.n_arena)
    sets = scenario_sets(inputs.utterances, sizes, seed, dict(cfg.personas), n_customers=cfg.n_customers, skip=gives_up)

    def write(folder: Path) -> None:
        for name, items in sets.items():
            save_scenarios(items, scenario_file(folder, name))

    replace_dir(out_dir, write)
    return StageResult(metrics=set_metrics(sets))


def set_metrics(sets: dict[str, list[Scenario]]) -> dict[str, float]:
    """Each set's size, the held-out set's intents and its scenarios per persona."""
    personas = Counter(s.persona for s in sets["heldout"])
    return {
        "n_train": len(sets["train"]),
        "n_heldout": len(sets["heldout"]),
        "n_gym": len(sets["gym"]),
        "n_validation": len(sets["validation"]),
        "n_arena": len(sets["arena"]),
        "heldout_intents": len({s.intent for s in sets["heldout"]}),
        **{f"heldout_persona_{p}": n for p, n in sorted(personas.items())},
    }
