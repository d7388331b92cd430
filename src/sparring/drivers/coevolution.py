"""One RL-ADA co-evolution cycle as one run (../shared/SEEDS.md, RL-ADA): the state the previous cycle left (DA1
and the simulator for the first), the arena, the weaker side's GRPO against its frozen opponent, the held-out
figures after it. A cycle folder made from the same inputs (its fingerprint) is reused, not trained again.

Its progress lines (a reused or stopped cycle, the arena, who trained) are INFO records of the ``sparring.progress``
logger, as the trainers' are: the pipeline shows them in the terminal, the stage's log and Dagster's run log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparring.catalog import AGENT_RL, SIMULATORS, cycle_dir, load_judge, scenario_file
from sparring.drivers import StageResult
from sparring.params import Judge as JudgeParams
from sparring.progress import LOGGER
from sparring.settings import CoevolutionSettings
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import cycle_phases, is_finished, load_metrics, run_cycle_folder
from sparring.train.self_training import Teacher
from sparring.world.scenarios import Scenario, load_scenarios

# Headline numbers the Dagster UI shows beside the metrics (every numeric figure is a metric too).
HEADLINE = (
    "w_da",
    "arena_adv_success",
    "strict_pass_coop",
    "strict_pass_adv",
    "strict_pass_advpool",
    "routing_acc_coop",
    "adv_success",
    "adv_faithfulness",
    "adv_realism",
    "grpo_tokens_per_s",
)


@dataclass
class Inputs:
    cycle: int  # k: cycle 1 starts from DA1 and the simulator, a later one from cycle k-1's folder
    root: Path  # the project root: a cycle's state names its checkpoints relative to it (DA1's, cycle k-1's)
    scenarios: Path  # the scenarios stage's folder: its train, heldout, arena (and gym) sets, read if the cycle runs
    judge: Path  # the judge_models stage's folder: the judge is loaded from it if the cycle runs
    judge_settings: JudgeParams  # params' judge: its backend and reward weights
    fingerprint: dict[str, Any]  # what the cycle is made from (params, input folders, code): decides reuse
    fingerprint_seconds: float  # the time computing it took: the report's first phase
    teacher: Callable[[], Teacher] | None = None  # the agent's self-training gym's expert and rehearsal, made if asked


@dataclass
class _Cycle:
    state: CycleState  # the state the cycle leaves (agent, adversary pool, W_DA history, stop reason)
    metrics: dict[str, Any]  # the cycle's figures (arena, training, held-out), as run_cycle wrote them
    resumed: bool  # the folder was already made from these inputs: reused, nothing ran
    phases: dict[str, dict[str, float]]  # where this call's time went (none for a reused cycle)


def previous_state(root: Path, k: int, max_cycles: int, simulator: str = "sft") -> CycleState:
    """The state cycle k starts from: DA1 (agent_rl's) and the simulator (``coevolution.simulator``'s) for cycle
    1, else cycle k-1's folder; a state past ``max_cycles`` (a profile with fewer cycles than the graph) is
    marked stopped."""
    if k == 1:
        previous = CycleState(agent_dir=AGENT_RL, simulator_dir=SIMULATORS[simulator])
    else:
        previous = CycleState.load(root / cycle_dir(k - 1))
    if not previous.stopped and previous.cycle >= max_cycles:
        previous.stopped = "max_cycles"
    return previous


def run(inputs: Inputs, settings: CoevolutionSettings, out_dir: Path, seed: int) -> StageResult:
    """Cycle ``inputs.cycle`` into ``out_dir`` (models/cycles/cycle_k), or that folder reused when its fingerprint
    is ``inputs.fingerprint`` (then neither the scenarios nor the judge are loaded); its figures, the state it leaves,
    and what the tracker keeps."""
    if is_finished(out_dir, inputs.fingerprint):
        LOGGER.info(f"cycle {inputs.cycle}: {out_dir} was made from these inputs already: reusing it")
        done = _Cycle(CycleState.load(out_dir), load_metrics(out_dir), resumed=True, phases={})
    else:
        state, metrics = _run_cycle(inputs, settings, out_dir, seed)
        done = _Cycle(state, metrics, resumed=False, phases=cycle_phases(metrics))
    return _result(inputs, done, out_dir)


def _run_cycle(
    inputs: Inputs, settings: CoevolutionSettings, out_dir: Path, seed: int
) -> tuple[CycleState, dict[str, Any]]:
    """The cycle run into ``out_dir`` atomically (:func:`~sparring.train.cycles.run_cycle_folder`): its state and
    figures."""

    def scenarios(name: str) -> list[Scenario]:
        return load_scenarios(scenario_file(inputs.scenarios, name))

    k = inputs.cycle
    return run_cycle_folder(
        previous_state(inputs.root, k, settings.max_cycles, settings.simulator),
        k,
        inputs.root,
        out_dir,
        scenarios("train"),
        scenarios("heldout"),
        load_judge(inputs.judge, inputs.judge_settings, settings.agent_grpo.max_turns),
        settings,
        inputs.fingerprint,
        seed=seed,
        agent_gym=scenarios("gym") if settings.agent_gym == "unplayed" else None,
        arena_scenarios=scenarios("arena"),
        teacher=inputs.teacher() if inputs.teacher and settings.agent_recipe == "self_training" else None,
        log=LOGGER.info,
    )


def _numeric(metrics: dict[str, Any]) -> dict[str, float]:
    """The figures that are numbers, as floats."""
    return {k: float(v) for k, v in metrics.items() if isinstance(v, int | float)}


def _result(inputs: Inputs, done: _Cycle, out_dir: Path) -> StageResult:
    """The stage's metrics (every number), its report (the state it leaves), the checkpoint it trained, the parent
    run's curves (W_DA, the adversary's success, who trained), its figures as an artifact, and the UI's headline."""
    state, metrics, k = done.state, done.metrics, inputs.cycle
    numeric = {**_numeric(metrics), "resumed": float(done.resumed)}
    trained, reason = str(metrics.get("trained")), str(metrics.get("stop_reason"))
    report = {
        "trained": trained,
        "stop_reason": metrics.get("stop_reason"),
        "resumed": done.resumed,
        "fingerprint": inputs.fingerprint["fingerprint"],
        "state": {
            "cycle": state.cycle,
            "agent_dir": state.agent_dir,
            "adversary_dirs": state.adversary_dirs,
            "w_da_history": state.w_da_history,
            "adv_success_history": state.adv_success_history,
            "trained_history": state.trained_history,
        },
        # a reused cycle's figures are its first run's: its phases are not this one's
        "phases": {"fingerprint": {"seconds": inputs.fingerprint_seconds}, **done.phases},
    }
    fresh = not done.resumed and metrics.get("trained") in ("agent", "adversary")
    return StageResult(
        numeric,
        report=report,
        checkpoints={metrics["trained"]: out_dir / metrics["trained"]} if fresh else {},
        trajectory=_trajectory(metrics, k),
        json_artifacts={f"cycle_{k}_metrics.json": metrics},
        shown={
            "trained": trained,
            "stop_reason": reason,
            "headline": {h: numeric[h] for h in HEADLINE if h in numeric},
        },
    )


def _trajectory(metrics: dict[str, Any], k: int) -> list[tuple[str, float, int]]:
    """Cycle k's points on the parent run's curves: W_DA, the adversary's arena success, whether the agent trained
    (none for a cycle that recorded a stop: it played nothing)."""
    if metrics.get("stopped"):
        return []
    return [
        ("coevolution.w_da", metrics["w_da"], k),
        ("coevolution.adv_success", metrics["arena_adv_success"], k),
        ("coevolution.agent_trained", float(metrics["trained"] == "agent"), k),
    ]
