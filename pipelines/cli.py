"""The `sparring` console script: the library's commands plus the pipeline's (run, stage, ui, dvc-yaml)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from pipelines.summary import agents_summary, stage_summary
from sparring.cli import app, fail
from sparring.params import PROFILE_ENV, PROFILE_GUIDE, PROFILES, ParamsError, load_params
from sparring.runtime import project_root

# Dagster's console logger: a failed step's stack trace is Dagster's to keep (its run log, the UI); the terminal
# gets one line per failure from `_failures`, unless --verbose.
LOG_LEVEL = {True: "INFO", False: "CRITICAL"}
# What a user's input or files can raise inside a stage: reported as their message alone, no class, no traceback.
USER_ERRORS = ("IngestError", "ParamsError", "CheckpointError", "OutputRefused")
# Set unless --verbose, before the trainers' libraries are imported: no progress bars, no advisory warnings.
QUIET_ENV = {
    "TQDM_DISABLE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}
INTERRUPTED = 130  # the exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it
VERBOSE_OPTION = typer.Option(False, "--verbose", "-v", help="show trainer output (TRL logs, progress bars, warnings)")


def _root() -> Path:
    try:
        return project_root()
    except FileNotFoundError as exc:
        fail(str(exc))


def _prepare(profile: str | None, verbose: bool = False) -> Path:
    from stagekit.resources import VERBOSE_ENV, ensure_dagster_home

    root = _root()
    if profile:
        os.environ[PROFILE_ENV] = profile
    os.environ[VERBOSE_ENV] = "1" if verbose else "0"
    if not verbose:
        for key, value in QUIET_ENV.items():
            os.environ.setdefault(key, value)
    try:  # fail fast, before Dagster starts, on a bad params file; a bad --profile is named as the flag
        load_params(root / "params.yaml", profile)
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


def _check_outputs(root: Path, stages: list[Any]) -> None:
    """Every stage's output folders checked before the run starts, not when that stage ends, maybe an hour in."""
    from sparring.atomic import OutputRefused
    from stagekit.stages import check_outputs

    try:
        for stage in stages:
            check_outputs(stage, root)
    except OutputRefused as exc:
        fail(str(exc))


def _run_config(verbose: bool) -> dict:
    return {"loggers": {"console": {"config": {"log_level": LOG_LEVEL[verbose]}}}}


def _execute(
    job: Any = None, parallel: int = 1, root: Path | None = None, verbose: bool = False, experiment: str = ""
) -> None:
    """Materialize a job (the whole pipeline's `main` if None) against the project's Dagster instance: in this
    process, one stage at a time, or with ``parallel`` > 1 on Dagster's multiprocess executor, which runs up to
    that many stages whose inputs are ready (simulator_sft beside agent_sft), each in its own process. First it
    closes what killed runs left open; after, what this one left (interrupted), in MLflow's ``experiment`` too."""
    from dagster import DagsterInstance, execute_job, reconstructable
    from dagster._utils.interrupts import capture_interrupts

    from pipelines.closing import owner_tags
    from stagekit.resources import MlflowTracking

    config, root, owner = _run_config(verbose), root or _root(), owner_tags()
    tracking, result = MlflowTracking(root=str(root)), None
    with DagsterInstance.get() as instance:
        _close_runs(instance, tracking, experiment)
        try:
            if parallel > 1:
                from pipelines.definitions import main_job_def

                # The stage processes get the project and profile in their config, not from the environment.
                project = {"root": str(root), "profile": os.environ.get(PROFILE_ENV, "")}
                # forkserver with the pipeline preloaded: a stage process starts in ~1 s instead of importing
                # torch, transformers and Dagster afresh (spawn: ~10 s a stage on 2 cores).
                start = {"forkserver": {"preload_modules": ["pipelines.definitions"]}}
                execution = {"multiprocess": {"max_concurrent": parallel, "start_method": start}}
                config.update(execution={"config": execution}, resources={"project": {"config": project}})
                job_def = reconstructable(main_job_def)
                result = execute_job(job_def, instance, run_config=config, tags=owner, raise_on_error=False)
            else:
                if job is None:
                    from pipelines.definitions import defs

                    job = defs.resolve_job_def("main")
                result = job.execute_in_process(instance=instance, run_config=config, tags=owner, raise_on_error=False)
        except KeyboardInterrupt:  # Ctrl-C outside a stage (Dagster starting or ending the run)
            pass
        finally:
            with capture_interrupts():  # a second Ctrl-C must not leave this run's runs open
                _close_runs(instance, tracking, experiment, owner)
    if result is None:
        fail("interrupted", code=INTERRUPTED)
    if not result.success:
        lines, stopped = _failures(result)
        if stopped and len(stopped) == len(lines):  # only interrupted stages: one line, and the shell's exit code
            fail(f"stage{'s' * (len(stopped) > 1)} {', '.join(stopped)}: interrupted", code=INTERRUPTED)
        fail("\n".join(lines) or "the run failed (see the Dagster run log)", code=1)


