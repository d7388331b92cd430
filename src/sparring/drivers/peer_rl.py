"""Co-RL as one run (../shared/SEEDS.md, peer reward): each member's routing accuracy on labelled utterances before,
the cohort's diversity probe (κ, c, w), training on the unlabeled pool (co-training by the joint vote, sampled GRPO
or a teacher in exact expectation), then each member's accuracy after with the paired 95% interval of its gain over
the same utterances. ``run`` is the stage (the cohort loaded, the pool dealt, the demos played, the members saved);
``train_and_measure`` the before/after measurement around the training, which benchmarks call on cohorts of their
own."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from sparring.atomic import replace_dir, write_results
from sparring.catalog import COHORT
from sparring.data.sources import IngestError
from sparring.drivers import ChildRun, StageResult
from sparring.evaluate.episodes import paired_bootstrap
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.settings import PeerMember, PeerRewardSettings
from sparring.timing import Phases
from sparring.train.demos import expert_demonstrations
from sparring.train.peer_cotrain import train_cotrain
from sparring.train.peer_expectation import train_cohort_exact
from sparring.train.peer_reward import accuracy, best_on_probe, diversity, route_intents, summarize, train_cohort
from sparring.world.scenarios import Scenario

Labelled = tuple[Sequence[str], Sequence[str]]  # (texts, intents)


@dataclass
class PeerRun:
    models: dict[str, Any]  # the trained members (the teacher untouched)
    members: dict[str, dict[str, Any]]  # per member: before, after, gain_ci, collapse, agreement, steps
    diversity: dict[str, Any]  # the probe's kappa, c, w, pairs and per-member accuracy
    settings: PeerRewardSettings  # as run: the teacher filled in when the probe chose it
    seconds: float  # training's
    n_pool: int
    n_measure: int
    votes: dict[str, tuple[list, list]] = field(default_factory=dict)  # per member: its routings before, after
    phases: Phases = field(default_factory=Phases)

    def cohort(self) -> dict[str, Any]:
        """What evaluate copies into metrics.json's `peer`: the members without their step logs, κ/c/w, the reward."""
        members = {name: {k: v for k, v in m.items() if k != "steps"} for name, m in self.members.items()}
        figures = {k: self.diversity[k] for k in ("kappa", "c", "w")}
        cfg = self.settings
        how = {"reward": cfg.reward, "estimate": cfg.estimate, "teacher": cfg.teacher, "measure_from": cfg.measure_from}
        if cfg.reward == "cohort":  # how its learners learned the joint labels
            how.update(loss=cfg.cotrain.loss, keep=cfg.cotrain.keep, learners=cfg.cotrain.learners)
        return {"members": members, **figures, **how, "n_measure": self.n_measure, "n_pool": self.n_pool}


def cohort_demos(
    scenarios: Sequence[Scenario], settings: PeerRewardSettings, agent: Any, refs: str, seed: int, phases: Phases
) -> list:
    """The expert's demonstrations on the first ``cotrain.demos`` train ``scenarios``, against each of
    ``cotrain.demo_customers`` (as agent_sft plays them:
    ``refs``, the ``agent``'s system prompt) that the cohort reward's ``sft`` learners keep; none otherwise."""
    if settings.reward != "cohort" or settings.cotrain.loss != "sft":
        return []
    with phases.time("expert_episodes") as counts:
        system = getattr(agent.config, "agent_system_prompt", "") or None
        picked = list(scenarios[: settings.cotrain.demos])
        counts["episodes"] = len(picked)
        cfg = settings.cotrain
        return expert_demonstrations(picked, seed, cfg.demo_customers, refs=refs, agent_system=system)


def hold_out(intents: Sequence[str | None], measure: int, probe: int, n: int, seed: int) -> list[list[int]]:
    """The pool's rows (by their ``intents``, None where unlabelled) shuffled by ``seed``: the indices of the first
    ``measure`` labelled rows (measured), the next ``probe`` (the probe), both never trained on, and the first ``n``
    of the rest (trained on, their labels withheld)."""
    order = list(range(len(intents)))
    random.Random(seed).shuffle(order)
    labelled = [i for i in order if intents[i] is not None]
    if len(labelled) < measure + probe:
        raise IngestError(
            f"ingest.unlabeled: the pool holds {len(labelled)} labelled rows; peer_rl.measure + peer_rl.probe need "
            f"{measure + probe} (or set peer_rl.measure_from: splits)"
        )
    held = set(labelled[: measure + probe])
    return [labelled[:measure], labelled[measure : measure + probe], [i for i in order if i not in held][:n]]


