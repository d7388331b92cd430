"""The Dagster code location: every stage as an asset, the main job, resources and asset checks."""

from __future__ import annotations

from typing import Any

from dagster import AssetSelection, Definitions, define_asset_job

from assets import agent_sft, coevolution, evaluate, ingest, judge_models, scenarios, simulator_sft, tokenizer
from pipelines.resources import MlflowTracking, ProjectResource
from pipelines.stages import Stage


def module_stages(module: Any) -> list[Stage]:
    """The stages an assets/ module declares: its `STAGES` list (several: one per co-evolution cycle) or its one
    `STAGE`; each stage's asset is the module attribute named after it."""
    return list(module.STAGES) if hasattr(module, "STAGES") else [module.STAGE]


# In pipeline order; each module declares its STAGE (or STAGES) and the asset(s) named after them.
STAGE_MODULES = [ingest, scenarios, judge_models, tokenizer, simulator_sft, agent_sft, coevolution, evaluate]
STAGES = [s for m in STAGE_MODULES for s in module_stages(m)]

main_job = define_asset_job(
    "main", selection=AssetSelection.all(), description="The whole pipeline, in order."
)

defs = Definitions(
    assets=[getattr(m, s.name) for m in STAGE_MODULES for s in module_stages(m)],
    asset_checks=[ingest.ingest_splits_are_sound],
    jobs=[main_job],
    resources={"project": ProjectResource(), "mlflow": MlflowTracking()},
)


def main_job_def() -> Any:
    """The main job resolved against ``defs``: what `sparring run` hands to Dagster's multiprocess executor, whose
    stage processes rebuild it by importing this module (``dagster.reconstructable`` needs a module-level
    function)."""
    return defs.resolve_job_def("main")

