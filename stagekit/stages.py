"""One graph, not two: each stage is declared once, as a `Stage`, next to its asset in assets/<stage>.py.

From these declarations come both the Dagster assets (`stage_asset`) and dvc.yaml (`render_dvc_yaml`, written
by `sparring dvc-yaml --write`). Every DVC stage runs `sparring stage <name>`, which materializes the same
Dagster asset in-process against the project's Dagster instance, so `dvc repro` and the Dagster UI run the
same code, update the same files, and both log to MLflow. tests/test_pipeline.py checks that dvc.yaml and the
asset graph agree. A stage's code dependencies are computed, not declared: the import closure of its module
(stagekit/code_deps.py), which dvc.yaml lists and `code_version` hashes alike.

Besides its own outputs, every stage writes reports/<stage>.json (all its metrics), reports/headline/<stage>.json
(a few headline numbers: DVC's metrics, so `dvc metrics show` stays a short table) and, for the stages with a
`series`, reports/plots/<stage>.json (a data series for `dvc plots show`). Its timings (wall time, phases, timing
metrics) go to reports/timings/<stage>.json, which DVC does not track (stagekit/timings.py). Where each stage's
files live is sparring.catalog's: the assets read their inputs through `StageContext.catalog`.
"""

# No `from __future__ import annotations`: Dagster reads the asset function's annotations at definition time.
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from dagster import (
    AssetExecutionContext,
    MaterializeResult,
    MetadataValue,
    asset,
)

from sparring.atomic import adopt_dir, check_replaceable, write_json
from sparring.catalog import REPORTS, Catalog, stage_report
from sparring.drivers import StageResult
from sparring.params import Params
from stagekit.code_deps import code_files, collapse, folder_files
from stagekit.progress import previous_seconds, say, stage_progress
from stagekit.resources import INTERRUPTS, VERBOSE_ENV, MlflowTracking, ProjectResource
from stagekit.timings import split_timings, write_stage_timings

# Every stage reads these: switching the profile, the seed or the domain reruns everything.
COMMON_PARAMS = ("profile", "seed", "domain")
# params.py reads params.yaml; settings.py holds the defaults of every key params.yaml leaves out; timings.py decides
# what of a stage's report DVC tracks.
COMMON_DEPS = (
    "src/sparring/params.py",
    "src/sparring/settings.py",
    "stagekit/stages.py",
    "stagekit/timings.py",
)
CYCLE = re.compile(r"cycle_(\d+)")
# Each DVC stage's command: `sparring stage <name>`, found on PATH or, without the venv activated (`.venv/bin/dvc
# repro`), in the project's own .venv/bin: DVC deletes a stage's outputs before running it, so a command it cannot
# find (exit 127) lost them. `env` sets PATH the same way in sh, bash, zsh and fish (DVC runs cmd in $SHELL).
STAGE_COMMAND = 'env "PATH=$PATH:.venv/bin" sparring stage'

ROOT = Path(__file__).resolve().parents[1]


def is_cycle(name: str) -> bool:
    return CYCLE.fullmatch(name) is not None


@dataclass(frozen=True)
class Plot:
    """A data series for `dvc plots show`: an SFT stage's training loss (what it logs with `StageLog.curves`), or
    each cycle's W_DA trajectory so far (its report's state)."""

    x: str
    y: str
    title: str


@dataclass(frozen=True)
class Stage:
    name: str
    description: str
    params: tuple[str, ...]  # params.yaml sections the stage reads (besides COMMON_PARAMS)
    # Paths it reads that are neither an upstream stage's outs nor code its module imports (`stage_deps` adds those).
    deps: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()  # what it writes (DVC-cached)
    metrics: tuple[str, ...] = ()  # small JSON summaries it writes (DVC-tracked, not cached, logged to MLflow)
    upstream: tuple[str, ...] = ()  # stages whose outs it reads
    figures: tuple[str, ...] = ()  # PNGs among its outs that `dvc plots show` draws
    priority: int = 0  # of the stages ready at once, the multiprocess executor starts the highest first
    # The few metrics `dvc metrics show` prints (reports/headline/<stage>.json); all of them stay in its report.
    headline_metrics: tuple[str, ...] = ()
    series: Plot | None = None  # its data series for `dvc plots show`, if any
    group: str = "pipeline"  # what it is, as the Dagster UI groups it
    kinds: tuple[str, ...] = ("python",)  # the Dagster UI's badges (it shows three at most)

    @property
    def report(self) -> str:
        return stage_report(self.name)

    @property
    def headline(self) -> str:
        return f"{REPORTS}/headline/{self.name}.json"

    @property
    def plot(self) -> str | None:
        return f"{REPORTS}/plots/{self.name}.json" if self.series else None


