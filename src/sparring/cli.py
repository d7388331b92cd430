"""The library's own commands (no Dagster, no MLflow). The `sparring` console script (pipelines/cli.py) adds
the pipeline commands — run, stage, ui, dvc-yaml — to this app."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml
from rich.console import Console

from sparring.params import ParamsError, load_params

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="sparring: train support agents against "
    "adversarial customers in a simulated banking world, without human labels.",
)
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def load_or_fail(params_file: Path, profile: str | None):
    try:
        return load_params(params_file, profile)
    except ParamsError as exc:
        fail(str(exc))


@app.command()
def params(
    profile: str = typer.Option(
        None, help="quick | default | scale (default: $SPARRING_PROFILE or the file's)"
    ),
    params_file: Path = typer.Option(Path("params.yaml"), "--params", help="the params file"),
) -> None:
    """Validate params.yaml and print the values of one profile."""
    resolved = load_or_fail(params_file, profile)
    typer.echo(yaml.safe_dump(resolved.model_dump(), sort_keys=False))


@app.command()
def ingest(
    out: Path = typer.Option(Path("data/ingest"), help="output folder (replaced atomically)"),
    profile: str = typer.Option(None, help="quick | default | scale"),
    params_file: Path = typer.Option(Path("params.yaml"), "--params", help="the params file"),
) -> None:
    """Run ingestion alone, untracked (to check your own data); `sparring stage ingest` is the tracked stage."""
    from sparring.data.ingest import run_ingest
    from sparring.data.sources import IngestError

    resolved = load_or_fail(params_file, profile)
    try:
        result = run_ingest(resolved, params_file.resolve().parent, out)
    except IngestError as exc:
        fail(str(exc))
    for key, value in result.metrics().items():
        typer.echo(f"{key:>24}  {value}")
