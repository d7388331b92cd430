"""TRACER stage 1 as one run (../shared/SEEDS.md, TRACER): the simulator's training conversations (dialogues,
utterances and the expert's scripted episodes, each turn conditioned on the hidden goal), a copy drill and an
opening drill for a model from config, SFT, then its fidelity on held-out scenarios and sessions, saved beside it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sparring.catalog import FIDELITY
from sparring.drivers import StageResult
from sparring.evaluate.fidelity import simulator_fidelity
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.models import build_model, count_parameters
from sparring.lm.policies import LMPolicy
from sparring.settings import ModelSpec, SimulatorSFTSettings
from sparring.timing import Phases, sft_phases
from sparring.train.tracer import scripted_episodes, simulator_conversations, train_simulator
from sparring.world.scenarios import Scenario


@dataclass
class Inputs:
    model: ModelSpec  # params' `model`: the shape the simulator is built with
    tokenizer: Any  # the tokenizer stage's
    utterances: pl.DataFrame  # the train split: openings and the utterance drill's examples
    dialogues: pl.DataFrame  # the train split's dialogues: the SFT conversations and the scripted episodes' endings
    test_dialogues: pl.DataFrame  # the test split's dialogues: the fidelity's replayed sessions
    scenarios: dict[str, list[Scenario]]  # "train" (scripted episodes are played on them) and "heldout" (measured on)
    judge: tuple[Any, Any]  # judge_models' oracle and discriminator: the fidelity is scored with them
    scratch: Path  # the trainers' output folder
    profile: str  # params' profile: written beside the fidelity (evaluate reads it only on the same profile)


def run(inputs: Inputs, settings: SimulatorSFTSettings, out_dir: Path, seed: int) -> StageResult:
    """The simulator trained on the train dialogues, utterances and scripted episodes on the first
    ``settings.scripted_episodes`` train scenarios, measured on the held-out scenarios and the test dialogues; saved
    to ``out_dir`` with its fidelity beside the weights (evaluate reads it: catalog.FIDELITY)."""
    phases, cfg, tokenizer = Phases(), settings, inputs.tokenizer
    train, test = inputs.dialogues, inputs.test_dialogues
    with phases.time("scripted_episodes") as counts:
        # Ending as the persona's dialogues do, not all resolved: the simulator learns every ending (#58).
        endings_from = train if cfg.scripted_endings == "persona" else None
        episodes = scripted_episodes(inputs.scenarios["train"][: cfg.scripted_episodes], seed, dialogues=endings_from)
        counts["episodes"] = len(episodes)
    utterances = inputs.utterances
    conversations = simulator_conversations(train, utterances, episodes, seed=seed, max_utterances=cfg.openings)
    with phases.time("build_model"):
        model = build_model(inputs.model, tokenizer, seed=seed)
    # The drills are for a model from config: a pretrained one reads its goal already.
    drills = inputs.model.name_or_path is None
    result = train_simulator(model, tokenizer, conversations, utterances, cfg, inputs.scratch, seed=seed, drills=drills)
    sft_phases(phases, result)
    policy = LMPolicy(result.model, tokenizer, role="customer", max_new_tokens=cfg.max_new_tokens, greedy=True)
    sessions: list[dict[str, Any]] = []  # per replayed session, no texts (docs/runs/)
    with phases.time("fidelity") as counts:  # held-out episodes, replays, perplexity, judge models
        fidelity = simulator_fidelity(
            policy, inputs.scenarios["heldout"][: cfg.eval_scenarios], test, *inputs.judge,
            seed=seed, max_dialogues=cfg.eval_scenarios, sessions=sessions,
        )  # fmt: skip
        counts["episodes"] = int(fidelity.get("n_sim_episodes", 0) + fidelity.get("n_replayed", 0))
    metrics = {**fidelity, "parameters": count_parameters(result.model), "train_conversations": len(conversations)}
    metrics.update(_training_metrics(result))
    with phases.time("save_checkpoint"):
        results = {FIDELITY: {"profile": inputs.profile, "sft": fidelity}}
        save_checkpoint(result.model, tokenizer, out_dir, results)
    return StageResult(
        metrics, report={"sessions": sessions}, phases=phases, checkpoints={"": out_dir}, curves=result.curves
    )


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
