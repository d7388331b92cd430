"""Assets `cycle_1` … `cycle_N`: RL-ADA co-evolution, one asset and one DVC stage per cycle.

Dagster rejects a static partition that depends on its own previous partition, so each cycle is its own asset
(mirroring a DVC `foreach` over cycles), each reading the previous cycle's folder. N is the largest
`coevolution.max_cycles` over the profiles in params.yaml, so the graph and dvc.yaml are the same whatever the
profile; cycles past the active profile's budget (or after the stop rule fired) record that they stopped, copy
the state forward and train nothing. Likewise cycle_1 waits for `simulator_rl` only when some profile's cycles play
the RL simulator (`coevolution.simulator: rl`); otherwise it trains beside them and only evaluate waits for it.

Resuming: `dvc repro` skips finished cycles through dvc.lock. `sparring run` rematerializes every asset, so a
cycle skips itself when its folder holds `inputs.json` with the same fingerprint (params, input folders'
contents, the cycle code): after a crash in cycle k, a rerun reuses cycles 1..k-1 and resumes at cycle k.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sparring.catalog import AGENT_RL, JUDGE, SCENARIOS, SIMULATORS, cycle_dir
from sparring.drivers import StageResult
from sparring.drivers.agent_rl import teacher
from sparring.drivers.coevolution import Inputs, run
from sparring.params import some_profile_plays_rl_simulator
from sparring.train.cycles import fingerprint
from stagekit.graph_shape import PARAMS_FILE, cycle_name, n_cycles
from stagekit.stages import Plot, Stage, StageContext, stage_asset, stage_deps

# Each cycle's data series: the W_DA trajectory so far (dvc.yaml plots the last cycle's, the whole run's).
W_DA = Plot("cycle", "w_da", "co-evolution: W_DA (the agent's win rate in the arena) per cycle")


def cycle_stage(k: int, first: tuple[str, ...]) -> Stage:
    """Cycle k's declaration; ``first``: cycle 1's upstream stages (a later cycle waits for the one before)."""
    return Stage(
        name=cycle_name(k),
        description=f"Co-evolution cycle {k} (RL-ADA): arena → the side behind trains against its frozen opponents "
        "(the adversary with multi-turn GRPO, the agent by coevolution.agent_recipe: GRPO or self-training with the "
        "expert's corrections) → checkpoint, state, transcripts and per-cycle metrics.",
        params=("coevolution", "judge", "agent_sft"),  # agent_sft: the expert that corrects a self-training gym
        outs=(cycle_dir(k),),
        upstream=first if k == 1 else (cycle_name(k - 1),),
        headline_metrics=("w_da",),
        series=W_DA,
        group="coevolution",
        kinds=("pytorch", "mlflow"),
    )


def cycle_stages(params_file: Path = PARAMS_FILE) -> list[Stage]:
    """cycle_1 ... cycle_N as params_file's profiles make them, each profile read once: N is the largest
    `coevolution.max_cycles`, and cycle_1 waits for `simulator_rl` only when some profile's cycles play it
    (`coevolution.simulator: rl`), so the graph is one whatever the active profile."""
    cycles = n_cycles(params_file)
    plays_rl = some_profile_plays_rl_simulator(params_file)
    first = ("scenarios", "judge_models", "simulator_sft", *(("simulator_rl",) * plays_rl), "agent_rl")
    return [cycle_stage(k, first) for k in range(1, cycles + 1)]


STAGES = cycle_stages()  # by name in `stage.name`


def cycle_fingerprint(ctx: StageContext, k: int) -> tuple[dict[str, Any], float]:
    """What cycle k is made from (its params, its input folders' contents and its code), and the seconds that
    took."""
    began = time.perf_counter()
    p, data = ctx.params, ctx.catalog
    inputs = {"scenarios": data.path(SCENARIOS), "judge": data.path(JUDGE)}
    if k == 1:
        simulator = SIMULATORS[p.coevolution.simulator]  # keyed by its folder's name, as stored fingerprints are
        inputs.update({"agent_rl": data.path(AGENT_RL), Path(simulator).name: data.path(simulator)})
    else:
        inputs["previous"] = data.path(cycle_dir(k - 1))
    inputs.update({f"code:{c}": data.path(c) for c in stage_deps(STAGES[k - 1])})  # what dvc.yaml lists
    params = {"cycle": k, "seed": p.seed, "coevolution": p.coevolution.model_dump(), "judge": p.judge.model_dump()}
    if p.coevolution.agent_recipe == "self_training":  # what the expert's corrections and the rehearsal read
        params["agent_sft"] = p.agent_sft.model_dump()
    return fingerprint(params, inputs), time.perf_counter() - began


def make_cycle_asset(stage: Stage, k: int) -> Any:
    """Cycle k's asset: its fingerprint and input folders resolved here, the cycle run (or reused) by its driver."""

    @stage_asset(stage)
    def _cycle(ctx: StageContext) -> StageResult:
        data, p = ctx.catalog, ctx.params
        made_from, seconds = cycle_fingerprint(ctx, k)
        inputs = Inputs(
            cycle=k,
            root=data.root,
            scenarios=data.path(SCENARIOS),
            judge=data.path(JUDGE),
            judge_settings=p.judge,
            fingerprint=made_from,
            fingerprint_seconds=seconds,
            teacher=lambda: teacher(p.agent_sft, data.scenarios("train"), data.utterances("train"),
                                    data.scenarios("heldout"), p.seed),
        )  # fmt: skip
        return run(inputs, p.coevolution, data.path(cycle_dir(k)), p.seed)

    return _cycle


# The cycle assets, in order: ASSETS[k - 1] is `cycle_k`'s (Dagster's asset key is the stage's name).
ASSETS = [make_cycle_asset(stage, k) for k, stage in enumerate(STAGES, start=1)]
