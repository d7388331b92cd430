"""RL-ADA's bootstrap as one run (../shared/SEEDS.md, RL-ADA): self-training on DA0's verified successes when
asked, the start played on the validation scenarios, multi-turn GRPO on the gym against the simulator, validation
every K steps, DA1 kept by `agent_rl.keep`; the result holds the validation figures of the start and DA1 side by
side and where the GRPO time went."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sparring.agents.scripted import expert_agent
from sparring.drivers import StageResult
from sparring.params import RewardWeights
from sparring.settings import AgentRLSettings, AgentSFTSettings, CoevolutionSettings
from sparring.timing import Phases
from sparring.train.agent_rl import AgentRLResult, clear_scratch, train_agent_rl
from sparring.train.self_training import Teacher
from sparring.world.scenarios import Scenario

if TYPE_CHECKING:
    import polars as pl

REPLY_DEMOS = 50  # demonstrations whose commonest first reply answers a rehearsed opening (as agent_sft's)


@dataclass
class Inputs:
    da0: Path  # agent_sft's checkpoint: DA0, where GRPO starts
    simulator: Path  # the simulator `coevolution.simulator` names: the first adversary and the cooperative customer
    gym: list[Scenario]  # the unplayed gym: GRPO's scenarios when `agent_rl.gym: unplayed`
    train: list[Scenario]  # the train set: GRPO's scenarios when `agent_rl.gym: train`, and the demos' (mix_demos)
    validation: list[Scenario]  # played every `agent_rl.eval_every` steps: DA1 is chosen on them
    heldout: list[Scenario]  # never sampled by self-training
    utterances: pl.DataFrame  # agent_sft's train split: `self_training.intent_rehearsal` replays its exchanges
    coevolution: CoevolutionSettings  # params' coevolution: the agent's GRPO gym and the opponents, as the cycles'
    reward: RewardWeights  # params' judge.reward: the agent's reward from the world
    agent_sft: AgentSFTSettings  # params' agent_sft: how DA0's demonstrations were played (prompt, object refs)
    scratch: Path  # the trainer's folder, where a killed run resumes; removed once DA1 is in place


def run(inputs: Inputs, settings: AgentRLSettings, out_dir: Path, seed: int) -> StageResult:
    """DA0 -> DA1 in ``out_dir`` (:func:`~sparring.train.agent_rl.train_agent_rl`, training in ``inputs.scratch``,
    removed after), with the validation figures of DA0 and DA1 side by side and where the time went."""
    gym = inputs.gym if settings.gym == "unplayed" else inputs.train
    result = train_agent_rl(
        inputs.da0, inputs.simulator, gym, inputs.validation, inputs.coevolution, settings, inputs.reward, out_dir,
        inputs.scratch, seed=seed, teacher=teacher(inputs.agent_sft, inputs.train, inputs.utterances, inputs.heldout,
        seed), demos=_demos(inputs.agent_sft, inputs.train, seed),
    )  # fmt: skip
    clear_scratch(inputs.scratch)
    curve = result.curve  # the validation figures by step: the report's and, as `val_*`, the tracker's
    report = {"curve": curve, "chosen_step": result.step, "signals": result.grpo.steps if result.grpo else [],
              "self_training": result.self_training}  # fmt: skip
    return StageResult(
        _metrics(result),
        report=report,
        phases=_phases(result),
        checkpoints={"": out_dir},
        series=[{**{f"val_{k}": v for k, v in row.items() if k != "step"}, "step": row["step"]} for row in curve],
    )


def teacher(
    agent_sft: AgentSFTSettings, train: list[Scenario], utterances: pl.DataFrame, heldout: list[Scenario], seed: int
) -> Teacher:
    """What self-training reads (agent_rl's and the cycles' agent gym): the expert that wrote DA0's demonstrations,
    agent_sft's rehearsal from its ``utterances`` and demonstrations on ``train``, the ``heldout`` ids."""
    expert = expert_agent(refs=agent_sft.object_refs)
    return Teacher(expert, _rehearsal(agent_sft, train, utterances, seed), [s.scenario_id for s in heldout])


def _demos(agent_sft: AgentSFTSettings, train: list[Scenario], seed: int) -> Callable[[int], list]:
    """The expert's first ``n`` demonstrations on the train set, played as agent_sft played DA0's."""

    def demos(n: int) -> list:
        from sparring.lm.chat import AGENT_SYSTEM_PROMPT
        from sparring.train.demos import expert_demonstrations

        system = AGENT_SYSTEM_PROMPT if agent_sft.system_prompt else ""
        return expert_demonstrations(list(train)[:n], seed, refs=agent_sft.object_refs, agent_system=system)

    return demos


def _rehearsal(
    agent_sft: AgentSFTSettings, train: list[Scenario], utterances: pl.DataFrame, seed: int
) -> Callable[[int, int], list]:
    """``n`` of agent_sft's utterance -> intent exchanges and first replies for round ``draw``, from a pool built
    once."""

    @cache
    def pool() -> tuple[list, list]:
        from sparring.lm.chat import AGENT_SYSTEM_PROMPT
        from sparring.train.demos import intent_examples

        system = AGENT_SYSTEM_PROMPT if agent_sft.system_prompt else None
        texts, intents = utterances["text"].to_list(), utterances["intent"].to_list()
        return intent_examples(texts, intents, system), _demos(agent_sft, train, seed)(REPLY_DEMOS)

    def rehearsal(n: int, draw: int) -> list:
        from sparring.train.demos import rehearsal

        return rehearsal(*pool(), n, draw)

    return rehearsal


def _metrics(result: AgentRLResult) -> dict[str, float]:
    """Validation of DA0, of the start of GRPO when self-training made one (``_self_trained``), and of the kept step
    (DA1), with what the GRPO cost and earned."""
    start = next(row for row in result.curve if row["step"] == 0)
    chosen = next(row for row in result.curve if row["step"] == result.step)
    metrics = {
        "chosen_step": float(result.step),
        "resumed_from": float(result.resumed_from),
        "train_seconds": round(result.seconds, 2),
        **{
            f"self_training_{k}_round{row['round']}": float(v)
            for row in result.self_training
            for k, v in row.items()
            if k != "round"
        },
        **{f"val_{k}_da0": float(v) for k, v in (result.da0 or start).items() if k != "step"},
        **{f"val_{k}_self_trained": float(v) for k, v in start.items() if k != "step" and result.da0 is not None},
        **{f"val_{k}_da1": float(v) for k, v in chosen.items() if k != "step"},
    }
    if result.grpo is not None:
        g = result.grpo
        metrics.update(
            grpo_seconds=g.seconds,
            grpo_rollout_seconds=g.rollout_seconds,
            grpo_rollout_episodes=float(g.rollout_episodes),
            **{f"grpo_{k}": v for k, v in g.reward_stats().items()},
        )
    return metrics


def _phases(result: AgentRLResult) -> Phases:
    """Where agent_rl's time went (main_job_profile reads it): self-training's sampling (episodes, the expert's
    corrections) and fine-tuning, then GRPO's rollouts (episodes and the judge) and its updates with the validation
    plays the trainer's callback runs between them."""
    phases = Phases()
    for row in result.self_training:
        phases.add("self_training_sampling", row["sample_seconds"], episodes=row["episodes"])
        phases.add("self_training_sft", row.get("sft_seconds", 0.0))
    if result.grpo is not None:
        g = result.grpo
        phases.add("grpo_rollouts", g.rollout_seconds, episodes=g.rollout_episodes)
        phases.add("grpo_updates_and_validation", g.update_seconds, tokens=g.update_tokens)
    return phases
