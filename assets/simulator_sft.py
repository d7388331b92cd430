"""Asset `simulator_sft`: the customer simulator, stage 1 of TRACER (SFT on dialogues), with its fidelity."""

from __future__ import annotations

import polars as pl
from transformers import AutoTokenizer

from pipelines.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.agents.models import build_model, count_parameters
from sparring.agents.policies import LMPolicy
from sparring.evaluate.fidelity import simulator_fidelity
from sparring.judge.models import IntentOracle, RealismDiscriminator
from sparring.train.checkpoints import model_spec, save_checkpoint, sft_settings
from sparring.train.sft import SFTResult, train_sft
from sparring.train.simulator import copy_drill, opening_drill, scripted_episodes, simulator_conversations
from sparring.world.scenarios import load_scenarios

STAGE = Stage(
    name="simulator_sft",
    description="Customer simulator (TRACER stage 1): a copy drill and an opening drill, then SFT on dialogues, "
    "utterances and scripted episodes, each turn conditioned on the hidden goal and persona; fidelity on held-out "
    "data.",
    params=("model", "simulator_sft"),
    deps=("src/sparring/train", "src/sparring/evaluate/fidelity.py", "assets/simulator_sft.py"),
    outs=("models/simulator_sft",),
    upstream=("ingest", "scenarios", "tokenizer", "judge_models"),
)


@stage_asset(STAGE)
def simulator_sft(ctx: StageContext) -> StageOutput:
    p, data, models = ctx.params, ctx.root / "data", ctx.root / "models"
    cfg = p.simulator_sft
    tokenizer = AutoTokenizer.from_pretrained(models / "tokenizer")
    train_scenarios = load_scenarios(data / "scenarios" / "train.jsonl")
    utterances = pl.read_parquet(data / "ingest" / "train.parquet")
    conversations = simulator_conversations(
        pl.read_parquet(data / "ingest" / "dialogues_train.parquet"),
        utterances,
        scripted_episodes(train_scenarios[: cfg.scripted_episodes], p.seed),
        seed=p.seed,
        max_utterances=cfg.openings,
    )
    model = build_model(model_spec(p.model, p.seed), tokenizer)
    settings, scratch = sft_settings(cfg, p.seed), ctx.root / "scratch" / "simulator_sft"
    # Phases 0 and 1 are for a model from config (a pretrained one reads its goal already): name -> result.
    drills: dict[str, SFTResult] = {}
    if cfg.copy_steps and p.model.name_or_path is None:
        drills["copy_drill"] = copy_drill(
            model,
            tokenizer,
            utterances["text"].to_list(),
            settings,
            cfg.copy_steps,
            cfg.copy_batch_size,
            cfg.copy_learning_rate,
            scratch / "copy",
        )
        model = drills["copy_drill"].model
    if cfg.opening_epochs and p.model.name_or_path is None:
        drills["opening_drill"] = opening_drill(
            model,
            tokenizer,
            utterances,
            settings,
            cfg.opening_epochs,
            cfg.opening_batch_size,
            cfg.opening_learning_rate,
            scratch / "openings",
        )
        model = drills["opening_drill"].model
    result = train_sft(  # loss on the customer's own turns only (assistant in its view): TRACER stage 1
        model, tokenizer, conversations, settings, scratch
    )
    phases = {"copy_drill": 0, "opening_drill": 1, "sft": 2}
    ctx.log.curves([{**c, "phase": phases[name]} for name, r in {**drills, "sft": result}.items() for c in r.curves])
    save_checkpoint(result.model, tokenizer, models / "simulator_sft")
    ctx.log.artifacts(models / "simulator_sft", "checkpoint")

    policy = LMPolicy(result.model, tokenizer, role="customer", max_new_tokens=cfg.max_new_tokens, greedy=True)
    fidelity = simulator_fidelity(
        policy,
        load_scenarios(data / "scenarios" / "heldout.jsonl")[: cfg.eval_scenarios],
        pl.read_parquet(data / "ingest" / "dialogues_test.parquet"),
        IntentOracle.load(models / "judge" / "oracle"),
        RealismDiscriminator.load(models / "judge" / "discriminator"),
        seed=p.seed,
        max_dialogues=cfg.eval_scenarios,
    )
    metrics = {
        **fidelity,
        "parameters": count_parameters(result.model),
        "train_conversations": len(conversations),
        "train_seconds": round(result.seconds, 2),
        "train_tokens_per_s": round(result.tokens_per_s, 1),
        "final_loss": result.final_loss,
    }
    for name, drill in drills.items():
        metrics.update({f"{name}_seconds": round(drill.seconds, 2), f"{name}_final_loss": drill.final_loss})
    return StageOutput(metrics=metrics)
