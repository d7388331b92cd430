"""Asset checks that guard the pipeline: each reads one report a stage wrote and calls a plain function of
sparring.evaluate.checks, so the UI shows a pass or a failure with the figures compared."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from dagster import AssetCheckResult, AssetChecksDefinition, AssetCheckSeverity, MetadataValue, asset_check

from sparring.catalog import stage_report
from stagekit.resources import ProjectResource


def report_check(
    asset: str,
    name: str,
    description: str,
    check: Callable[[dict[str, Any]], tuple[bool, dict[str, Any]]],
    report: str | None = None,
    severity: AssetCheckSeverity = AssetCheckSeverity.WARN,
) -> AssetChecksDefinition:
    """An asset check on ``asset`` applying ``check`` to ``report`` (default: reports/<asset>.json); a missing or
    unreadable report fails it, naming the file."""
    path = report or stage_report(asset)

    @asset_check(asset=asset, name=name, description=description)
    def _check(project: ProjectResource) -> AssetCheckResult:
        file = project.path() / path
        try:
            document = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return AssetCheckResult(passed=False, severity=severity, metadata={"error": f"{path}: {exc}"})
        passed, details = check(document)
        metadata = {k: MetadataValue.json(v) if isinstance(v, dict) else v for k, v in details.items()}
        return AssetCheckResult(passed=passed, severity=severity, metadata={"report": path, **metadata})

    return _check
