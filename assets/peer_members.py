"""Asset `peer_members`: the peer-reward cohort's members of other model families, warm-started as DA0 is →
models/peer_members/<member>/. Apart from `peer_rl` so that it runs beside simulator_sft and the cycles: it needs
nothing of theirs, and `peer_rl` (after the last cycle) only loads what it wrote."""

from __future__ import annotations

from typing import Any

from pipelines.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.atomic import replace_dir
from sparring.catalog import PEER_MEMBERS
from sparring.lm.chat import AGENT_SYSTEM_PROMPT, known_intents
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.models import count_parameters
from sparring.timing import Phases
from sparring.train.demos import expert_demonstrations
from sparring.train.peer_reward import member_tokenizer, warm_start_member

STAGE = Stage(
    name="peer_members",
    description="The peer cohort's members of other model families (peer_rl.members with a model), each "
    "warm-started as DA0 is (intent phase, then expert demos unless `demos: false`); peer_rl trains them.",
    params=("ingest", "agent_sft", "peer_rl"),
    outs=(PEER_MEMBERS,),
    upstream=("ingest", "scenarios", "tokenizer"),
    priority=-1,  # only peer_rl, after the last cycle, needs it: it fills an idle core
    group="peer_reward",
    kinds=("pytorch", "huggingface"),
)


@stage_asset(STAGE)
def peer_members(ctx: StageContext) -> StageOutput:
    p, data, phases = ctx.params, ctx.catalog, Phases()
    tokenizer, train = data.tokenizer(), data.utterances("train")
    texts, intents = train["text"].to_list(), train["intent"].to_list()
    scenarios = data.scenarios("train")
    played: dict[tuple, list] = {}  # members sharing a recipe (the default's do) share its demos
    built, tokenizers, metrics = {}, {}, {}
    for name, member in p.peer_rl.members.items():
        if member.model is None:  # the final co-evolved agent: peer_rl loads it from the last cycle
            continue
        demos = (
            _demos(name, member.warm_start or p.agent_sft, scenarios, played, p.seed, phases) if member.demos else []
        )
        tokenizers[name] = member_tokenizer(member, tokenizer, sorted(known_intents()))  # a pretrained one: its own
        built[name] = warm_start_member(
            member, tokenizers[name], texts, intents, demos, p.agent_sft, data.scratch(STAGE.name, name), seed=p.seed,
            phases=phases,
        )  # fmt: skip
        metrics[f"{name}.parameters"] = float(count_parameters(built[name]))

    def write_all(folder):  # noqa: ANN001, ANN202
        for name, model in built.items():
            save_checkpoint(model, tokenizers[name], folder / name)

    with phases.time("save_checkpoints"):
        replace_dir(data.path(PEER_MEMBERS), write_all)
    metrics["members"] = float(len(built))
    return StageOutput(metrics=metrics, report={"members": sorted(built), "phases": phases.as_dict()})


def _demos(name: str, recipe: Any, scenarios: list, played: dict[tuple, list], seed: int, phases: Phases) -> list:
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
