"""The held-out evaluation as one run (../shared/METRICS.md): DA0, DA1, each cycle's agent and the final agent played
on held-out scenarios against the cooperative simulator (`_coop`, `_coopsim`), the scripted camouflaging customer
(`_camo`), the frozen reference opponent (`_ref`: adversary generation 0) and the pool of every adversary generation
(`_advpool`), each sampled opponent over ``evaluate.draws`` customer draws shared by all agents, beside the
goal-knowing expert's ceiling, with the paired gains DA1 − DA0, final − DA0 and final − DA1 (intervals over
scenarios and draws), cross-play, pass^k, the adversaries' strategies, the cycles, the peer cohort (its routing, as
peer_rl measured it: the routers play no episodes here) and both simulators' fidelity: metrics.json's document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparring.agents.scripted import ExpertAgent
from sparring.catalog import (
    AGENT_RL,
    AGENT_SFT,
    PEER_COHORT,
    PEER_RL,
    SIMULATOR_RL_FIDELITY,
    SIMULATOR_SFT_FIDELITY,
    Catalog,
    cycle_dir,
)
from sparring.evaluate.episodes import compact_episodes, gains
from sparring.evaluate.parallel import evaluate_heldout_parallel
from sparring.evaluate.strategies import discover_strategies, strategy_records
from sparring.judge import Scorer
from sparring.lm.checkpoints import same_checkpoint
from sparring.params import Evaluate
from sparring.settings import CoevolutionSettings
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import load_metrics


@dataclass
class HeldoutRun:
    document: dict[str, Any]  # metrics.json's (with the cycles' times, which the pipeline files apart)
    episodes: list[dict[str, Any]]  # per-episode outcomes (ids and figures, no texts), for paired comparisons
    phases: dict[str, Any]  # where the play's time went, and each worker's
    worker_phases: list[dict[str, Any]]


def run(
    data: Catalog,
    e: Evaluate,
    co: CoevolutionSettings,
    judge: Callable[[], Scorer],
    expert: ExpertAgent,
    n_cycles: int,
    *,
    profile: str,
    seed: int,
    torch_threads: int = 1,
) -> HeldoutRun:
    """Every agent of the project at ``data`` played on ``e.eval_scenarios`` held-out scenarios (``judge``: builds
    the judge in each worker; ``expert``: the goal-knowing ceiling); ``n_cycles``: the cycle folders the graph made
    (those that recorded a stop are skipped); ``profile``: the one whose results are read and recorded."""
    peer = data.results(PEER_COHORT, profile)
    agents, cycles, final = _agents(data, n_cycles)
    heldout = data.scenarios("heldout", e.eval_scenarios)
    played = evaluate_heldout_parallel(
        agents,
        data.path(final.simulator_dir),
        [data.path(d) for d in final.adversary_dirs],
        heldout,
        judge,
        co,
        workers=e.workers,
        torch_threads=torch_threads,
        seed=seed,
        draws=range(e.draws),
        expert=expert,
        opponents=e.opponents,
        expert_draws=e.expert_draws,
    )
    episodes = compact_episodes(played.episodes)
    records = [r for g, eps in sorted(played.adversary_episodes.items()) for r in strategy_records(eps, g - 1)]
    strategies = discover_strategies(
        records, n_generations=len(played.adversary_episodes), seed=seed, max_clusters=e.strategy_clusters
    )
    document = {
        "profile": profile,
        "seed": seed,
        "n_heldout": len(heldout),
        "draws": e.draws,  # per scenario against each sampled opponent (greedy ones: 1)
        "agents": played.agents,
        "ceiling": played.ceiling,
        "gains": gains(episodes, seed=seed),  # {"da1-da0": {"ref": [mean, low, high], "advpool": ...}, ...}
        "cross_play": played.cross_play,
        "strategies": strategies,
        "cycles": cycles,
        "stop_reason": final.stopped,
        "w_da_trajectory": final.w_da_history,
        "adv_success_trajectory": final.adv_success_history,  # the arenas' adversary win rates, beside W_DA
        "trained_history": final.trained_history,
        "adversary_generations": len(final.adversary_dirs),
        "peer": {k: v for k, v in (peer or {}).items() if k != "profile"},  # per-step logs stay in peer_rl's report
        "simulator": simulator_summary(
            data.results(SIMULATOR_SFT_FIDELITY, profile), data.results(SIMULATOR_RL_FIDELITY, profile)
        ),
    }
    return HeldoutRun(document, episodes, played.phases, played.worker_phases)


def simulator_summary(sft: dict[str, Any] | None, rl: dict[str, Any] | None) -> dict[str, Any]:
    """metrics.json's `simulator`: both TRACER stages' fidelity on the same held-out sessions (simulator_rl measures
    both, with the ending ceiling on them), or stage 1's own figures when stage 2 has not run."""
    if rl is not None:
        return {"sft": rl["sft"], "rl": rl["rl"], "ceiling": rl.get("ceiling", {})}
    return {"sft": (sft or {}).get("sft", {})}


def _agents(data: Catalog, n_cycles: int) -> tuple[dict[str, Path], list[dict[str, Any]], CycleState]:
    """The agents to play (DA0, DA1, each cycle's that ran, the final one), the cycles' metrics, and the state the
    last cycle left (the simulator and the adversary pool)."""
    cycles = []  # the cycles that ran (the rest recorded that co-evolution had stopped)
    agents: dict[str, Path] = {"da0": data.path(AGENT_SFT), "da1": data.path(AGENT_RL)}
    for k in range(1, n_cycles + 1):
        metrics = load_metrics(data.path(cycle_dir(k)))
        if metrics.get("stopped"):
            continue
        cycles.append(metrics)
        agents[f"cycle_{k}"] = data.path(CycleState.load(data.path(cycle_dir(k))).agent_dir)
    final = CycleState.load(data.path(cycle_dir(n_cycles)))
    agents["final"] = data.path(final.agent_dir)
    adapted = data.path(PEER_RL) / "final"  # the final agent after peer_rl's label-free adaptation, if it trained
    if adapted.is_dir() and not same_checkpoint(adapted, agents["final"]):
        agents["peer_final"] = adapted
    return agents, cycles, final