@dataclass
class Inputs:
    final_agent: Path  # the last cycle's agent checkpoint: the member with no model
    members_dir: Path  # peer_members' folder: a checkpoint per member with a model, under its name
    unlabeled: pl.DataFrame  # ingest.unlabeled without the validation and test texts: id, text, intent (withheld)
    validation: pl.DataFrame  # the validation split: the probe when measure_from is splits
    test: pl.DataFrame  # the test split: measured on when measure_from is splits
    scenarios: list[Scenario]  # the train scenarios: the cohort's expert demonstrations are played on them
    object_refs: str  # agent_sft.object_refs: the demos refer to objects as DA0's did
    scratch: Path  # the trainers' scratch folder
    profile: str  # params' profile: written beside the cohort (evaluate reads it only on the same profile)


def run(inputs: Inputs, settings: PeerRewardSettings, out_dir: Path, seed: int) -> StageResult:
    """The cohort (the final agent and peer_members' members) trained on the unlabeled pool and measured before and
    after (:func:`train_and_measure`) on what :func:`deal` holds out; saved to ``out_dir/<member>`` with the cohort's
    summary beside them (what evaluate copies into `peer`)."""
    phases, warnings = Phases(), []
    models, tokenizers = load_members(settings.members, inputs.final_agent, inputs.members_dir, phases)
    measured, pool, measure, probe = deal(inputs.unlabeled, inputs.validation, inputs.test, settings, seed)
    demos = cohort_demos(inputs.scenarios, settings, models["final"], inputs.object_refs, seed, phases)
    ran = train_and_measure(models, tokenizers, pool, measure, probe, settings, inputs.scratch, seed,
                            _said_into(warnings), phases, demos=demos)  # fmt: skip
    with phases.time("save_checkpoints"):  # the members and, beside them, what evaluate copies into `peer`
        saved = {"profile": inputs.profile, **ran.cohort()}
        replace_dir(out_dir, partial(_save_all, ran.models, tokenizers, saved))
    metrics = {k: ran.diversity[k] for k in ("kappa", "c", "w")} | {"train_seconds": ran.seconds}
    children = {}
    for name, member in ran.members.items():
        figures = {k: float(member[k]) for k in ("before", "after", "collapsed")}
        children[name] = ChildRun(series=member["steps"], metrics=figures)
        metrics.update({f"{name}.{k}": value for k, value in figures.items()})
    report = {**ran.cohort(), "members": ran.members, "pairs": ran.diversity["pairs"]}
    report["probe_accuracy"] = ran.diversity["accuracy"]
    # each member's routing of each test utterance before and after, by id: the gains' intervals recompute from it
    votes = {name: {"before": before, "after": after} for name, (before, after) in ran.votes.items()}
    report["per_utterance"] = {"ids": measured["id"].to_list(), "intents": measure[1], "votes": votes}
    checkpoints = {name: out_dir / name for name in ran.members}  # each an MLflow logged model `peer_rl-<member>`
    return StageResult(
        metrics, report=report, phases=phases, checkpoints=checkpoints, children=children, warnings=warnings
    )


