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

from functools import partial

from dagster import AssetCheckSeverity

from pipelines.kit.checks import report_check
from pipelines.kit.graph_shape import LAST_CYCLE, N_CYCLES
from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from pipelines.kit.timings import split_timings
from sparring.agents.scripted import ExpertAgent
from sparring.atomic import write_json
from sparring.catalog import JUDGE, METRICS, load_judge
from sparring.drivers.evaluate import run as run_evaluation
from sparring.evaluate import checks

STAGE = Stage(
    name="evaluate",
    description="Held-out evaluation of DA0, DA1, each cycle's agent and the final agent against the cooperative "
    "simulator, the camouflaging customer, the reference opponent and the adversary pool, over several customer "
    "draws → reports/metrics.json.",
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
    "strict_pass_ref",
    "strict_pass_advpool",
    "routing_acc_advpool",
    "adv_success_advpool",
)


@stage_asset(STAGE)
def evaluate(ctx: StageContext) -> StageOutput:
    p, data = ctx.params, ctx.catalog
    judge = partial(load_judge, data.path(JUDGE), p.judge, p.coevolution.agent_grpo.max_turns)
    expert = ExpertAgent(refs=p.agent_sft.object_refs)
    done = run_evaluation(
        data, p.evaluate, p.coevolution, judge, expert, N_CYCLES,
        profile=p.profile, seed=p.seed, torch_threads=p.runtime.torch_threads,
    )  # fmt: skip
    # The cycles' times go to reports/timings/evaluate.json, not metrics.json: `report` depends on metrics.json,
    # and evaluate rerun on the same inputs must leave it up to date (the run's own: reports/timings/run.json).
    document, timed = split_timings(done.document)
    write_json(document, data.path(METRICS))
    ctx.log.artifact(data.path(METRICS))
    agents = document["agents"]
    headline = {f"{agent}.{m}": values[m] for agent, values in agents.items() for m in KEY_METRICS if m in values}
    report = {"stop_reason": document["stop_reason"], "phases": done.phases, "worker_phases": done.worker_phases}
    report["episodes"] = done.episodes  # per-episode outcomes, for paired comparisons
    report["timings"] = {"metrics_json": timed or {}}  # moved whole to the timings file (pipelines/kit/timings.py)
    cycles = len(document["cycles"])
    return StageOutput(metrics={**headline, "n_heldout": document["n_heldout"], "cycles_run": cycles}, report=report)


final_no_worse_than_da0 = report_check(
    "evaluate", "final_no_worse_than_da0", checks.final_no_worse_than_da0.__doc__.replace("\n", " "),
    checks.final_no_worse_than_da0, METRICS,
)  # fmt: skip
no_unauthorized_actions = report_check(
    "evaluate", "no_unauthorized_actions", checks.no_unauthorized_actions.__doc__.replace("\n", " "),
    checks.no_unauthorized_actions, METRICS, severity=AssetCheckSeverity.ERROR,
)  # fmt: skip
