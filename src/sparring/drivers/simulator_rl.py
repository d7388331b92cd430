"""TRACER stage 2 as one run (../shared/SEEDS.md, TRACER): the SFT simulator's fidelity on held-out sessions, GRPO
on replayed training sessions, the RL simulator's fidelity on the same sessions, and the ending ceiling any
simulator could reach there, each simulator played against the same DA0."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sparring.catalog import FIDELITY
from sparring.drivers import StageResult
from sparring.evaluate.ending_ceiling import simulator_ceiling
from sparring.evaluate.fidelity import better_count, simulator_fidelity
from sparring.judge.rewards import TrainedBackend
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.policies import LMPolicy
from sparring.settings import SimulatorRLSettings
from sparring.timing import Phases
from sparring.train.tracer import train_simulator_rl
from sparring.world.scenarios import Scenario


@dataclass
class SimulatorRun:
    result: Any  # train_simulator_rl's GRPOResult: the trained model, curves, steps, reward stats
    history: list[dict[str, float]]  # the reward's raw parts per step
    sft: dict[str, float]  # the SFT simulator's fidelity
    rl: dict[str, float]  # the RL simulator's, on the same sessions and scenarios
    ceiling: dict[str, float]  # the persona-rate sampler's ending fidelity (empty without ceiling draws)
    sessions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # per simulator, per replayed session
    phases: Phases = field(default_factory=Phases)

    def fidelity(self) -> dict[str, dict[str, float]]:
        """metrics.json's `simulator`: both stages' fidelity and the ceiling."""
        return {"sft": self.sft, "rl": self.rl, "ceiling": self.ceiling}

    def trajectory(self) -> list[tuple[str, float, int]]:
        """The reward's raw parts per step as the pipeline run's ``train_<part>`` at that step."""
        rows = [(row, int(row["step"])) for row in self.history]
        return [(f"train_{name}", value, step) for row, step in rows for name, value in row.items() if name != "step"]

    def metrics(self) -> dict[str, float]:
        """Both simulators' fidelity side by side, how many figures RL wins, the training's first and last step."""
        result, history = self.result, self.history
        metrics = {
            **{f"sft.{k}": v for k, v in self.sft.items()},
            **{f"rl.{k}": v for k, v in self.rl.items()},
            **{f"ceiling.{k}": v for k, v in self.ceiling.items()},
            "rl_better_on": better_count(self.sft, self.rl),  # of outcome F1, group error, trajectory distance
            "train_seconds": round(result.seconds, 2),
            "train_episodes": result.rollout_episodes,
            # the rewards TRL saw are group-normalized (mean 0 by construction): the raw parts per step say more
            "train_frac_zero_std_groups": result.reward_stats().get("frac_zero_std_groups", 0.0),
        }
        if history:
            first, last = history[0], history[-1]
            metrics.update({f"train_first_{k}": v for k, v in first.items() if k != "step"})
            metrics.update({f"train_last_{k}": v for k, v in last.items() if k != "step"})
        return metrics


@dataclass
class Inputs:
    simulator: Any  # simulator_sft's model: trained in place
    tokenizer: Any  # the tokenizer simulator_sft saved with it
    da0: Any  # agent_sft's DA0: the agent each simulator plays against (greedy)
    judge: tuple[Any, Any]  # judge_models' oracle and discriminator: the reward and the fidelity are scored with them
    dialogues: pl.DataFrame  # the train split's dialogues: the replayed training sessions
    test_dialogues: pl.DataFrame  # the test split's dialogues: the fidelity's held-out sessions
    heldout: list[Scenario]  # the first ``eval_dialogues`` held-out scenarios: the fidelity's episodes
    agent_max_new_tokens: int  # agent_sft.max_new_tokens: DA0 answers as it was trained to
    profile: str  # params' profile: written beside the fidelity (evaluate reads it only on the same profile)


def run(inputs: Inputs, settings: SimulatorRLSettings, out_dir: Path, seed: int) -> StageResult:
    """The SFT simulator trained by GRPO and measured before and after (:func:`train_and_measure`), saved to
    ``out_dir`` with both stages' fidelity and the ceiling beside the weights (evaluate's `simulator`)."""
    phases = Phases()
    ran = train_and_measure(
        inputs.simulator, inputs.tokenizer, inputs.da0, inputs.judge, (inputs.dialogues, inputs.test_dialogues),
        inputs.heldout, settings, inputs.agent_max_new_tokens, seed, phases,
    )  # fmt: skip
    with phases.time("save_checkpoint"):
        results = {FIDELITY: {"profile": inputs.profile, **ran.fidelity()}}
        save_checkpoint(ran.result.model, inputs.tokenizer, out_dir, results)
    report = {**ran.fidelity(), "train_history": ran.history, "sessions": ran.sessions, "steps": ran.result.steps}
    return StageResult(
        ran.metrics(),
        report=report,
        phases=phases,
        checkpoints={"": out_dir},
        curves=ran.result.curves,
        trajectory=ran.trajectory(),
    )


def train_and_measure(
    model: Any,
    tokenizer: Any,
    da0: Any,
    judge: tuple[Any, Any],
    dialogues: tuple[pl.DataFrame, pl.DataFrame],
    heldout: list[Scenario],
    settings: SimulatorRLSettings,
    agent_max_new_tokens: int,
    seed: int,
    phases: Phases | None = None,
) -> SimulatorRun:
    """Train ``model`` (the SFT simulator, in place) on ``dialogues[0]`` (train), measured before and after on
    ``settings.eval_dialogues`` of ``dialogues[1]`` (test) and of ``heldout`` against DA0 (``da0``, greedy);
    ``judge``: the oracle and discriminator. ``phases``: where the timed phases are added."""
    phases = Phases() if phases is None else phases
    measure = _measure(tokenizer, da0, judge, dialogues[1], heldout, settings, agent_max_new_tokens, seed)
    sessions: dict[str, list[dict[str, Any]]] = {"sft": [], "rl": []}  # per replayed session, no texts
    with phases.time("fidelity_sft") as counts:  # before training: GRPO trains these weights in place
        sft = measure(model, sessions["sft"])
        counts["episodes"] = int(sft.get("n_sim_episodes", 0) + sft.get("n_replayed", 0))
    from sparring.judge.oracle import embed  # deferred: loads the MiniLM encoder

    with phases.time("grpo") as counts:
        result, history = train_simulator_rl(
            model, tokenizer, dialogues[0], settings, embedder=embed, judge=TrainedBackend(*judge), seed=seed
        )
        counts["episodes"] = result.rollout_episodes
    with phases.time("fidelity_rl") as counts:
        rl = measure(result.model, sessions["rl"])
        counts["episodes"] = int(rl.get("n_sim_episodes", 0) + rl.get("n_replayed", 0))
    ceiling: dict[str, float] = {}
    if settings.ceiling_draws:
        with phases.time("ceiling") as counts:
            test = dialogues[1].head(settings.eval_dialogues)
            counts["episodes"] = settings.ceiling_draws * len(test)
            ceiling = simulator_ceiling(dialogues[0], test, settings.ceiling_draws, seed)
    return SimulatorRun(result, history, sft, rl, ceiling, sessions, phases)


def _measure(
    tokenizer: Any,
    da0: Any,
    judge: tuple[Any, Any],
    test: pl.DataFrame,
    heldout: list[Scenario],
    settings: SimulatorRLSettings,
    agent_max_new_tokens: int,
    seed: int,
) -> Callable[[Any, list[dict[str, Any]]], dict[str, float]]:
    """A simulator's fidelity, every simulator measured alike (:func:`measured_policy`)."""

    def measure(model: Any, sessions: list[dict[str, Any]]) -> dict[str, float]:
        agent = LMPolicy(da0, tokenizer, role="agent", max_new_tokens=agent_max_new_tokens, greedy=True)
        return simulator_fidelity(
            measured_policy(model, tokenizer, settings),
            heldout,
            test,
            *judge,
            seed=seed,
            max_dialogues=settings.eval_dialogues,
            agent_under_test=agent,
            sessions=sessions,
        )

    return measure


def measured_policy(model: Any, tokenizer: Any, settings: SimulatorRLSettings) -> LMPolicy:
    """A simulator as its fidelity is measured: sampled at ``eval_temperature``, not greedy, since a simulator stands
    for a population of customers and greedy decoding would give every context one ending, so no persona's ending
    rates could match the real ones."""
    t = settings.eval_temperature
    return LMPolicy(
        model, tokenizer, role="customer", max_new_tokens=settings.max_new_tokens, temperature=t or 1.0, greedy=t == 0
    )