def load_members(
    members: dict[str, PeerMember], final_agent: Path, members_dir: Path, phases: Phases
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cohort: the final co-evolved agent (a member with no model, from ``final_agent``) and the members
    peer_members warm-started (under ``members_dir``), each with the tokenizer it was saved with (a pretrained
    member reads its own vocabulary)."""
    models, tokenizers = {}, {}
    for name, member in members.items():
        folder = final_agent if member.model is None else members_dir / name
        if not folder.is_dir():
            raise FileNotFoundError(f"peer_rl: member {name!r} has no checkpoint at {folder}: run peer_members first")
        with phases.time(f"load_{name}"):
            models[name], tokenizers[name] = load_checkpoint(folder)
    return models, tokenizers


def deal(
    unlabeled: pl.DataFrame, validation: pl.DataFrame, test: pl.DataFrame, settings: PeerRewardSettings, seed: int
) -> tuple[pl.DataFrame, Labelled, Labelled, Labelled]:
    """The rows measured on (by ``settings.measure_from``: labelled rows held out of the pool, or the ``test``
    split's first), and the pool, the measured and the probe as (texts, intents): :func:`hold_out`."""
    intents = unlabeled["intent"].to_list()
    if settings.measure_from == "pool":  # labelled rows of the pool held out: measured on what it adapts to
        measured_at, probe_at, pool_at = hold_out(intents, settings.measure, settings.probe, settings.pool, seed)
        measured, probed = unlabeled[measured_at], unlabeled[probe_at]
    else:
        pool_at = hold_out(intents, 0, 0, settings.pool, seed)[2]  # shuffled by the seed, the first `pool` trained on
        measured, probed = test.head(settings.measure), validation.head(settings.probe)
    pooled = unlabeled[pool_at]
    return measured, _labelled(pooled), _labelled(measured), _labelled(probed)


def _labelled(rows: pl.DataFrame) -> tuple[list[str], list[str]]:
    """``rows``' texts and intents."""
    return rows["text"].to_list(), rows["intent"].to_list()


def _said_into(warnings: list[str]) -> Callable[[str], None]:
    """A ``say`` that prints a warning to the stage's log (scratch/logs/peer_rl.log) and keeps it in ``warnings``."""

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)
        warnings.append(message)

    return say


def _save_all(models: dict[str, Any], tokenizers: dict[str, Any], cohort: dict[str, Any], folder: Path) -> None:
    """Each member's checkpoint under ``folder/<member>``, the cohort's summary beside them."""
    for name, model in models.items():
        save_checkpoint(model, tokenizers[name], folder / name)
    write_results(cohort, folder / COHORT)


def train_and_measure(
    models: dict[str, Any],
    tokenizers: dict[str, Any],
    pool: Labelled,
    measure: Labelled,
    probe: Labelled,
    settings: PeerRewardSettings,
    out_dir: Path,
    seed: int,
    say: Callable[[str], None] = print,
    phases: Phases | None = None,
    teacher_votes: Sequence[Any] | None = None,
    demos: Sequence[Sequence[dict[str, Any]]] = (),
) -> PeerRun:
    """Train the cohort on ``pool`` (texts, withheld intents: they only score pseudo-labels; :func:`hold_out`),
    measured on ``measure`` before and after; ``probe`` chooses the teacher when ``settings`` names none.
    ``out_dir``: the trainers' scratch folder; ``phases``: where the run's timed phases are added (a new record
    when None); ``teacher_votes``: the teacher's votes on ``pool`` when the caller has them (sampled estimate)."""
    if teacher_votes is not None and settings.estimate == "exact":
        raise ValueError("teacher_votes: the exact estimate scores the pool with the teacher's distribution")
    phases = Phases() if phases is None else phases
    with phases.time("measure_before") as counts:
        before = {k: route_intents(m, tokenizers[k], list(measure[0])) for k, m in models.items()}
        counts["episodes"] = len(measure[0]) * len(models)  # one routing per utterance and member
    with phases.time("probe"):
        probed = diversity({k: route_intents(m, tokenizers[k], list(probe[0])) for k, m in models.items()}, probe[1])
    if settings.teacher_reward and settings.teacher is None:
        settings = settings.replace(teacher=best_on_probe(probed))
    texts, gold = list(pool[0]), list(pool[1])
    if settings.reward == "cohort":
        result = train_cotrain(models, tokenizers, texts, settings, out_dir, demos=demos, gold=gold, seed=seed, say=say)
    elif settings.estimate == "exact":
        result = train_cohort_exact(models, tokenizers, texts, settings, out_dir, gold=gold, seed=seed, say=say)
    else:
        result = train_cohort(
            models, tokenizers, texts, settings, out_dir, gold=gold, seed=seed, say=say, teacher_votes=teacher_votes
        )
    # lock-step GRPO: rollouts and updates; exact: the teacher's scoring and each learner's updates
    how = settings.cotrain.loss if settings.reward == "cohort" else settings.estimate  # how the learners learned
    phases.add(f"cohort_{how}", result.seconds, episodes=result.routings)
    members, votes = {}, {}
    for name in models:
        members[name], after = _measured(result, name, tokenizers[name], before[name], measure, seed, phases)
        votes[name] = (before[name], after)
    return PeerRun(result.models, members, probed, settings, result.seconds, len(texts), len(measure[0]), votes, phases)


def _measured(
    result: Any, name: str, tokenizer: Any, before_votes: list, measure: Labelled, seed: int, phases: Phases
) -> tuple[dict[str, Any], list]:
    """One member after training: accuracy before and after with the paired interval of its gain, collapse,
    agreement with each peer and its reward."""
    with phases.time("measure_after") as counts:
        after_votes = route_intents(result.models[name], tokenizer, list(measure[0]))
        counts["episodes"] = len(measure[0])
    right = [[float(v == g) for v, g in zip(votes, measure[1], strict=True)] for votes in (before_votes, after_votes)]
    s = summarize(result.logs[name])
    return {
        "before": accuracy(before_votes, measure[1]),
        "after": accuracy(after_votes, measure[1]),
        "gain_ci": list(paired_bootstrap(right[0], right[1], seed=seed)),
        "collapsed": s["collapsed"],
        "collapse_reason": s["collapse_reason"],
        "collapsed_step": s["collapsed_step"],
        "entropy": s["entropy"],
        "agreement": {k[len("agree_") :]: v for k, v in s.items() if k.startswith("agree_")},
        "pseudo_label_acc": s.get("target_acc_all", float("nan")),
        "own_vote_acc": s.get("vote_acc_all", float("nan")),
        "reward_mean": s["reward_mean"],
        "steps": result.logs[name].steps,
    }, after_votes
