"""One graph, not two: each stage is declared once, as a `Stage`, next to its asset in assets/<stage>.py.

From these declarations come both the Dagster assets (`stage_asset`) and dvc.yaml (`render_dvc_yaml`, written
by `sparring dvc-yaml --write`). Every DVC stage runs `sparring stage <name>`, which materializes the same
Dagster asset in-process against the project's Dagster instance, so `dvc repro` and the Dagster UI run the
same code, update the same files, and both log to MLflow. tests/test_pipeline.py checks that dvc.yaml and the
asset graph agree.
"""

# No `from __future__ import annotations`: Dagster reads the asset function's annotations at definition time.
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from pipelines.resources import MlflowTracking, ProjectResource
from sparring.atomic import write_json
from sparring.params import Params

# Every stage reads these: switching the profile or the seed reruns everything.
COMMON_PARAMS = ("profile", "seed")
# Every stage's code depends on these too.
COMMON_DEPS = ("src/sparring/params.py", "pipelines/stages.py")


@dataclass(frozen=True)
class Stage:
    name: str
    description: str
    params: tuple[str, ...]  # params.yaml sections the stage reads (besides COMMON_PARAMS)
    deps: tuple[str, ...]  # code and data paths the stage reads, relative to the project root
    outs: tuple[str, ...]  # what it writes (DVC-cached)
    metrics: tuple[str, ...] = ()  # small JSON summaries (DVC metrics, not cached, also logged to MLflow)
    upstream: tuple[str, ...] = ()  # stages whose outs it reads

    @property
    def report(self) -> str:
        return f"reports/{self.name}.json"


@dataclass
class StageContext:
    root: Path
    params: Params
    log: Any  # pipelines.resources.StageLog
    dagster: AssetExecutionContext


@dataclass
class StageOutput:
    metrics: dict[str, float]  # logged to MLflow, written to reports/<stage>.json, shown as Dagster metadata
    report: dict[str, Any] = field(default_factory=dict)  # extra detail for reports/<stage>.json
    metadata: dict[str, Any] = field(default_factory=dict)  # extra Dagster metadata


def stage_asset(stage: Stage) -> Callable[[Callable[[StageContext], StageOutput]], Any]:
    """Wrap a plain `fn(StageContext) -> StageOutput` as the stage's Dagster asset: it loads params, opens
    the stage's MLflow run, times the work, writes reports/<stage>.json atomically and returns metadata."""

    def wrap(fn: Callable[[StageContext], StageOutput]) -> Any:
        @asset(
            name=stage.name,
            description=stage.description,
            deps=list(stage.upstream),
            metadata={"dvc_outs": list(stage.outs), "params_sections": [*COMMON_PARAMS, *stage.params]},
            kinds={"python"},
        )
        def _asset(
            context: AssetExecutionContext, project: ProjectResource, mlflow: MlflowTracking
        ) -> MaterializeResult:
            root, params = project.path(), project.params()
            with mlflow.stage_run(
                context.run.run_id, stage.name, params, [*COMMON_PARAMS, *stage.params]
            ) as log:
                start = time.perf_counter()
                output = fn(StageContext(root=root, params=params, log=log, dagster=context))
                seconds = round(time.perf_counter() - start, 3)
                report = {
                    "stage": stage.name,
                    "profile": params.profile,
                    "seed": params.seed,
                    "wall_seconds": seconds,
                    "metrics": output.metrics,
                    **output.report,
                }
                write_json(report, root / stage.report)
                log.metrics({**output.metrics, "wall_seconds": seconds})
                log.artifact(root / stage.report)
            metadata = {k: MetadataValue.float(float(v)) for k, v in output.metrics.items()}
            metadata["wall_seconds"] = MetadataValue.float(seconds)
            metadata["profile"] = MetadataValue.text(params.profile)
            return MaterializeResult(metadata={**metadata, **output.metadata})

        return _asset

    return wrap


def render_dvc_yaml(stages: list[Stage]) -> str:
    """dvc.yaml for the given stages: the same command, inputs and outputs the Dagster assets declare."""
    by_name = {s.name: s for s in stages}
    body: dict[str, Any] = {}
    for s in stages:
        upstream_outs = [out for u in s.upstream for out in by_name[u].outs]
        body[s.name] = {
            "desc": s.description,
            "cmd": f"sparring stage {s.name}",
            "deps": [*upstream_outs, *COMMON_DEPS, *s.deps],
            "params": [*COMMON_PARAMS, *s.params],
            "outs": list(s.outs),
            "metrics": [{s.report: {"cache": False}}, *({m: {"cache": False}} for m in s.metrics)],
        }
    header = (
        "# Generated from the Stage declarations in assets/ by `sparring dvc-yaml --write`; do not edit.\n"
    )
    return header + yaml.safe_dump({"stages": body}, sort_keys=False, width=110, allow_unicode=True)
