"""Asset `scenarios`: hidden customer goals for training (train split) and evaluation (test split), disjoint."""

from __future__ import annotations

from collections import Counter

from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.agents.leaving import gives_up
from sparring.atomic import replace_dir
from sparring.catalog import SCENARIOS, scenario_file
from sparring.world.scenarios import save_scenarios, scenario_sets

STAGE = Stage(
    name="scenarios",
    description="Scenarios (intent, world, customer, slots, persona, expected calls): train, held-out, the "
    "agent gym's unplayed set, and validation and arena sets from the validation split.",
    params=("scenarios",),
    outs=(SCENARIOS,),
    upstream=("ingest",),
    headline_metrics=("n_train",),
    group="data",
)


@stage_asset(STAGE)
def scenarios(ctx: StageContext) -> StageOutput:
    cfg, data = ctx.params.scenarios, ctx.catalog
    sizes = {"train": cfg.n_train, "heldout": cfg.n_heldout, "gym": cfg.n_gym}
    sizes.update(validation=cfg.n_validation, arena=cfg.n_arena)
    splits = {split: data.utterances(split) for split in ("train", "validation", "test")}
    sets = scenario_sets(splits, sizes, ctx.params.seed, dict(cfg.personas), n_customers=cfg.n_customers, skip=gives_up)

    def write(folder):
        for name, items in sets.items():
            save_scenarios(items, scenario_file(folder, name))

    replace_dir(ctx.catalog.path(SCENARIOS), write)
    personas = Counter(s.persona for s in sets["heldout"])
    metrics = {
        "n_train": len(sets["train"]),
        "n_heldout": len(sets["heldout"]),
        "n_gym": len(sets["gym"]),
        "n_validation": len(sets["validation"]),
        "n_arena": len(sets["arena"]),
        "heldout_intents": len({s.intent for s in sets["heldout"]}),
        **{f"heldout_persona_{p}": n for p, n in sorted(personas.items())},
    }
    return StageOutput(metrics=metrics)
