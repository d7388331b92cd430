"""RL-ADA's bootstrap as one run (../shared/SEEDS.md, RL-ADA): self-training on DA0's verified successes when
asked, the start played on the validation scenarios, multi-turn GRPO on the gym against the simulator, validation
every K steps, DA1 kept by `agent_rl.keep`; the result holds the validation figures of the start and DA1 side by
side and where the GRPO time went."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparring.agents.scripted import ExpertAgent
from sparring.settings import AgentRLSettings, AgentSFTSettings, CoevolutionSettings
from sparring.timing import Phases
from sparring.train.agent_rl import AgentRLResult, clear_scratch, train_agent_rl
from sparring.world.scenarios import Scenario

if TYPE_CHECKING:
    import polars as pl

REPLY_DEMOS = 50  # demonstrations whose commonest first reply answers a rehearsed opening (as agent_sft's)


@dataclass
class AgentRLRun:
    result: AgentRLResult  # the trainer's: the validation curve, DA1's step, the GRPO result
    metrics: dict[str, float]  # DA0's and DA1's validation figures, the chosen step, the GRPO's reward and cost
    phases: Phases  # rollouts, then the updates with the validation plays between them


def run(
    da0_dir: Path,
    simulator_dir: Path,
    gym: Sequence[Scenario],
    validation: Sequence[Scenario],
    co: CoevolutionSettings,
    rl: AgentRLSettings,
    reward: Any,
    out_dir: Path,
    scratch: Path,
    seed: int,
    heldout: Sequence[Scenario] = (),
    demo_scenarios: Sequence[Scenario] = (),
    agent_sft: AgentSFTSettings | None = None,
    utterances: pl.DataFrame | None = None,
) -> AgentRLRun:
    """:func:`~sparring.train.agent_rl.train_agent_rl` (DA0 -> DA1 in ``out_dir``, training in ``scratch``, where a
    killed run resumes), then ``scratch`` removed once DA1 is in place, and the figures measured around it.
    ``heldout``: never sampled by self-training; ``demo_scenarios`` and ``agent_sft``: where and how the expert's
    demonstrations are played for ``self_training.mix_demos`` (as agent_sft played DA0's); ``utterances``:
    agent_sft's train split, whose utterance -> intent exchanges ``self_training.intent_rehearsal`` replays."""

    def demos(n: int) -> list:
        from sparring.lm.chat import AGENT_SYSTEM_PROMPT
        from sparring.train.demos import expert_demonstrations

        cfg = agent_sft or AgentSFTSettings()
        system = AGENT_SYSTEM_PROMPT if cfg.system_prompt else ""
        return expert_demonstrations(list(demo_scenarios)[:n], seed, refs=cfg.object_refs, agent_system=system)

    @cache
    def rehearsal_pool() -> tuple[list, list]:  # built once, sampled each round
        from sparring.lm.chat import AGENT_SYSTEM_PROMPT
        from sparring.train.demos import intent_examples

        system = AGENT_SYSTEM_PROMPT if (agent_sft or AgentSFTSettings()).system_prompt else None
        return intent_examples(utterances["text"].to_list(), utterances["intent"].to_list(), system), demos(REPLY_DEMOS)

    def rehearsal(n: int, draw: int) -> list:
        from sparring.train.demos import rehearsal

        return rehearsal(*rehearsal_pool(), n, draw)

    expert = ExpertAgent(refs=(agent_sft or AgentSFTSettings()).object_refs)  # the one that wrote DA0's demos
    result = train_agent_rl(
        da0_dir, simulator_dir, gym, validation, co, rl, reward, out_dir, scratch, seed=seed,
        forbidden=[s.scenario_id for s in heldout], demos=demos, expert=expert,
        rehearsal=rehearsal if utterances is not None else None,
    )  # fmt: skip
    clear_scratch(scratch)
    return AgentRLRun(result, _metrics(result), _phases(result))


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
