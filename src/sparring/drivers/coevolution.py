"""One RL-ADA co-evolution cycle as one run (../shared/SEEDS.md, RL-ADA): the state the previous cycle left (DA1
and the simulator for the first), the arena, the weaker side's GRPO against its frozen opponent, the held-out
figures after it. A cycle folder made from the same inputs (its fingerprint) is reused, not trained again."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparring.catalog import AGENT_RL, JUDGE, SIMULATORS, Catalog, cycle_dir, load_judge
from sparring.params import Judge as JudgeParams
from sparring.settings import CoevolutionSettings
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import cycle_phases, is_finished, load_metrics, run_cycle_folder


@dataclass
class CycleRun:
    state: CycleState  # the state the cycle leaves (agent, adversary pool, W_DA history, stop reason)
    metrics: dict[str, Any]  # the cycle's figures (arena, training, held-out), as run_cycle wrote them
    resumed: bool  # the folder was already made from these inputs: reused, nothing ran
    phases: dict[str, dict[str, float]] = field(default_factory=dict)  # where this call's time went


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


def run(
    k: int,
    data: Catalog,
    judge: JudgeParams,
    settings: CoevolutionSettings,
    inputs: Mapping[str, Any],
    seed: int,
    log: Callable[[str], None] = lambda _: None,
) -> CycleRun:
    """Cycle ``k`` of the project ``data`` into its folder (models/cycles/cycle_k), with the judge params'
    ``judge``; ``inputs``: the cycle's fingerprint (:func:`~sparring.train.cycles.fingerprint`), which decides
    whether a finished folder is reused (then neither its scenarios nor the judge are loaded)."""
    out = data.path(cycle_dir(k))
    if is_finished(out, inputs):
        log(f"cycle {k}: {out} was made from these inputs already: reusing it")
        return CycleRun(CycleState.load(out), load_metrics(out), resumed=True)
    state, metrics = run_cycle_folder(
        previous_state(data.root, k, settings.max_cycles, settings.simulator),
        k,
        data.root,
        out,
        data.scenarios("train"),
        data.scenarios("heldout"),
        load_judge(data.path(JUDGE), judge, settings.agent_grpo.max_turns),
        settings,
        inputs,
        seed=seed,
        agent_gym=data.scenarios("gym") if settings.agent_gym == "unplayed" else None,
        arena_scenarios=data.scenarios("arena"),
        log=log,
    )
    return CycleRun(state, metrics, resumed=False, phases=cycle_phases(metrics))
