"""The `sparring` console script: the library's commands plus the pipeline's (run, stage, ui, dvc-yaml)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sparring.cli import app, fail
from sparring.params import PROFILE_ENV, ParamsError, load_params
from sparring.runtime import project_root

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _root() -> Path:
    try:
        return project_root()
    except FileNotFoundError as exc:
        fail(str(exc))


def _prepare(profile: str | None) -> Path:
    from pipelines.resources import ensure_dagster_home

    root = _root()
    if profile:
        os.environ[PROFILE_ENV] = profile
    try:
        load_params(root / "params.yaml")  # fail fast, before Dagster starts, on a bad params file
    except ParamsError as exc:
        fail(str(exc))
    ensure_dagster_home(root)
    return root


def _stages() -> list:
    """The declared stages; the cycle count comes from params.yaml, so a bad file fails here, by key."""
    try:
        from pipelines.definitions import STAGES
    except ParamsError as exc:
        fail(str(exc))
    return STAGES


def _execute(stages: list[str] | None, parallel: int = 1, root: Path | None = None) -> None:
    """Materialize stages (all if None) against the project's Dagster instance: in this process, one at a time,
    or with ``parallel`` > 1 on Dagster's multiprocess executor, which runs up to that many stages whose inputs
    are ready (simulator_sft beside agent_sft), each in its own process."""
    from dagster import AssetKey, DagsterInstance, execute_job, reconstructable

    from pipelines.definitions import defs, main_job_def

    selection = [AssetKey(s) for s in stages] if stages else None
    with DagsterInstance.get() as instance:
        if parallel > 1:
            # The stage processes get the project and profile in their config, not from the environment.
            project = {"root": str(root or _root()), "profile": os.environ.get(PROFILE_ENV, "")}
            # forkserver with the pipeline preloaded: a stage process starts in ~1 s instead of importing torch,
            # transformers and Dagster afresh (spawn: ~10 s a stage on 2 cores).
            start = {"forkserver": {"preload_modules": ["pipelines.definitions"]}}
            execution = {"multiprocess": {"max_concurrent": parallel, "start_method": start}}
            result = execute_job(
                reconstructable(main_job_def),
                instance,
                run_config={**QUIET, "execution": {"config": execution}, "resources": {"project": {"config": project}}},
                asset_selection=selection,
                raise_on_error=False,
            )
        else:
            result = defs.resolve_job_def("main").execute_in_process(
                instance=instance, asset_selection=selection, run_config=QUIET, raise_on_error=False
            )
    if not result.success:
        failures = [e for e in result.all_events if e.is_step_failure]
        messages = []
        for event in failures:
            error = event.step_failure_data.error
            while (
                error is not None and error.cause is not None
            ):  # the user's exception, not Dagster's wrapper
                error = error.cause
            messages.append(f"stage {event.step_key}: {error.message.strip() if error else 'failed'}")
        fail("\n".join(messages) or "the run failed", code=1)


def _summary(root: Path, stages: list[str], brief: tuple[str, ...] = ()) -> None:
    """Each stage's wall time and metrics; for `brief` stages only the wall time (their own tables follow)."""
    table = Table(title="sparring — stage summary", show_lines=False)
    for column in ("stage", "metric", "value"):
        table.add_column(column)
    for stage in stages:
        report = json.loads((root / "reports" / f"{stage}.json").read_text())
        table.add_row(stage, "wall_seconds", f"{report['wall_seconds']:.2f}")
        if stage in brief:
            continue
        for key, value in report["metrics"].items():
            table.add_row("", key, f"{value:g}" if isinstance(value, float) else str(value))
    Console().print(table)


