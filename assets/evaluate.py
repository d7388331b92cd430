"""Asset `evaluate` (sparring.drivers.evaluate): DA0, DA1 (agent_rl's), every cycle's agent and the final agent on
held-out scenarios → reports/metrics.json, with the paired gains DA1 − DA0, final − DA0 and final − DA1 over
(scenario, customer draw).

Opponents: the cooperative simulator (`_coop`, `_coopsim`), the scripted camouflaging customer (`_camo`), the frozen
reference opponent (`_ref`: adversary generation 0, the SFT simulator) and the pool of every adversary generation
(`_advpool`, with the judge's adversary reward parts), each sampled one over `evaluate.draws` draws. Beside the
agents: the goal-knowing expert's figures (`ceiling`), cross-play of every agent against each generation, pass^k
over the draws, the strategies found in the adversaries' messages, and the peer cohort's routing (peer_rl's).
The file's layout is ../shared/METRICS.md's.
"""

from __future__ import annotations

from dagster import AssetCheckSeverity

from sparring.catalog import (
    AGENT_RL,
    AGENT_SFT,
    JUDGE,
    METRICS,
    PEER_COHORT,
    PEER_RL,
    REPORTS,
    SIMULATOR_RL_FIDELITY,
    SIMULATOR_SFT_FIDELITY,
    cycle_dir,
)
from sparring.drivers import StageResult
from sparring.drivers.evaluate import Inputs, run
from sparring.evaluate import checks
from stagekit.checks import report_check
from stagekit.graph_shape import LAST_CYCLE, N_CYCLES
from stagekit.stages import Stage, StageContext, stage_asset

STAGE = Stage(
    name="evaluate",
    description="Held-out evaluation of DA0, DA1, each cycle's agent and the final agent against the cooperative "
    "simulator, the camouflaging customer, the reference opponent and the adversary pool, over several customer "
    "draws → reports/metrics.json.",
    params=("evaluate", "coevolution", "judge", "agent_sft"),  # agent_sft: the expert names objects as DA0 does
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


@stage_asset(STAGE)
def evaluate(ctx: StageContext) -> StageResult:
    data, p = ctx.catalog, ctx.params
    inputs = Inputs(
        root=data.root,
        da0=data.path(AGENT_SFT),
        da1=data.path(AGENT_RL),
        cycles=[data.path(cycle_dir(k)) for k in range(1, N_CYCLES + 1)],
        peer_rl=data.path(PEER_RL),
        heldout=data.scenarios("heldout"),
        peer=data.results(PEER_COHORT, p.profile),
        fidelity_sft=data.results(SIMULATOR_SFT_FIDELITY, p.profile),
        fidelity_rl=data.results(SIMULATOR_RL_FIDELITY, p.profile),
        judge=data.path(JUDGE),
        judge_settings=p.judge,
        coevolution=p.coevolution,
        agent_sft=p.agent_sft,
        profile=p.profile,
        torch_threads=p.runtime.torch_threads,
    )
    return run(inputs, p.evaluate, data.path(REPORTS), p.seed)


final_no_worse_than_da0 = report_check(
    "evaluate", "final_no_worse_than_da0", checks.final_no_worse_than_da0.__doc__.replace("\n", " "),
    checks.final_no_worse_than_da0, METRICS,
)  # fmt: skip
no_unauthorized_actions = report_check(
    "evaluate", "no_unauthorized_actions", checks.no_unauthorized_actions.__doc__.replace("\n", " "),
    checks.no_unauthorized_actions, METRICS, severity=AssetCheckSeverity.ERROR,
)  # fmt: skip