def _close_runs(instance: Any, tracking: Any, experiment: str, owner: dict[str, str] | None = None) -> None:
    """Before a run (``owner`` None): close the runs killed commands left open, and say so. After it: close what
    this command's run left open (only an interrupted run leaves any)."""
    from pipelines.closing import close_own_runs, close_stale_runs, describe
    from stagekit.progress import say

    if owner is None:
        closed = describe(*close_stale_runs(instance, tracking, experiment))
        if closed:
            say(f"sparring: runs left open by a killed run, closed: {closed}")
        return
    closed = describe(*close_own_runs(instance, tracking, experiment, owner))
    if closed:
        say(f"sparring: this run was interrupted; closed {closed}")


def _failures(result: Any) -> tuple[list[str], list[str]]:
    """One line per failed stage: a user's error as its own message; anything else with its type and a hint.
    Also the stages among them that were interrupted (Ctrl-C or SIGTERM)."""
    lines, stopped = [], []
    for event in (e for e in result.all_events if e.is_step_failure):
        error = event.step_failure_data.error
        while error is not None and error.cause is not None:  # the user's exception, not Dagster's wrapper
            error = error.cause
        if error is None:
            lines.append(f"stage {event.step_key}: failed")
            continue
        message, kind = error.message.strip(), error.cls_name or ""
        prefix = message.split(":", 1)[0]
        if kind in ("DagsterExecutionInterruptedError", "KeyboardInterrupt"):  # Ctrl-C or a SIGTERM: no bug to trace
            lines.append(f"stage {event.step_key}: interrupted")
            stopped.append(event.step_key)
        elif kind in USER_ERRORS and prefix.endswith(kind):
            lines.append(message[len(prefix) + 1 :].strip())
        else:
            hint = f"`sparring stage {event.step_key} --verbose` prints the traceback"
            lines.append(f"stage {event.step_key} failed: {message} ({hint})")
    return lines, stopped


def run_timing(root: Path, stages: list[Any], profile: str, took: float, parallel: int = 1) -> dict[str, Any]:
    """The run's timing, as reports/timings/run.json records it: the wall time the command measured, every stage's
    (from reports/timings/<stage>.json), and the critical path, scheduled on ``parallel`` slots as the executor runs
    them, so a stage that waited for a free process is on it (``waits``)."""
    from stagekit.progress import previous_seconds, scheduled_path

    seconds = {s.name: previous_seconds(root, s.name, profile) for s in stages}
    known = {s.name: seconds[s.name] for s in stages if seconds[s.name] is not None}
    path = scheduled_path([s for s in stages if s.name in known], known, parallel)
    timing = {"profile": profile, "wall_seconds": round(took, 3), "parallel_stages": parallel}
    return {
        **timing,
        "stage_wall_seconds": known,
        "critical_path": {**path._asdict(), "seconds": round(path.seconds, 3)},
    }


