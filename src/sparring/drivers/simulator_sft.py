"""TRACER stage 1 as one run (../shared/SEEDS.md, TRACER): the simulator's training conversations (dialogues,
utterances and the expert's scripted episodes, each turn conditioned on the hidden goal), a copy drill and an
opening drill for a model from config, SFT, then its fidelity on held-out scenarios and sessions."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sparring.evaluate.fidelity import simulator_fidelity
from sparring.lm.models import build_model, count_parameters
from sparring.lm.policies import LMPolicy
from sparring.settings import ModelSpec, SimulatorSFTSettings
from sparring.timing import Phases, sft_phases
from sparring.train.tracer import scripted_episodes, simulator_conversations, train_simulator
from sparring.world.scenarios import Scenario


@dataclass
class SimulatorSFTRun:
    model: Any  # the SFT simulator
    fidelity: dict[str, float]  # on held-out scenarios and sessions (greedy)
    metrics: dict[str, Any]  # the fidelity with the training's figures
    curves: Any  # the drills' and SFT's loss curves
    sessions: list[dict[str, Any]] = field(default_factory=list)  # per replayed session, no texts (docs/runs/)
    phases: Phases = field(default_factory=Phases)


def run(
    spec: ModelSpec,
    tokenizer: Any,
    utterances: pl.DataFrame,
    dialogues: tuple[pl.DataFrame, pl.DataFrame],
    scenarios: dict[str, list[Scenario]],
    judge: tuple[Any, Any],
    cfg: SimulatorSFTSettings,
    scratch: Path,
    seed: int,
) -> SimulatorSFTRun:
    """The simulator trained on ``dialogues[0]`` (train), ``utterances`` and scripted episodes on the first
    ``cfg.scripted_episodes`` of ``scenarios["train"]``, measured on ``scenarios["heldout"]`` and ``dialogues[1]``
    (test); ``judge``: the oracle and discriminator its fidelity is scored with."""
    phases = Phases()
    train, test = dialogues
    with phases.time("scripted_episodes") as counts:
        # Ending as the persona's dialogues do, not all resolved: the simulator learns every ending (#58).
        endings_from = train if cfg.scripted_endings == "persona" else None
        episodes = scripted_episodes(scenarios["train"][: cfg.scripted_episodes], seed, dialogues=endings_from)
        counts["episodes"] = len(episodes)
    conversations = simulator_conversations(train, utterances, episodes, seed=seed, max_utterances=cfg.openings)
    with phases.time("build_model"):
        model = build_model(spec, tokenizer, seed=seed)
    # The drills are for a model from config: a pretrained one reads its goal already.
    drills = spec.name_or_path is None
    result = train_simulator(model, tokenizer, conversations, utterances, cfg, scratch, seed=seed, drills=drills)
    sft_phases(phases, result)
    policy = LMPolicy(result.model, tokenizer, role="customer", max_new_tokens=cfg.max_new_tokens, greedy=True)
    sessions: list[dict[str, Any]] = []
    with phases.time("fidelity") as counts:  # held-out episodes, replays, perplexity, judge models
        fidelity = simulator_fidelity(
            policy, scenarios["heldout"][: cfg.eval_scenarios], test, *judge,
            seed=seed, max_dialogues=cfg.eval_scenarios, sessions=sessions,
        )  # fmt: skip
        counts["episodes"] = int(fidelity.get("n_sim_episodes", 0) + fidelity.get("n_replayed", 0))
    metrics = {**fidelity, "parameters": count_parameters(result.model), "train_conversations": len(conversations)}
    metrics.update(_training_metrics(result))
    return SimulatorSFTRun(result.model, fidelity, metrics, result.curves, sessions, phases)


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
