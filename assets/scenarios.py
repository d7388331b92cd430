"""Asset `scenarios`: hidden customer goals for training (train split) and evaluation (test split), disjoint."""

from __future__ import annotations

from collections import Counter

from pipelines.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.agents.leaving import gives_up
from sparring.atomic import replace_dir
from sparring.catalog import SCENARIOS, scenario_file
from sparring.seeds import derive_seed
from sparring.world.scenarios import check_disjoint, sample_scenarios, save_scenarios, unplayed_scenarios

STAGE = Stage(
    name="scenarios",
    description="Scenarios (intent, world, customer, slots, persona, expected calls): train, held-out, the "
    "agent gym's unplayed set, and validation and arena sets from the validation split.",
    params=("scenarios",),
    deps=("src/sparring/world", "src/sparring/agents/leaving.py", "src/sparring/seeds.py", "assets/scenarios.py"),
    outs=(SCENARIOS,),
    upstream=("ingest",),
    headline_metrics=("n_train",),
    group="data",
)


@stage_asset(STAGE)
def scenarios(ctx: StageContext) -> StageOutput:
    cfg, train = ctx.params.scenarios, ctx.catalog.utterances("train")
    sets = {
        name: sample_scenarios(
            train if split == "train" else ctx.catalog.utterances(split),
            n=n,
            seed=ctx.params.seed,
            personas=dict(cfg.personas),
            n_customers=cfg.n_customers,
        )
        for name, split, n in (("train", "train", cfg.n_train), ("heldout", "test", cfg.n_heldout))
    }
    check_disjoint(sets["train"], sets["heldout"])
    sets["gym"] = unplayed_scenarios(  # the agent gym's openings that no demonstration played
        train,
        sets["train"],
        cfg.n_gym,
        derive_seed(ctx.params.seed, "fresh-gym", 0),
        dict(cfg.personas),
        n_customers=cfg.n_customers,
        skip=gives_up,
    )
    check_disjoint(sets["gym"], sets["heldout"])
    # Validation (agent_rl's checkpoint choice) and arena (the cycles'): one draw from the validation split, cut in
    # two, so the sets share no utterance and neither meets a demonstration, a gym or the held-out set.
    unseen = sample_scenarios(
        ctx.catalog.utterances("validation"),
        n=cfg.n_validation + cfg.n_arena,
        seed=derive_seed(ctx.params.seed, "validation"),
        personas=dict(cfg.personas),
        n_customers=cfg.n_customers,
    )
    sets["validation"], sets["arena"] = unseen[: cfg.n_validation], unseen[cfg.n_validation :]
    for name in ("validation", "arena"):
        for other in ("train", "heldout", "gym"):
            check_disjoint(sets[name], sets[other])
    check_disjoint(sets["validation"], sets["arena"])

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
