"""Asset `evaluate`: DA0, DA1 (agent_rl's), every cycle's agent, the final agent and each peer-reward member
(`peer_<member>`) on held-out scenarios → reports/metrics.json, with the paired gains DA1 − DA0, final − DA0 and
final − DA1.

Opponents: the cooperative simulator (`_coop`), the scripted camouflaging customer (`_camo`) and the pool of
adversary generations (`_advpool`, with the judge's adversary reward parts). Beside the agents: the goal-knowing
expert's figures (`ceiling`), cross-play of every agent against each adversary generation, pass^k, and the
strategies found in the adversaries' messages. The file's layout is ../shared/METRICS.md's.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from dagster import AssetCheckSeverity

from pipelines.checks import report_check
from pipelines.graph_shape import LAST_CYCLE, N_CYCLES, cycle_name
from pipelines.stages import Stage, StageContext, StageOutput, stage_asset
from pipelines.timings import split_timings
from sparring.agents.scripted import ExpertAgent
from sparring.atomic import write_json
from sparring.catalog import (
    AGENT_RL,
    AGENT_SFT,
    JUDGE,
    METRICS,
    PEER_COHORT,
    PEER_RL,
    SIMULATOR_RL_FIDELITY,
    SIMULATOR_SFT_FIDELITY,
    Catalog,
    cycle_dir,
    load_judge,
)
from sparring.evaluate import checks
from sparring.evaluate.episodes import compact_episodes, gains
from sparring.evaluate.parallel import evaluate_heldout_parallel
from sparring.evaluate.strategies import discover_strategies, strategy_records
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import load_metrics

STAGE = Stage(
    name="evaluate",
    description="Held-out evaluation of DA0, each cycle's agent, the final agent and the peer cohort against the "
    "cooperative simulator, the camouflaging customer and the adversary pool → reports/metrics.json.",
    params=("evaluate", "coevolution", "judge"),
    outs=(),
    metrics=(METRICS,),
    upstream=(
        LAST_CYCLE,
        "peer_rl",
        "agent_sft",
        "agent_rl",
        "simulator_sft",
        "simulator_rl",
        "scenarios",
        "judge_models",
    ),
    headline_metrics=("final.strict_pass_coop", "final.strict_pass_advpool"),
    group="evaluation",
    kinds=("pytorch", "scikitlearn"),
)
# What the stage's MLflow run, Dagster metadata and `sparring run`'s table show per agent.
KEY_METRICS = (
    "strict_pass_coop",
    "routing_acc_coop",
    "strict_pass_coopsim",
    "strict_pass_camo",
    "routing_acc_camo",
    "strict_pass_advpool",
    "routing_acc_advpool",
    "adv_success_advpool",
)


def simulator_summary(sft: dict[str, Any] | None, rl: dict[str, Any] | None) -> dict[str, Any]:
    """metrics.json's `simulator`: both TRACER stages' fidelity on the same held-out sessions (simulator_rl measures
    both, with the ending ceiling on them), or stage 1's own figures when stage 2 has not run."""
    if rl is not None:
        return {"sft": rl["sft"], "rl": rl["rl"], "ceiling": rl.get("ceiling", {})}
    return {"sft": (sft or {}).get("sft", {})}


def _peer_summary(cohort: dict[str, Any] | None) -> dict[str, Any]:
    """METRICS.md's `peer` from peer_rl's cohort file: before/after and collapse per member, and the cohort's κ/c/w
    (the per-step logs stay in reports/peer_rl.json)."""
    return {k: v for k, v in (cohort or {}).items() if k != "profile"}


def _agents(data: Catalog, peer: dict[str, Any] | None) -> tuple[dict[str, Path], list[dict[str, Any]], CycleState]:
    """The agents to play (DA0, DA1, each cycle's that ran, the final one, each peer member), the cycles' metrics,
    and the state the last cycle left (the simulator and the adversary pool)."""
    cycles = []  # the cycles that ran (the rest recorded that co-evolution had stopped)
    agents: dict[str, Path] = {"da0": data.path(AGENT_SFT), "da1": data.path(AGENT_RL)}
    for k in range(1, N_CYCLES + 1):
        metrics = load_metrics(data.path(cycle_dir(k)))
        if metrics.get("stopped"):
            continue
        cycles.append(metrics)
        agents[cycle_name(k)] = data.path(CycleState.load(data.path(cycle_dir(k))).agent_dir)
    final = CycleState.load(data.path(cycle_dir(N_CYCLES)))
    agents["final"] = data.path(final.agent_dir)
    for member in (peer or {}).get("members", {}):
        agents[f"peer_{member}"] = data.path(PEER_RL) / member
    return agents, cycles, final