def critical_line(timing: dict[str, Any]) -> str:
    """:func:`run_timing`'s critical path, a slot wait marked ⇢, beside the run's wall time: what is left between
    them is start-up and Dagster's own scheduling."""
    path = timing["critical_path"]
    chain = "".join((" ⇢ " if name in path["waits"] else " → ") + name for name in path["stages"])[3:]
    waited = f", slot waits before {', '.join(path['waits'])}" if path["waits"] else ""
    took = timing["wall_seconds"]
    return f"sparring run: critical path {chain}: {path['seconds']:.1f} s of the run's {took:.1f} s{waited}"


def _tell_dvc(root: Path, ran: str) -> None:
    """After a successful run, record what it made in dvc.lock (`dvc commit`), so `dvc repro` has nothing to do;
    only when the run's profile is params.yaml's, the profile DVC records."""
    from stagekit.progress import say
    from stagekit.project import dvc_commit, file_profile, is_dvc_repo

    if not is_dvc_repo(root):
        return
    if ran != file_profile(root):
        say(f"dvc.lock not updated: this run's profile is {ran}, params.yaml's (what DVC records) {file_profile(root)}")
        return
    ok, last = dvc_commit(root)
    say("dvc.lock now records this run's outputs: `dvc repro` finds them up to date" if ok else f"dvc commit: {last}")


def profiles_help() -> str:
    """Each profile, what it is and how long a whole run of it takes on 2 cores: one paragraph each."""
    return "\n\n".join(f"{name}: {what}. On 2 cores: {took}." for name, (what, took) in PROFILE_GUIDE.items())


def estimate_line(root: Path, stages: list[Any], profile: str, parallel: int) -> str:
    """How long the run should take: from the stages' last times here, else from a measured run (PROFILE_GUIDE)."""
    from stagekit.progress import run_estimate

    found = run_estimate(root, stages, profile, parallel)
    return found or f"no stage times here yet; a whole run on 2 cores: {PROFILE_GUIDE[profile][1]}"


RUN_HELP = f"""Run the whole pipeline (the Dagster job `main`) and print a summary.

Profiles (--profile; default: $SPARRING_PROFILE, else params.yaml's `profile:`):

{profiles_help()}"""


@app.command(help=RUN_HELP)
def run(
    profile: str = typer.Option(None, help=" | ".join(PROFILES) + " (see above)"),
    verbose: bool = VERBOSE_OPTION,
) -> None:
    from sparring.atomic import write_json
    from stagekit.progress import say
    from stagekit.timings import RUN_TIMINGS

    root = _prepare(profile, verbose)
    began, params = time.perf_counter(), load_params(root / "params.yaml")
    stages, parallel = _stages(), params.runtime.parallel_stages
    _check_outputs(root, stages)
    say(f"sparring run: {len(stages)} stages, profile {params.profile}, domain {params.domain}, {parallel} at a time")
    say(f"sparring run: stages {', '.join(s.name for s in stages)}")
    say(f"sparring run: {estimate_line(root, stages, params.profile, parallel)}")
    _execute(None, parallel, root, verbose, params.tracking.experiment)
    took = time.perf_counter() - began
    say(f"sparring run: finished in {took:.1f} s")
    _tell_dvc(root, params.profile)
    stage_summary(root, stages, headline_only=True)
    agents_summary(root)
    timing = run_timing(root, stages, params.profile, took, parallel)
    write_json(timing, root / RUN_TIMINGS)  # the one record of the run's timing
    say(critical_line(timing))


class _StageCommand(TyperCommand):
    """`sparring stage --help` lists the stages, read from dvc.yaml only when help is asked for."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from stagekit.project import declared_stages

        try:
            names = list(declared_stages(project_root()))
        except FileNotFoundError:  # outside a project: the stages of the checkout this code comes from
            names = list(declared_stages(Path(__file__).resolve().parents[1]))
        if names and "Stages" not in (self.help or ""):
            self.help = f"{self.help}\n\nStages, in run order: {', '.join(names)}."
        super().format_help(ctx, formatter)


@app.command(cls=_StageCommand)
def stage(
    name: str = typer.Argument(..., help="the stage to run (listed above)"),
    profile: str = typer.Option(None, help=" | ".join(PROFILES)),
    verbose: bool = VERBOSE_OPTION,
) -> None:
    """Run one stage (what `dvc repro` calls); it reads its upstream stages' files from disk."""
    run_stage(name, profile, verbose)


