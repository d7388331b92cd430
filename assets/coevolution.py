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

from dagster import MetadataValue

from pipelines.kit.graph_shape import PARAMS_FILE, cycle_name, n_cycles
from pipelines.kit.stages import Plot, Stage, StageContext, StageOutput, stage_asset, stage_deps
from sparring.catalog import AGENT_RL, JUDGE, SCENARIOS, SIMULATORS, cycle_dir
from sparring.drivers.coevolution import run as run_cycle
from sparring.params import some_profile_plays_rl_simulator
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import fingerprint

# Each cycle's data series: the W_DA trajectory so far (dvc.yaml plots the last cycle's, the whole run's).
W_DA = Plot("cycle", "w_da", "co-evolution: W_DA (the agent's win rate in the arena) per cycle")


def cycle_stage(k: int, first: tuple[str, ...]) -> Stage:
    return Stage(
        name=cycle_name(k),
        description=f"Co-evolution cycle {k} (RL-ADA): arena → the weaker side trains with multi-turn GRPO against "
        "its frozen opponent → checkpoint, state, transcripts and per-cycle metrics.",
        params=("coevolution", "judge"),
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
# Headline numbers as Dagster metadata and in the cycle's MLflow run (every numeric metric is logged too).
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


def cycle_fingerprint(ctx: StageContext, k: int) -> dict[str, Any]:
    """What cycle k is made from: its params, its input folders' contents and its code."""
    p, data = ctx.params, ctx.catalog
    inputs = {"scenarios": data.path(SCENARIOS), "judge": data.path(JUDGE)}
    if k == 1:
        simulator = SIMULATORS[p.coevolution.simulator]  # keyed by its folder's name, as stored fingerprints are
        inputs.update({"agent_rl": data.path(AGENT_RL), Path(simulator).name: data.path(simulator)})
    else:
        inputs["previous"] = data.path(cycle_dir(k - 1))
    inputs.update({f"code:{c}": data.path(c) for c in stage_deps(STAGES[k - 1])})  # what dvc.yaml lists
    params = {"cycle": k, "seed": p.seed, "coevolution": p.coevolution.model_dump(), "judge": p.judge.model_dump()}
    return fingerprint(params, inputs)


def _numeric(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, int | float)}


def cycle_output(state: CycleState, metrics: dict[str, Any], resumed: bool, print_: dict[str, Any]) -> StageOutput:
    """The stage's metrics (every number), its report (the state it leaves) and its Dagster metadata."""
    numeric = {**_numeric(metrics), "resumed": float(resumed)}
    trained, reason = str(metrics.get("trained")), str(metrics.get("stop_reason"))
    report = {
        "trained": trained,
        "stop_reason": metrics.get("stop_reason"),
        "resumed": resumed,
        "fingerprint": print_["fingerprint"],
        "state": {
            "cycle": state.cycle,
            "agent_dir": state.agent_dir,
            "adversary_dirs": state.adversary_dirs,
            "w_da_history": state.w_da_history,
            "adv_success_history": state.adv_success_history,
            "trained_history": state.trained_history,
        },
    }
    metadata = {
        "trained": MetadataValue.text(trained),
        "stop_reason": MetadataValue.text(reason),
        "headline": MetadataValue.json({h: numeric[h] for h in HEADLINE if h in numeric}),
    }
    return StageOutput(metrics=numeric, report=report, metadata=metadata)


def make_cycle_asset(stage: Stage, k: int) -> Any:
    @stage_asset(stage)
    def _cycle(ctx: StageContext) -> StageOutput:
        p, data, cfg = ctx.params, ctx.catalog, ctx.params.coevolution
        began = time.perf_counter()
        print_ = cycle_fingerprint(ctx, k)
        phases = {"fingerprint": {"seconds": time.perf_counter() - began}}
        done = run_cycle(k, data, p.judge, cfg, print_, seed=p.seed, log=ctx.dagster.log.info)
        state, metrics = done.state, done.metrics
        phases.update(done.phases)  # a reused cycle's figures are its first run's: not this one's
        if not done.resumed and metrics.get("trained") in ("agent", "adversary"):
            ctx.log.checkpoint(data.path(cycle_dir(k)) / metrics["trained"], metrics["trained"])
        if not metrics.get("stopped"):  # the parent run's curves: W_DA, the adversary's success, who trained
            ctx.log.trajectory("coevolution.w_da", metrics["w_da"], k)
            ctx.log.trajectory("coevolution.adv_success", metrics["arena_adv_success"], k)
            ctx.log.trajectory("coevolution.agent_trained", float(metrics["trained"] == "agent"), k)
        ctx.log.json_artifact(metrics, f"cycle_{k}_metrics.json")
        output = cycle_output(state, metrics, done.resumed, print_)
        output.report["phases"] = phases
        return output

    return _cycle


# The cycle assets, in order: ASSETS[k - 1] is `cycle_k`'s (Dagster's asset key is the stage's name).
ASSETS = [make_cycle_asset(stage, k) for k, stage in enumerate(STAGES, start=1)]
