"""One stage's Dagster definitions, for `sparring stage <name>` (what every DVC stage runs): above the assets, it
imports the one module that declares the stage, not the whole graph's (so `sparring stage ingest` starts without
torch). The kit below the assets (stagekit/) never imports an asset."""

from __future__ import annotations

import importlib
from typing import Any

from dagster import (
    AssetChecksDefinition,
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    Definitions,
    define_asset_job,
)

from stagekit.resources import MlflowTracking, ProjectResource
from stagekit.stages import Stage, stage_module


def stage_definitions(name: str) -> tuple[Stage, Any] | None:
    """Stage ``name`` and Dagster Definitions holding only its asset (its upstream assets stand in as external
    specs) and its checks, with a job `main` over it: importing one stage's module, not the whole graph's, is
    what lets `sparring stage ingest` start without torch. None if no module declares that stage."""
    try:
        module = importlib.import_module(stage_module(name))
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("assets."):
            return None
        raise
    declared = getattr(module, "STAGES", None) or [getattr(module, "STAGE", None)]
    stage = next((s for s in declared if isinstance(s, Stage) and s.name == name), None)
    if stage is None:
        return None
    found = [v for value in vars(module).values() for v in (value if isinstance(value, list) else [value])]
    key = AssetKey(name)
    checks = [c for c in found if isinstance(c, AssetChecksDefinition) and key in {k.asset_key for k in c.check_keys}]
    assets = [a for a in found if isinstance(a, AssetsDefinition) and not isinstance(a, AssetChecksDefinition)]
    assets = [a for a in assets if a.keys == {key}]
    defs = Definitions(
        assets=assets[:1],
        asset_checks=checks,
        jobs=[define_asset_job("main", selection=AssetSelection.assets(key))],
        resources={"project": ProjectResource(), "mlflow": MlflowTracking()},
    )
    return stage, defs
