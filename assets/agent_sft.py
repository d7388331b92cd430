"""Asset `agent_sft`: DA0, the support agent's warm start — SFT on expert tool-routing demonstrations
(sparring.drivers.agent_sft)."""

from __future__ import annotations

from sparring.catalog import AGENT_SFT
from sparring.drivers import StageResult
from sparring.drivers.agent_sft import Inputs, run
from sparring.evaluate import checks
from stagekit.checks import report_check
from stagekit.stages import Plot, Stage, StageContext, stage_asset

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
def agent_sft(ctx: StageContext) -> StageResult:
    data = ctx.catalog
    inputs = Inputs(
        model=ctx.params.model,
        tokenizer=data.tokenizer(),
        utterances=data.utterances("train"),
        test=data.utterances("test"),
        scenarios={name: data.scenarios(name) for name in ("train", "heldout")},
        scratch=data.scratch(STAGE.name),
    )
    return run(inputs, ctx.params.agent_sft, data.path(AGENT_SFT), ctx.params.seed)


da0_beats_tfidf = report_check(
    "agent_sft", "da0_beats_tfidf", checks.da0_beats_tfidf.__doc__.split("\n\n")[0].replace("\n", " "),
    checks.da0_beats_tfidf,
)  # fmt: skip