@dataclass
class StageContext:
    root: Path
    params: Params
    log: Any  # stagekit.resources.StageLog
    dagster: AssetExecutionContext

    @property
    def catalog(self) -> Catalog:
        """The stage's inputs and outputs under this project's root."""
        return Catalog(self.root)


@dataclass
class StageOutput:
    metrics: dict[str, float]  # logged to MLflow, written to reports/<stage>.json, shown as Dagster metadata
    report: dict[str, Any] = field(default_factory=dict)  # extra detail for reports/<stage>.json
    metadata: dict[str, Any] = field(default_factory=dict)  # extra Dagster metadata


def record(result: StageResult, log: Any, context: AssetExecutionContext) -> StageOutput:
    """Hand a driver's result to the tracker (checkpoints, curves, step series, nested runs, artifacts) and the
    Dagster UI (shown, warnings), timed as the phase `log_mlflow` when the driver timed its own; what remains is the
    stage's report."""
    for message in result.warnings:
        context.log.warning(message)
    with result.phases.time("log_mlflow") if result.phases is not None else nullcontext():
        _track(result, log)
    return StageOutput(metrics=result.metrics, report=result.full_report(), metadata=_shown(result.shown))


def _track(result: StageResult, log: Any) -> None:
    log.curves(result.curves)
    if result.series:
        log.series(result.series)
    for name, value, step in result.trajectory:
        log.trajectory(name, value, step)
    for name, folder in result.checkpoints.items():
        log.checkpoint(folder, name)
    for name, child in result.children.items():
        with log.child_run(name) as nested:
            nested.series(child.series)
            nested.metrics(child.metrics)
    for name, body in result.json_artifacts.items():
        log.json_artifact(body, name)
    for path in result.files:
        log.artifact(path)
    for path, folder in result.shared:
        (log.parent_artifacts if path.is_dir() else log.parent_artifact)(path, folder)


def _shown(values: dict[str, Any]) -> dict[str, Any]:
    """A result's `shown` as Dagster metadata: markdown for text, a path, JSON for the rest."""

    def one(value: Any) -> Any:
        if isinstance(value, str):
            return MetadataValue.md(value)
        return MetadataValue.path(str(value)) if isinstance(value, Path) else MetadataValue.json(value)

    return {name: one(value) for name, value in values.items()}


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV) == "1"


@contextmanager
def trainer_output(root: Path, name: str) -> Iterator[Path | None]:
    """Unless verbose, send what the stage's code prints (TRL's log dicts, tqdm bars, warnings) to
    scratch/logs/<stage>.log instead of the terminal; yields that file (None when verbose)."""
    if verbose():
        yield None
        return
    path = root / "scratch" / "logs" / f"{name}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    if "transformers" in sys.modules:  # its logger writes to the stream it was created with, so quiet it here
        sys.modules["transformers"].utils.logging.set_verbosity_error()
    with path.open("w", encoding="utf-8") as log, redirect_stdout(log), redirect_stderr(log):
        yield path


def stage_deps(stage: Stage, root: Path = ROOT) -> list[str]:
    """What the stage reads besides its upstream outs, computed so no hand-kept list can miss a file: COMMON_DEPS,
    its module's import closure with the package data beside it, and its own `deps`; each once, none under a
    folder already listed."""
    paths = [*COMMON_DEPS, *collapse(code_files(stage_module(stage.name), root), root), *stage.deps]
    folders = [p for p in paths if (root / p).is_dir()]
    kept: list[str] = []
    for path in paths:
        if path not in kept and not any(path.startswith(f"{folder}/") for folder in folders):
            kept.append(path)
    return kept


