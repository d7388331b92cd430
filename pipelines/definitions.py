"""The Dagster code location: every stage as an asset, the main job, resources and asset checks."""

from __future__ import annotations

from dagster import AssetSelection, Definitions, define_asset_job

from assets import agent_sft, ingest, judge_models, scenarios, simulator_sft, tokenizer
from pipelines.resources import MlflowTracking, ProjectResource

# In pipeline order; each module declares its STAGE and the asset named after it.
STAGE_MODULES = [ingest, scenarios, judge_models, tokenizer, simulator_sft, agent_sft]
STAGES = [m.STAGE for m in STAGE_MODULES]

main_job = define_asset_job(
    "main", selection=AssetSelection.all(), description="The whole pipeline, in order."
)

defs = Definitions(
    assets=[getattr(m, m.STAGE.name) for m in STAGE_MODULES],
    asset_checks=[ingest.ingest_splits_are_sound],
    jobs=[main_job],
    resources={"project": ProjectResource(), "mlflow": MlflowTracking()},
)
