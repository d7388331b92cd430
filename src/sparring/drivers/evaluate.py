"""The held-out evaluation as one run (../shared/METRICS.md): DA0, DA1, each cycle's agent and the final agent played
on held-out scenarios against the cooperative simulator (`_coop`, `_coopsim`), the scripted camouflaging customer
(`_camo`), the frozen reference opponent (`_ref`: adversary generation 0) and the pool of every adversary generation
(`_advpool`), each sampled opponent over ``evaluate.draws`` customer draws shared by all agents, beside the
goal-knowing expert's ceiling, with the paired gains DA1 − DA0, final − DA0 and final − DA1 (intervals over
scenarios and draws), cross-play, pass^k, the adversaries' strategies, the cycles, the peer cohort (its routing, as
peer_rl measured it: the routers play no episodes here) and both simulators' fidelity: metrics.json's document."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sparring.agents.scripted import expert_agent
from sparring.atomic import write_json
from sparring.catalog import METRICS, REPORTS, load_judge
from sparring.drivers import StageResult
from sparring.evaluate.episodes import compact_episodes, gains
from sparring.evaluate.parallel import evaluate_heldout_parallel
from sparring.evaluate.strategies import discover_strategies, strategy_records
from sparring.lm.checkpoints import same_checkpoint
from sparring.params import Evaluate
from sparring.params import Judge as JudgeParams
from sparring.settings import AgentSFTSettings, CoevolutionSettings
from sparring.timing import split_timings
from sparring.train.cycle_state import CycleState
from sparring.train.cycles import load_metrics
from sparring.world.scenarios import Scenario

# What the stage's metrics (its MLflow run, Dagster metadata, `sparring run`'s table) show per agent.
KEY_METRICS = (
    "strict_pass_coop",
    "routing_acc_coop",
    "strict_pass_coopsim",
    "strict_pass_camo",
    "routing_acc_camo",
    "strict_pass_ref",
    "strict_pass_advpool",
    "routing_acc_advpool",
    "adv_success_advpool",
)


@dataclass
class Inputs:
    root: Path  # the project root: the cycles' states name their checkpoints relative to it
    da0: Path  # agent_sft's checkpoint (DA0)
    da1: Path  # agent_rl's checkpoint (DA1)
    cycles: list[Path]  # every cycle folder the graph makes, in order (those that recorded a stop are skipped)
    peer_rl: Path  # peer_rl's folder: its `final` (the final agent adapted label-free) is played if it trained
    heldout: list[Scenario]  # the held-out set: its first `evaluate.eval_scenarios` are played
    peer: dict[str, Any] | None  # peer_rl's cohort results on this profile (None: absent, or another profile's)
    fidelity_sft: dict[str, Any] | None  # simulator_sft's fidelity results on this profile
    fidelity_rl: dict[str, Any] | None  # simulator_rl's: both stages' fidelity on the same sessions
    judge: Path  # the judge_models stage's folder: each worker loads the judge from it
    judge_settings: JudgeParams  # params' judge
    coevolution: CoevolutionSettings  # params' coevolution: the opponents' sampling, the episodes' turn limits
    agent_sft: AgentSFTSettings  # params' agent_sft: the expert (the ceiling) names objects as DA0's demos did
    profile: str  # the profile whose results are read and recorded
    torch_threads: int  # params' runtime.torch_threads: each worker's


@dataclass
class HeldoutRun:
    document: dict[str, Any]  # metrics.json's (with the cycles' times, which the stage files apart)
    episodes: list[dict[str, Any]]  # per-episode outcomes (ids and figures, no texts), for paired comparisons
    phases: dict[str, Any]  # where the play's time went, and each worker's
    worker_phases: list[dict[str, Any]]


def run(inputs: Inputs, settings: Evaluate, out_dir: Path, seed: int) -> StageResult:
    """Every agent played on the held-out scenarios (:func:`play`), metrics.json written into ``out_dir``
    (reports/) without the cycles' times, which go to the stage's timings: `report` depends on metrics.json, and
    evaluate rerun on the same inputs must leave it up to date."""
    done = play(inputs, settings, seed)
    document, timed = split_timings(done.document)
    path = out_dir / Path(METRICS).relative_to(REPORTS)
    write_json(document, path)
    agents = document["agents"]
    headline = {f"{agent}.{m}": values[m] for agent, values in agents.items() for m in KEY_METRICS if m in values}
    report = {"stop_reason": document["stop_reason"], "phases": done.phases, "worker_phases": done.worker_phases}
    report["episodes"] = done.episodes  # per-episode outcomes, for paired comparisons
    report["timings"] = {"metrics_json": timed or {}}  # moved whole to the timings file (stagekit/timings.py)
    cycles = len(document["cycles"])
    metrics = {**headline, "n_heldout": document["n_heldout"], "cycles_run": cycles}
    return StageResult(metrics, report=report, files=[path])


def play(inputs: Inputs, settings: Evaluate, seed: int) -> HeldoutRun:
    """Every agent of the run played on ``settings.eval_scenarios`` held-out scenarios, each worker building the
    judge, beside the goal-knowing expert's ceiling: metrics.json's document."""
    judge = partial(load_judge, inputs.judge, inputs.judge_settings, inputs.coevolution.agent_grpo.max_turns)
    expert = expert_agent(refs=inputs.agent_sft.object_refs)
    agents, cycles, final = _agents(inputs)
    heldout = inputs.heldout[: settings.eval_scenarios]
    played = evaluate_heldout_parallel(
        agents,
        inputs.root / final.simulator_dir,
        [inputs.root / d for d in final.adversary_dirs],
        heldout,
        judge,
        inputs.coevolution,
        workers=settings.workers,
        torch_threads=inputs.torch_threads,
        seed=seed,
        draws=range(settings.draws),
        expert=expert,
        opponents=settings.opponents,
        expert_draws=settings.expert_draws,
    )
    episodes = compact_episodes(played.episodes)
    records = [r for g, eps in sorted(played.adversary_episodes.items()) for r in strategy_records(eps, g - 1)]
    strategies = discover_strategies(
        records, n_generations=len(played.adversary_episodes), seed=seed, max_clusters=settings.strategy_clusters
    )
    document = {
        "profile": inputs.profile,
        "seed": seed,
        "n_heldout": len(heldout),
        "draws": settings.draws,  # per scenario against each sampled opponent (greedy ones: 1)
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
        "peer": {k: v for k, v in (inputs.peer or {}).items() if k != "profile"},  # per-step logs: peer_rl's report
        "simulator": simulator_summary(inputs.fidelity_sft, inputs.fidelity_rl),
    }
    return HeldoutRun(document, episodes, played.phases, played.worker_phases)


def simulator_summary(sft: dict[str, Any] | None, rl: dict[str, Any] | None) -> dict[str, Any]:
    """metrics.json's `simulator`: both TRACER stages' fidelity on the same held-out sessions (simulator_rl measures
    both, with the ending ceiling on them), or stage 1's own figures when stage 2 has not run."""
    if rl is not None:
        return {"sft": rl["sft"], "rl": rl["rl"], "ceiling": rl.get("ceiling", {})}
    return {"sft": (sft or {}).get("sft", {})}


def _agents(inputs: Inputs) -> tuple[dict[str, Path], list[dict[str, Any]], CycleState]:
    """The agents to play (DA0, DA1, each cycle's that ran, the final one), the cycles' metrics, and the state the
    last cycle left (the simulator and the adversary pool)."""
    cycles = []  # the cycles that ran (the rest recorded that co-evolution had stopped)
    agents: dict[str, Path] = {"da0": inputs.da0, "da1": inputs.da1}
    for k, folder in enumerate(inputs.cycles, start=1):
        metrics = load_metrics(folder)
        if metrics.get("stopped"):
            continue
        cycles.append(metrics)
        agents[f"cycle_{k}"] = inputs.root / CycleState.load(folder).agent_dir
    final = CycleState.load(inputs.cycles[-1])
    agents["final"] = inputs.root / final.agent_dir
    adapted = inputs.peer_rl / "final"  # the final agent after peer_rl's label-free adaptation, if it trained
    if adapted.is_dir() and not same_checkpoint(adapted, agents["final"]):
        agents["peer_final"] = adapted
    return agents, cycles, final