def code_version(stage: Stage, root: Path = ROOT) -> str:
    """A hash of the files `stage_deps` names (a folder's as DVC tracks them): Dagster marks the asset stale when
    they change, as DVC does."""
    digest = hashlib.sha1()
    for dep in stage_deps(stage, root):
        path = root / dep
        for name in folder_files(path, root) if path.is_dir() else [dep]:
            if (root / name).is_file():
                digest.update(name.encode() + b"\0" + (root / name).read_bytes())
    return digest.hexdigest()[:12]


def _headline(stage: Stage, metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: metrics[k] for k in stage.headline_metrics if k in metrics}


def _plot_points(stage: Stage, log: Any, report: dict[str, Any]) -> list[dict[str, Any]]:
    """The stage's data series: an SFT stage's logged loss (steps counted across its phases), a cycle's W_DA
    trajectory so far, with the adversary's arena success beside it (from the state it leaves), or the `curve` a
    stage reports (agent_rl's validation per step)."""
    if is_cycle(stage.name):
        state = report.get("state", {})
        history, adv = state.get("w_da_history", []), state.get("adv_success_history", [])
        points = [{"cycle": k, "w_da": float(w)} for k, w in enumerate(history, start=1)]
        for point, a in zip(points, adv, strict=False):
            point["adv_success"] = float(a)
        return points
    if stage.series and isinstance(report.get("curve"), list):  # a stage's own curve (agent_rl's validation)
        x, y = stage.series.x, stage.series.y
        return [{x: row[x], y: float(row[y])} for row in report["curve"] if x in row and y in row]
    points, offset, last_phase, last_step = [], 0, None, 0
    for entry in getattr(log, "logged_curves", []):
        if "loss" not in entry or "step" not in entry:
            continue
        phase = entry.get("phase", 0)
        if phase != last_phase:
            offset, last_phase = last_step, phase
        last_step = offset + int(entry["step"])
        points.append({"step": last_step, "phase": phase, "train_loss": float(entry["loss"])})
    return points


def _write_reports(stage: Stage, root: Path, params: Params, output: StageOutput, log: Any, seconds: float) -> None:
    """reports/<stage>.json without its timings, which go to reports/timings/<stage>.json: downstream stages
    depend on the report, and a rerun with the same inputs must leave them up to date (stagekit/timings.py)."""
    report = {
        "stage": stage.name,
        "profile": params.profile,
        "seed": params.seed,
        "upstream": list(stage.upstream),  # the graph beside the times: evaluate's critical path reads both
        "metrics": output.metrics,
        **output.report,
    }
    tracked, timed = split_timings(report)
    identity = {k: report[k] for k in ("stage", "profile", "seed", "upstream")}
    write_stage_timings(root, stage.name, {**identity, "wall_seconds": seconds, **(timed or {})})
    write_json(tracked, root / stage.report)
    write_json(_headline(stage, output.metrics), root / stage.headline)
    if stage.plot:
        # write_json takes a dict; DVC reads the first list of points it finds in the file
        write_json({"points": _plot_points(stage, log, report)}, root / stage.plot)


def check_outputs(stage: Stage, root: Path) -> None:
    """Refuse (:class:`~sparring.atomic.OutputRefused`), before the stage runs, an output folder holding files
    sparring did not write: the stage would find them only when it swaps its new folder in, after training."""
    for out in stage.outs:
        adopt_dir(root / out)  # the pipeline's own paths: an output from before manifests is still its own
        if (root / out).is_dir():
            advice = f"stage {stage.name} writes this folder whole; move them elsewhere (nothing was run)"
            check_replaceable(root / out, advice=advice)


