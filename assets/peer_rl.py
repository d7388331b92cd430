"""Asset `peer_rl`: Co-RL, a cohort (the final co-evolved agent + members of other families) adapts its routing to
the unlabeled pool by rewarding each other's answers → models/peer_rl/<member>/ (evaluate plays `final` as
`peer_final`), reports/peer_rl.json."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from pipelines.kit.graph_shape import LAST_CYCLE, N_CYCLES
from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.atomic import replace_dir, write_results
from sparring.catalog import COHORT, PEER_MEMBERS, PEER_RL, cycle_dir
from sparring.data.ingest import load_unlabeled
from sparring.drivers.peer_rl import cohort_demos, hold_out
from sparring.drivers.peer_rl import run as run_peer_rl
from sparring.lm.checkpoints import save_checkpoint
from sparring.timing import Phases
from sparring.train.cycle_state import CycleState

STAGE = Stage(
    name="peer_rl",
    description="Peer-reward RL (Co-RL): the final agent and members of other model families adapt their routing "
    "to unlabeled real utterances by each other's labels (the cohort's joint vote in exact expectation; or ring / "
    "majority / self / a teacher); intent accuracy before and after on labelled utterances held out of the pool, "
    "Co-RL's diversity probe, a collapse guard.",
    params=("ingest", "peer_rl", "agent_sft"),
    outs=(PEER_RL,),
    upstream=(LAST_CYCLE, "peer_members", "ingest", "tokenizer", "scenarios"),
    group="peer_reward",
    kinds=("pytorch", "mlflow"),
)


def _members(ctx: StageContext, phases: Phases) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cohort: the final co-evolved agent (loaded as evaluate loads it) and the members peer_members
    warm-started, each with the tokenizer it was saved with (a pretrained member reads its own vocabulary)."""
    data, models, tokenizers = ctx.catalog, {}, {}
    final_agent = CycleState.load(data.path(cycle_dir(N_CYCLES))).agent_dir
    for name, member in ctx.params.peer_rl.members.items():
        folder = final_agent if member.model is None else f"{PEER_MEMBERS}/{name}"
        if not data.path(folder).is_dir():
            raise FileNotFoundError(
                f"peer_rl: member {name!r} has no checkpoint at {data.path(folder)}: run peer_members first"
            )
        with phases.time(f"load_{name}"):
            models[name], tokenizers[name] = data.checkpoint(folder)
    return models, tokenizers


@stage_asset(STAGE)
def peer_rl(ctx: StageContext) -> StageOutput:
    p, data, cfg = ctx.params, ctx.catalog, ctx.params.peer_rl
    validation, test = data.utterances("validation"), data.utterances("test")
    # ingest.unlabeled, without the validation and test splits' texts
    unlabeled = load_unlabeled(p.ingest, p.seed, ctx.root, pl.concat([validation, test])["text"])
    phases = Phases()
    models, tokenizers = _members(ctx, phases)
    intents = unlabeled["intent"].to_list()
    if cfg.measure_from == "pool":  # labelled rows of the pool held out: measured on what it adapts to
        measured_at, probe_at, pool_at = hold_out(intents, cfg.measure, cfg.probe, cfg.pool, p.seed)
        measured, probed = unlabeled[measured_at], unlabeled[probe_at]
    else:
        pool_at = hold_out(intents, 0, 0, cfg.pool, p.seed)[2]  # shuffled by the seed, the first `pool` trained on
        measured, probed = test.head(cfg.measure), validation.head(cfg.probe)
    pool = unlabeled[pool_at]["text"].to_list(), unlabeled[pool_at]["intent"].to_list()
    measure = measured["text"].to_list(), measured["intent"].to_list()  # kept by id in the report
    probe = probed["text"].to_list(), probed["intent"].to_list()
    demos = cohort_demos(data.scenarios("train"), cfg, models["final"], p.agent_sft.object_refs, p.seed, phases)
    ran = run_peer_rl(models, tokenizers, pool, measure, probe, cfg, data.scratch(STAGE.name, "grpo"), p.seed,
                      _warning(ctx), phases, demos=demos)  # fmt: skip
    with phases.time("save_checkpoints"):  # the members and, beside them, what evaluate copies into `peer`
        saved = {"profile": p.profile, **ran.cohort()}
        replace_dir(data.path(PEER_RL), partial(_save_all, ran.models, tokenizers, saved))
    metrics = {k: ran.diversity[k] for k in ("kappa", "c", "w")} | {"train_seconds": ran.seconds}
    for name, member in ran.members.items():
        with phases.time("log_mlflow"):
            ctx.log.checkpoint(data.path(PEER_RL) / name, name)  # an MLflow logged model `peer_rl-<member>`
            with ctx.log.child_run(name) as child:
                child.series(member["steps"])
                child.metrics({k: float(member[k]) for k in ("before", "after", "collapsed")})
        metrics.update({f"{name}.{k}": float(member[k]) for k in ("before", "after", "collapsed")})
    report = {**ran.cohort(), "members": ran.members, "pairs": ran.diversity["pairs"]}
    report["probe_accuracy"] = ran.diversity["accuracy"]
    # each member's routing of each test utterance before and after, by id: the gains' intervals recompute from it
    votes = {name: {"before": before, "after": after} for name, (before, after) in ran.votes.items()}
    report["per_utterance"] = {"ids": measured["id"].to_list(), "intents": measure[1], "votes": votes}
    return StageOutput(metrics=metrics, report={**report, "phases": phases.as_dict()})


def _warning(ctx: StageContext) -> Callable[[str], None]:
    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)  # the stage's log (scratch/logs/peer_rl.log)
        ctx.dagster.log.warning(message)

    return say


def _save_all(models: dict[str, Any], tokenizers: dict[str, Any], cohort: dict[str, Any], folder: Path) -> None:
    for name, model in models.items():
        save_checkpoint(model, tokenizers[name], folder / name)
    write_results(cohort, folder / COHORT)
