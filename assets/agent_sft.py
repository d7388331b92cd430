"""Asset `agent_sft`: DA0, the support agent's warm start — SFT on expert tool-routing demonstrations
(sparring.drivers.agent_sft)."""

from __future__ import annotations

from pipelines.kit.checks import report_check
from pipelines.kit.stages import Plot, Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import AGENT_SFT
from sparring.drivers.agent_sft import run as run_agent_sft
from sparring.evaluate import checks
from sparring.lm.checkpoints import save_checkpoint

STAGE = Stage(
    name="agent_sft",
    description="DA0: SFT on expert demonstrations (lookup first, the right tool, a clean end) against "
    "cooperative customers; measured on held-out scenarios against scripted cooperative and camouflaging customers.",
    params=("model", "agent_sft"),
    # besides the trainer and its evaluation: the model it builds, the expert demos (agents, rollout, world) and
    # the camouflaging customer's utterances (data/synthetic.py and its lexicon)
    outs=(AGENT_SFT,),
    upstream=("ingest", "scenarios", "tokenizer"),
    headline_metrics=("strict_pass_camo",),
    series=Plot("step", "train_loss", "DA0 warm start: training loss (intent phase, then episodes)"),
    group="warm_start",
    kinds=("pytorch", "huggingface", "mlflow"),
)


@stage_asset(STAGE)
def agent_sft(ctx: StageContext) -> StageOutput:
    p, data = ctx.params, ctx.catalog
    tokenizer, scenarios = data.tokenizer(), {name: data.scenarios(name) for name in ("train", "heldout")}
    done = run_agent_sft(
        p.model, tokenizer, data.utterances("train"), scenarios, data.utterances("test"), p.agent_sft,
        data.scratch(STAGE.name), p.seed,
    )  # fmt: skip
    ctx.log.curves(done.curves)
    with done.phases.time("save_checkpoint"):
        save_checkpoint(done.model, tokenizer, data.path(AGENT_SFT))
        ctx.log.checkpoint(data.path(AGENT_SFT), "")
    return StageOutput(metrics=done.metrics, report={"phases": done.phases.as_dict()})


da0_beats_tfidf = report_check(
    "agent_sft", "da0_beats_tfidf", checks.da0_beats_tfidf.__doc__.split("\n\n")[0].replace("\n", " "),
    checks.da0_beats_tfidf,
)  # fmt: skip