@stage_asset(STAGE)
def evaluate(ctx: StageContext) -> StageOutput:
    p, data, e = ctx.params, ctx.catalog, ctx.params.evaluate
    peer = data.results(PEER_COHORT, p.profile)
    agents, cycles, final = _agents(data, peer)
    heldout = data.scenarios("heldout", e.eval_scenarios)
    played = evaluate_heldout_parallel(
        agents,
        data.path(final.simulator_dir),
        [data.path(d) for d in final.adversary_dirs],
        heldout,
        partial(load_judge, data.path(JUDGE), p.judge, p.coevolution.agent_grpo.max_turns),
        p.coevolution,
        workers=e.workers,
        torch_threads=p.runtime.torch_threads,
        seed=p.seed,
        expert=ExpertAgent(refs=p.agent_sft.object_refs),
        cross_play_scenarios=e.cross_play_scenarios,
        pass_k=e.pass_k,
        pass_k_scenarios=e.pass_k_scenarios,
        main_only=[name for name in agents if name.startswith("peer_")],  # routers: peer_rl measures them
    )
    episodes = compact_episodes(played.episodes)
    document = _document(ctx, played, len(heldout), cycles, final, peer, gains(episodes, seed=p.seed))
    # The cycles' times go to reports/timings/evaluate.json, not metrics.json: `report` depends on metrics.json,
    # and evaluate rerun on the same inputs must leave it up to date (the run's own: reports/timings/run.json).
    document, timed = split_timings(document)
    write_json(document, data.path(METRICS))
    ctx.log.artifact(data.path(METRICS))
    results = played.agents
    headline = {f"{agent}.{m}": values[m] for agent, values in results.items() for m in KEY_METRICS if m in values}
    report = {"stop_reason": final.stopped, "phases": played.phases, "worker_phases": played.worker_phases}
    report["episodes"] = episodes  # per-episode outcomes, for paired comparisons
    report["timings"] = {"metrics_json": timed or {}}  # moved whole to the timings file (pipelines/timings.py)
    return StageOutput(metrics={**headline, "n_heldout": len(heldout), "cycles_run": len(cycles)}, report=report)


def _document(
    ctx: StageContext,
    played: Any,
    n_heldout: int,
    cycles: list,
    final: CycleState,
    peer: dict[str, Any] | None,
    paired: dict[str, Any],
) -> dict[str, Any]:
    """reports/metrics.json: the agents' figures with the ceiling, the paired gains (DA1 - DA0, final - DA0,
    final - DA1), cross-play, the adversaries' strategies, the cycles, the peer cohort, both simulators' fidelity
    and the cycles' times (split off to reports/timings/evaluate.json)."""
    p, data = ctx.params, ctx.catalog
    records = [r for g, eps in sorted(played.adversary_episodes.items()) for r in strategy_records(eps, g - 1)]
    strategies = discover_strategies(
        records, n_generations=len(played.adversary_episodes), seed=p.seed, max_clusters=p.evaluate.strategy_clusters
    )
    return {
        "profile": p.profile,
        "seed": p.seed,
        "n_heldout": n_heldout,
        "agents": played.agents,
        "ceiling": played.ceiling,
        "gains": paired,  # {"da1-da0": {"advpool": [mean, low, high], ...}, ...}: paired bootstrap 95%
        "cross_play": played.cross_play,
        "strategies": strategies,
        "cycles": cycles,
        "stop_reason": final.stopped,
        "w_da_trajectory": final.w_da_history,
        "adv_success_trajectory": final.adv_success_history,  # the arenas' adversary win rates, beside W_DA
        "trained_history": final.trained_history,
        "adversary_generations": len(final.adversary_dirs),
        "peer": _peer_summary(peer),
        "simulator": simulator_summary(
            data.results(SIMULATOR_SFT_FIDELITY, p.profile), data.results(SIMULATOR_RL_FIDELITY, p.profile)
        ),
    }


final_no_worse_than_da0 = report_check(
    "evaluate", "final_no_worse_than_da0", checks.final_no_worse_than_da0.__doc__.replace("\n", " "),
    checks.final_no_worse_than_da0, METRICS,
)  # fmt: skip
no_unauthorized_actions = report_check(
    "evaluate", "no_unauthorized_actions", checks.no_unauthorized_actions.__doc__.replace("\n", " "),
    checks.no_unauthorized_actions, METRICS, severity=AssetCheckSeverity.ERROR,
)  # fmt: skip