def _agents_summary(root: Path) -> None:
    """reports/metrics.json as two short tables: cycles (who trained, W_DA) and agents x key held-out metrics."""
    from assets.evaluate import KEY_METRICS, METRICS_FILE

    path = root / METRICS_FILE
    if not path.is_file():
        return
    doc = json.loads(path.read_text())
    console = Console()
    cycles = Table(title=f"co-evolution (stop: {doc.get('stop_reason')})")
    for column in ("cycle", "trained", "w_da", "arena_adv_success", "grpo_tokens_per_s"):
        cycles.add_column(column, justify="left" if column == "trained" else "right")
    for c in doc["cycles"]:
        tps = c.get("grpo_tokens_per_s")
        cycles.add_row(
            str(c["cycle"]),
            str(c["trained"]),
            f"{c['w_da']:.3f}",
            f"{c['arena_adv_success']:.3f}",
            f"{tps:.0f}" if tps is not None else "-",
        )
    console.print(cycles)

    def order(name: str) -> tuple:  # da0, cycle_1 … cycle_N, others, final
        cycle = int(name.rsplit("_", 1)[1]) if name.startswith("cycle_") else 0
        return (name != "da0", name == "final", not name.startswith("cycle_"), cycle, name)

    names = sorted(doc["agents"], key=order)
    agents = Table(title=f"held-out agents ({doc['n_heldout']} scenarios per opponent, profile {doc['profile']})")
    agents.add_column("metric")
    for name in names:
        agents.add_column(name, justify="right")
    for m in KEY_METRICS:
        agents.add_row(m, *(f"{doc['agents'][n][m]:.3f}" if m in doc["agents"][n] else "-" for n in names))
    console.print(agents)


@app.command()
def run(profile: str = typer.Option(None, help="quick | default | scale | banking77")) -> None:
    """Run the whole pipeline (the Dagster job `main`) and print a summary."""
    root = _prepare(profile)
    stages = _stages()
    from assets import coevolution, evaluate

    _execute(None, load_params(root / "params.yaml").runtime.parallel_stages, root)
    _summary(root, [s.name for s in stages], brief=(*(s.name for s in coevolution.STAGES), evaluate.STAGE.name))
    _agents_summary(root)


@app.command()
def stage(name: str, profile: str = typer.Option(None, help="quick | default | scale | banking77")) -> None:
    """Run one stage (what `dvc repro` calls); it reads its upstream stages' files from disk."""
    root = _prepare(profile)
    known = [s.name for s in _stages()]
    if name not in known:
        fail(f"unknown stage {name!r} (stages: {', '.join(known)})")
    _execute([name])
    _summary(root, [name])


def ui_command(port: int) -> list[str]:
    """`dagster dev` on the code location module, from this interpreter's environment. Not `dg dev`: dg 1.13
    looks for the project's modules under src/ whenever a src/ folder exists (src/sparring is the library), so
    it cannot find `pipelines`; `dg list defs` is unaffected. The -W filter drops dagster's advice to use dg dev."""
    quiet = "ignore:Function `dev_command` is superseded"
    dev = ["dev", "-m", "pipelines.definitions", "-h", "127.0.0.1", "-p", str(port)]
    return [sys.executable, "-W", quiet, "-m", "dagster", *dev]


@app.command()
def ui(port: int = typer.Option(3000, help="port on 127.0.0.1")) -> None:
    """Open the Dagster UI on 127.0.0.1 with the project's instance ($DAGSTER_HOME, else <project>/.dagster)."""
    root = _prepare(None)
    os.chdir(root)
    command = ui_command(port)
    os.execv(command[0], command)


@app.command("dvc-yaml")
def dvc_yaml(
    write: bool = typer.Option(False, "--write", help="rewrite dvc.yaml from the Stage declarations"),
) -> None:
    """Check (or --write) that dvc.yaml matches the stages declared in assets/."""
    from pipelines.stages import render_dvc_yaml

    path = _root() / "dvc.yaml"
    wanted = render_dvc_yaml(_stages())
    if write:
        path.write_text(wanted, encoding="utf-8")
        typer.echo(f"wrote {path}")
    elif not path.is_file() or path.read_text(encoding="utf-8") != wanted:
        fail(f"{path} is out of date with the stages in assets/: run `sparring dvc-yaml --write`", code=1)
    else:
        typer.echo(f"{path} matches the stages in assets/")
