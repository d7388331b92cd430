"""Asset `peer_rl`: Co-RL, a cohort (the final co-evolved agent + members of other families) adapts its routing to
the unlabeled pool by rewarding each other's answers → models/peer_rl/<member>/, reports/peer_rl.json."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from pipelines.graph_shape import LAST_CYCLE, N_CYCLES
from pipelines.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.atomic import replace_dir, write_json
from sparring.catalog import COHORT, PEER_MEMBERS, PEER_RL, cycle_dir
from sparring.data.ingest import load_unlabeled
from sparring.evaluate.episodes import paired_bootstrap
from sparring.lm.checkpoints import save_checkpoint
from sparring.timing import Phases
from sparring.train.cycle_state import CycleState
from sparring.train.peer_expectation import train_cohort_exact
from sparring.train.peer_reward import accuracy, best_on_probe, diversity, route_intents, summarize, train_cohort

STAGE = Stage(
    name="peer_rl",
    description="Peer-reward RL (Co-RL): the final agent and members of other model families, each its own GRPO "
    "trainer, reward each other's routing on unlabeled utterances (ring / majority / self); intent accuracy "
    "before and after on the labelled test split, Co-RL's diversity probe, a collapse guard.",
    params=("ingest", "peer_rl"),
    outs=(PEER_RL,),
    upstream=(LAST_CYCLE, "peer_members", "ingest", "tokenizer"),
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
    p, data, cfg, phases = ctx.params, ctx.catalog, ctx.params.peer_rl, Phases()
    validation, test = data.utterances("validation"), data.utterances("test")
    # ingest.unlabeled, without the texts accuracy is measured on (validation: the probe, test: before/after)
    unlabeled = load_unlabeled(p.ingest, p.seed, ctx.root, pl.concat([validation, test])["text"])
    models, tokenizers = _members(ctx, phases)
    measured = test["text"].to_list()[: cfg.measure], test["intent"].to_list()[: cfg.measure]
    with phases.time("measure_before") as counts:
        before = {k: route_intents(m, tokenizers[k], measured[0]) for k, m in models.items()}  # votes
        counts["episodes"] = len(measured[0]) * len(models)  # one routing per utterance and member
    probe_texts, probe_gold = validation["text"].to_list()[: cfg.probe], validation["intent"].to_list()[: cfg.probe]
    with phases.time("probe"):
        probed = diversity({k: route_intents(m, tokenizers[k], probe_texts) for k, m in models.items()}, probe_gold)
    if cfg.teacher_reward and cfg.teacher is None:
        cfg = cfg.replace(teacher=best_on_probe(probed))
    order = list(range(unlabeled.height))
    random.Random(p.seed).shuffle(order)
    pool = [unlabeled["text"][i] for i in order[: cfg.pool]]
    gold = [unlabeled["intent"][i] for i in order[: cfg.pool]]  # withheld: only the pseudo-label accuracy reads them
    train = train_cohort_exact if cfg.estimate == "exact" else train_cohort
    result = train(
        models, tokenizers, pool, cfg, data.scratch(STAGE.name, "grpo"), gold=gold, seed=p.seed, say=_warning(ctx)
    )
    # lock-step GRPO: rollouts and updates; exact: the teacher's scoring and each learner's updates
    phases.add(f"cohort_{cfg.estimate}", result.seconds, episodes=result.routings)
    members, metrics = _after(ctx, result, tokenizers, before, measured, phases)
    diversity_figures = {k: probed[k] for k in ("kappa", "c", "w")}
    metrics.update(**diversity_figures, train_seconds=result.seconds)
    cohort = {"members": members, **diversity_figures, "reward": cfg.reward, "estimate": cfg.estimate}
    cohort.update(teacher=cfg.teacher)
    summary = {name: {k: v for k, v in m.items() if k != "steps"} for name, m in members.items()}
    with phases.time("save_checkpoints"):  # the members and, beside them, what evaluate copies into `peer`
        saved = {"profile": p.profile, **cohort, "members": summary}
        replace_dir(data.path(PEER_RL), partial(_save_all, result.models, tokenizers, saved))
        for name in result.models:
            ctx.log.checkpoint(data.path(PEER_RL) / name, name)  # an MLflow logged model `peer_rl-<member>`
    report = {**cohort, "pairs": probed["pairs"], "probe_accuracy": probed["accuracy"]}
    report.update(n_pool=len(pool), n_measure=len(measured[0]), phases=phases.as_dict())
    return StageOutput(metrics=metrics, report=report)


def _warning(ctx: StageContext) -> Callable[[str], None]:
    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)  # the stage's log (scratch/logs/peer_rl.log)
        ctx.dagster.log.warning(message)

    return say


def _save_all(models: dict[str, Any], tokenizers: dict[str, Any], cohort: dict[str, Any], folder: Path) -> None:
    for name, model in models.items():
        save_checkpoint(model, tokenizers[name], folder / name)
    write_json(cohort, folder / COHORT)


def _after(
    ctx: StageContext,
    result: Any,
    tokenizers: dict[str, Any],
    before_votes: dict[str, list],
    measured: tuple[list, list],
    phases: Phases,
) -> tuple[dict[str, Any], dict[str, float]]:
    """Each member after training: its accuracy with the paired 95% interval of its gain over the measured
    utterances, collapse, agreement and reward, logged to its own MLflow run."""
    members, metrics = {}, {}
    for name, model in result.models.items():
        with phases.time("measure_after") as counts:
            after_votes = route_intents(model, tokenizers[name], measured[0])
            counts["episodes"] = len(measured[0])
        right = [
            [float(v == g) for v, g in zip(votes, measured[1], strict=True)]
            for votes in (before_votes[name], after_votes)
        ]
        before, after = accuracy(before_votes[name], measured[1]), accuracy(after_votes, measured[1])
        s = summarize(result.logs[name])
        agreement = {k[len("agree_") :]: v for k, v in s.items() if k.startswith("agree_")}
        members[name] = {
            "before": before,
            "after": after,
            "gain_ci": list(paired_bootstrap(right[0], right[1], seed=ctx.params.seed)),
            "collapsed": s["collapsed"],
            "collapse_reason": s["collapse_reason"],
            "collapsed_step": s["collapsed_step"],
            "entropy": s["entropy"],
            "agreement": agreement,
            "pseudo_label_acc": s.get("target_acc_all", float("nan")),
            "own_vote_acc": s.get("vote_acc_all", float("nan")),
            "reward_mean": s["reward_mean"],
            "steps": result.logs[name].steps,
        }
        with ctx.log.child_run(name) as run:
            for row in result.logs[name].steps:
                run.metrics({k: v for k, v in row.items() if k != "step"}, step=int(row["step"]))
            run.metrics({"before": before, "after": after, "collapsed": float(s["collapsed"])})
        metrics.update({f"{name}.before": before, f"{name}.after": after})
        metrics[f"{name}.collapsed"] = float(s["collapsed"])
    return members, metrics