def run_stage(name: str, profile: str | None = None, verbose: bool = False, check_upstream: bool = True) -> None:
    """`sparring stage NAME`. Without ``check_upstream`` a stage whose optional inputs are absent still runs:
    benchmarks/coevolution_acceptance.py's `evaluate` from a shared warm start, with no peer cohort."""
    from stagekit.project import declared_stages, dvc_profile_conflict, missing_upstream

    root = _prepare(profile, verbose)
    via = "--profile" if profile else PROFILE_ENV
    conflict = dvc_profile_conflict(root, profile or os.environ.get(PROFILE_ENV), via)
    if conflict:
        fail(f"stage {name}: {conflict}")
    missing = missing_upstream(root, name) if check_upstream else None
    if missing:
        fail(missing)
    from pipelines.stage_job import stage_definitions

    try:
        found = stage_definitions(name)
    except ParamsError as exc:
        fail(str(exc))
    if found is None:
        known = list(declared_stages(root)) or [s.name for s in _stages()]
        fail(f"unknown stage {name!r} (stages: {', '.join(known)})")
    _check_outputs(root, [found[0]])
    experiment = load_params(root / "params.yaml").tracking.experiment
    _execute(found[1].resolve_job_def("main"), root=root, verbose=verbose, experiment=experiment)
    stage_summary(root, [found[0]])


def ui_command(port: int) -> list[str]:
    """`dagster dev` on the code location module, from this interpreter's environment. Not `dg dev`: dg 1.13
    looks for the project's modules under src/ whenever a src/ folder exists (src/sparring is the library), so
    it cannot find `pipelines`; `dg list defs` is unaffected. The -W filter drops dagster's advice to use dg dev."""
    quiet = "ignore:Function `dev_command` is superseded"
    dev = ["dev", "-m", "pipelines.definitions", "-h", "127.0.0.1", "-p", str(port)]
    return [sys.executable, "-W", quiet, "-m", "dagster", *dev]


def port_in_use(port: int, host: str = "127.0.0.1") -> str | None:
    """Why the webserver could not listen on ``host:port`` (None when it can): bound as it binds (SO_REUSEADDR,
    so a port a closed server left in TIME_WAIT is free, as it is to the webserver), then released."""
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


@app.command()
def ui(port: int = typer.Option(3000, min=1, max=65535, help="port on 127.0.0.1")) -> None:
    """Open the Dagster UI on 127.0.0.1 with the project's instance ($DAGSTER_HOME, else <project>/.dagster)."""
    busy = port_in_use(port)
    if busy:  # dagster dev would say it serves, fail to bind, and keep running with nothing served
        fail(f"127.0.0.1:{port}: {busy.lower()}; choose another port with --port")
    root = _prepare(None, verbose=True)  # the UI's runs keep the trainers' output in their compute logs
    os.chdir(root)
    command = ui_command(port)
    os.execv(command[0], command)


@app.command("dvc-yaml")
def dvc_yaml(
    write: bool = typer.Option(False, "--write", help="rewrite dvc.yaml from the Stage declarations"),
) -> None:
    """Check (or --write) that dvc.yaml matches the stages declared in assets/."""
    from stagekit.stages import render_dvc_yaml

    path = _root() / "dvc.yaml"
    wanted = render_dvc_yaml(_stages())
    if write:
        path.write_text(wanted, encoding="utf-8")
        typer.echo(f"wrote {path}")
    elif not path.is_file() or path.read_text(encoding="utf-8") != wanted:
        fail(f"{path} is out of date with the stages in assets/: run `sparring dvc-yaml --write`", code=1)
    else:
        typer.echo(f"{path} matches the stages in assets/")