def stage_asset(stage: Stage) -> Callable[[Callable[[StageContext], StageResult | StageOutput]], Any]:
    """Wrap a plain `fn(StageContext) -> StageResult` (its driver's) as the stage's Dagster asset: it loads params,
    opens the stage's MLflow run, times the work, records the result (:func:`record`), writes reports/<stage>.json
    (and its headline and plot files) atomically and returns metadata. It prints one line when the stage starts and
    one when it ends, and between them the progress its code logs (stagekit/progress.py)."""

    def wrap(fn: Callable[[StageContext], StageResult | StageOutput]) -> Any:
        @asset(
            name=stage.name,
            description=stage.description,
            deps=list(stage.upstream),
            metadata={"dvc_outs": list(stage.outs), "params_sections": [*COMMON_PARAMS, *stage.params]},
            kinds=set(stage.kinds),
            group_name=stage.group,
            code_version=code_version(stage),
            op_tags={"dagster/priority": str(stage.priority)},
        )
        def _asset(
            context: AssetExecutionContext, project: ProjectResource, mlflow: MlflowTracking
        ) -> MaterializeResult:
            began = time.perf_counter()
            say(f"stage {stage.name}: started")
            root, params = project.path(), project.params()
            check_outputs(stage, root)
            last_time = previous_seconds(root, stage.name, params.profile)  # read before this run rewrites it
            try:
                with mlflow.stage_run(context.run.run_id, stage.name, params, [*COMMON_PARAMS, *stage.params]) as log:
                    start = time.perf_counter()
                    with (
                        stage_progress(stage.name, context.log, not verbose(), last_time),
                        trainer_output(root, stage.name) as chatter,
                    ):
                        output = fn(StageContext(root=root, params=params, log=log, dagster=context))
                        if isinstance(output, StageResult):
                            output = record(output, log, context)
                    seconds = round(time.perf_counter() - start, 3)
                    _write_reports(stage, root, params, output, log, seconds)
                    log.metrics({**output.metrics, "wall_seconds": seconds})
                    log.artifact(root / stage.report)
            except BaseException as exc:
                ended = "interrupted" if isinstance(exc, INTERRUPTS) else "failed"
                say(f"stage {stage.name}: {ended} after {time.perf_counter() - began:.1f} s")
                raise
            where = f" (its output: {chatter.relative_to(root)})" if chatter and chatter.stat().st_size else ""
            say(f"stage {stage.name}: finished in {time.perf_counter() - began:.1f} s{where}")
            metadata = {k: MetadataValue.float(float(v)) for k, v in output.metrics.items()}
            metadata["wall_seconds"] = MetadataValue.float(seconds)
            metadata["profile"] = MetadataValue.text(params.profile)
            return MaterializeResult(metadata={**metadata, **output.metadata})

        return _asset

    return wrap


def _plots(stages: list[Stage]) -> list[dict[str, Any]]:
    """dvc.yaml's top-level plots: each SFT stage's loss, and the last cycle's W_DA trajectory (the whole run's)."""
    plots = []
    cycles = [s for s in stages if is_cycle(s.name)]
    for s in stages:
        if s.series and s.plot and (not is_cycle(s.name) or s is cycles[-1]):
            plot_id = "w_da" if is_cycle(s.name) else f"{s.name}_{s.series.y.removeprefix('train_')}"
            series = {"x": s.series.x, "y": {s.plot: s.series.y}, "title": s.series.title, "template": "linear"}
            plots.append({plot_id: series})
        plots += list(s.figures)  # images: DVC shows them as they are
    return plots


def render_dvc_yaml(stages: list[Stage]) -> str:
    """dvc.yaml for the given stages: the same command, inputs and outputs the Dagster assets declare."""
    by_name = {s.name: s for s in stages}
    body: dict[str, Any] = {}
    for s in stages:
        # an upstream stage's outs and metrics (what a later stage reads is there, never in its report)
        upstream_outs = [out for u in s.upstream for out in (*by_name[u].outs, *by_name[u].metrics)]
        small = [s.report, *s.metrics, *([s.plot] if s.plot else [])]  # tracked, too small to cache
        body[s.name] = {
            "desc": s.description,
            "cmd": f"{STAGE_COMMAND} {s.name}",
            "deps": [*upstream_outs, *stage_deps(s)],
            "params": [*COMMON_PARAMS, *s.params],
            "outs": [*s.outs, *({path: {"cache": False}} for path in small)],
            "metrics": [{s.headline: {"cache": False}}],
        }
    header = "# Generated from the Stage declarations in assets/ by `sparring dvc-yaml --write`; do not edit.\n"
    document = {"stages": body, "plots": _plots(stages)}
    return header + yaml.safe_dump(document, sort_keys=False, width=110, allow_unicode=True)


def stage_module(name: str) -> str:
    """The module that declares stage ``name``: assets/<name>.py, or assets/coevolution.py for every cycle."""
    return "assets.coevolution" if is_cycle(name) else f"assets.{name}"
