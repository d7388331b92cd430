"""Asset `simulator_sft`: the customer simulator, stage 1 of TRACER (SFT on dialogues), with its fidelity."""

from __future__ import annotations

from typing import Any

from pipelines.checks import report_check
from pipelines.stages import Plot, Stage, StageContext, StageOutput, stage_asset
from sparring.catalog import FIDELITY, SIMULATOR_SFT
from sparring.evaluate import checks
from sparring.evaluate.fidelity import simulator_fidelity
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.models import build_model, count_parameters
from sparring.lm.policies import LMPolicy
from sparring.timing import Phases, sft_phases
from sparring.train.tracer import scripted_episodes, simulator_conversations, train_simulator

STAGE = Stage(
    name="simulator_sft",
    description="Customer simulator (TRACER stage 1): a copy drill and an opening drill, then SFT on dialogues, "
    "utterances and scripted episodes, each turn conditioned on the hidden goal and persona; fidelity on held-out "
    "data.",
    params=("model", "simulator_sft"),
    # besides the trainer: the model it builds, the scripted episodes it trains on, the judge models and outcome
    # classes (data/synthetic.py's OUTCOMES) its fidelity is measured with
    outs=(SIMULATOR_SFT,),
    upstream=("ingest", "scenarios", "tokenizer", "judge_models"),
    priority=1,  # the longest chain to the cycles: start it before anything else that is ready
    headline_metrics=("sim_faithfulness",),
    series=Plot("step", "train_loss", "simulator SFT: training loss (drills, then SFT)"),
    group="warm_start",
    kinds=("pytorch", "huggingface", "mlflow"),
)


@stage_asset(STAGE)
def simulator_sft(ctx: StageContext) -> StageOutput:
    p, data, cfg, phases = ctx.params, ctx.catalog, ctx.params.simulator_sft, Phases()
    tokenizer, utterances, dialogues = data.tokenizer(), data.utterances("train"), data.dialogues("train")
    with phases.time("scripted_episodes") as counts:
        # Ending as the persona's dialogues do, not all resolved: the simulator learns every ending (#58).
        endings_from = dialogues if cfg.scripted_endings == "persona" else None
        episodes = scripted_episodes(data.scenarios("train", cfg.scripted_episodes), p.seed, dialogues=endings_from)
        counts["episodes"] = len(episodes)
    conversations = simulator_conversations(dialogues, utterances, episodes, seed=p.seed, max_utterances=cfg.openings)
    with phases.time("build_model"):
        model = build_model(p.model, tokenizer, seed=p.seed)
    # The drills are for a model from config: a pretrained one reads its goal already.
    result = train_simulator(
        model, tokenizer, conversations, utterances, cfg, data.scratch(STAGE.name), seed=p.seed,
        drills=p.model.name_or_path is None,
    )  # fmt: skip
    sft_phases(phases, result)
    ctx.log.curves(result.curves)
    policy = LMPolicy(result.model, tokenizer, role="customer", max_new_tokens=cfg.max_new_tokens, greedy=True)
    sessions: list[dict[str, Any]] = []  # per replayed session, no texts (docs/runs/)
    with phases.time("fidelity") as counts:  # held-out episodes, replays, perplexity, judge models
        fidelity = simulator_fidelity(
            policy, data.scenarios("heldout", cfg.eval_scenarios), data.dialogues("test"), *data.judge_models(),
            seed=p.seed, max_dialogues=cfg.eval_scenarios, sessions=sessions,
        )  # fmt: skip
        counts["episodes"] = int(fidelity.get("n_sim_episodes", 0) + fidelity.get("n_replayed", 0))
    with phases.time("save_checkpoint"):  # the fidelity beside the weights: evaluate reads it (catalog.FIDELITY)
        results = {FIDELITY: {"profile": p.profile, "sft": fidelity}}
        save_checkpoint(result.model, tokenizer, data.path(SIMULATOR_SFT), results)
        ctx.log.checkpoint(data.path(SIMULATOR_SFT), "")
    metrics = {**fidelity, "parameters": count_parameters(result.model), "train_conversations": len(conversations)}
    report = {"phases": phases.as_dict(), "sessions": sessions}
    return StageOutput(metrics={**metrics, **_training_metrics(result)}, report=report)


def _training_metrics(result: Any) -> dict[str, float]:
    """The SFT phase's figures, and each drill's beside them."""
    sft = result.phases["sft"]
    metrics = {
        "train_seconds": round(sft.seconds, 2),
        "train_tokens_per_s": round(sft.tokens_per_s, 1),
        "final_loss": sft.final_loss,
    }
    for name, phase in result.phases.items():
        if name != "sft":
            metrics.update({f"{name}_seconds": round(phase.seconds, 2), f"{name}_final_loss": phase.final_loss})
    return metrics


simulator_is_faithful = report_check(
    "simulator_sft", "simulator_is_faithful", checks.simulator_is_faithful.__doc__.replace("\n", " "),
    checks.simulator_is_faithful,
)  # fmt: skip
