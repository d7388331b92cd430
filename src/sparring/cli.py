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
        None, help="quick | default | scale | banking77 (default: $SPARRING_PROFILE or the file's)"
    ),
    params_file: Path = typer.Option(Path("params.yaml"), "--params", help="the params file"),
) -> None:
    """Validate params.yaml and print the values of one profile."""
    resolved = load_or_fail(params_file, profile)
    typer.echo(yaml.safe_dump(resolved.model_dump(), sort_keys=False))


@app.command()
def ingest(
    out: Path = typer.Option(Path("data/ingest"), help="output folder (replaced atomically)"),
    profile: str = typer.Option(None, help="quick | default | scale | banking77"),
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


@app.command()
def route(
    csv_in: Path = typer.Argument(..., help="a CSV with a `text` column: each row a customer's opening message"),
    checkpoint: Path = typer.Option(Path("models/agent_sft"), help="a trained agent checkpoint folder"),
    out: Path = typer.Option(None, help="where to write the result (default: <input>.routed.csv)"),
    batch_size: int = typer.Option(64, min=1, help="utterances per batched generate"),
    max_new_tokens: int = typer.Option(96, min=8, help="longest agent reply"),
) -> None:
    """Route customer messages with a trained agent: adds the predicted `intent`, `tool` and the agent's `reply`."""
    import polars as pl
    from rich.progress import Progress

    from sparring.atomic import write_csv
    from sparring.data.sources import IngestError, read_text_csv

    try:
        frame = read_text_csv(csv_in)
    except IngestError as exc:
        fail(str(exc))
    policy = _load_agent(checkpoint, max_new_tokens)
    from sparring.evaluate.agent import route_utterances

    texts, rows = frame["text"].to_list(), []
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("routing", total=len(texts))
        for i in range(0, len(texts), batch_size):
            rows += route_utterances(policy, texts[i : i + batch_size])
            progress.advance(task, min(batch_size, len(texts) - i))
    routed = frame.with_columns(
        intent=pl.Series([r["intent"] for r in rows], dtype=pl.String),
        tool=pl.Series([r["tool"] for r in rows], dtype=pl.String),
        reply=pl.Series([r["reply"] for r in rows], dtype=pl.String),
    )
    target = out or csv_in.with_name(csv_in.stem + ".routed.csv")
    write_csv(routed, target)
    found = routed.filter(pl.col("intent").is_not_null()).height
    typer.echo(f"routed {routed.height} rows ({found} with an intent) → {target}")


def _load_agent(checkpoint: Path, max_new_tokens: int):
    """An agent policy from a checkpoint folder, or a clear error naming what is missing."""
    if not (checkpoint / "config.json").is_file():
        fail(f"{checkpoint}: not a model checkpoint (no config.json); train one with `sparring run` first")
    if not (checkpoint / "tokenizer_config.json").is_file():
        fail(f"{checkpoint}: the checkpoint has no tokenizer (tokenizer_config.json)")
    from sparring.agents.policies import LMPolicy
    from sparring.runtime import apply_torch_threads

    apply_torch_threads(1)
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        model = AutoModelForCausalLM.from_pretrained(checkpoint)
    except (OSError, ValueError) as exc:
        fail(f"{checkpoint}: cannot load the checkpoint: {exc}")
    return LMPolicy(model, tokenizer, role="agent", max_new_tokens=max_new_tokens, greedy=True)
