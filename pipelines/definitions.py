"""The Dagster code location: every stage as an asset, the main job, resources and asset checks."""

from __future__ import annotations

from typing import Any

from dagster import AssetSelection, Definitions, define_asset_job

from assets import (
    agent_rl,
    agent_sft,
    coevolution,
    evaluate,
    ingest,
    judge_models,
    peer_members,
    peer_rl,
    report,
    scenarios,
    simulator_rl,
    simulator_sft,
    tokenizer,
)
from stagekit.resources import MlflowTracking, ProjectResource
from stagekit.stages import Stage

# Every stage with its asset, in pipeline order: one per assets/ module, and co-evolution's cycle_1 ... cycle_N.
STAGE_ASSETS: list[tuple[Stage, Any]] = [
    (ingest.STAGE, ingest.ingest),
    (scenarios.STAGE, scenarios.scenarios),
    (judge_models.STAGE, judge_models.judge_models),
    (tokenizer.STAGE, tokenizer.tokenizer),
    (simulator_sft.STAGE, simulator_sft.simulator_sft),
    (agent_sft.STAGE, agent_sft.agent_sft),
    (agent_rl.STAGE, agent_rl.agent_rl),
    (simulator_rl.STAGE, simulator_rl.simulator_rl),
    (peer_members.STAGE, peer_members.peer_members),
    *zip(coevolution.STAGES, coevolution.ASSETS, strict=True),
    (peer_rl.STAGE, peer_rl.peer_rl),
    (evaluate.STAGE, evaluate.evaluate),
    (report.STAGE, report.report),
]
STAGES = [stage for stage, _ in STAGE_ASSETS]

main_job = define_asset_job("main", selection=AssetSelection.all(), description="The whole pipeline, in order.")

defs = Definitions(
    assets=[asset for _, asset in STAGE_ASSETS],
    asset_checks=[
        ingest.ingest_splits_are_sound,
        agent_sft.da0_beats_tfidf,
        simulator_sft.simulator_is_faithful,
        evaluate.final_no_worse_than_da0,
        evaluate.no_unauthorized_actions,
    ],
    jobs=[main_job],
    resources={"project": ProjectResource(), "mlflow": MlflowTracking()},
)


def main_job_def() -> Any:
    """The main job resolved against ``defs``: what `sparring run` hands to Dagster's multiprocess executor, whose
    stage processes rebuild it by importing this module (``dagster.reconstructable`` needs a module-level
    function)."""
    return defs.resolve_job_def("main")
