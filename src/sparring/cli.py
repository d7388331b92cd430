"""The library's own commands (no Dagster, no MLflow). The `sparring` console script (pipelines/cli.py) adds
the pipeline commands — run, stage, ui, dvc-yaml — to this app."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
import yaml
from rich.console import Console

from sparring.params import PROFILES, ParamsError, load_params

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="sparring: train support agents against "
    "adversarial customers in a simulated banking world, without human labels.",
)
err = Console(stderr=True)


def _print_version(wanted: bool) -> None:
    if wanted:
        from sparring.runtime import sparring_version

        typer.echo(f"sparring {sparring_version()}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="print the version (and commit) and exit"
    ),
) -> None:
    pass


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
    profile: str = typer.Option(None, help=f"{' | '.join(PROFILES)} (default: $SPARRING_PROFILE or the file's)"),
    params_file: Path = typer.Option(Path("params.yaml"), "--params", help="the params file"),
) -> None:
    """Validate params.yaml and print the values of one profile."""
    resolved = load_or_fail(params_file, profile)
    typer.echo(yaml.safe_dump(resolved.model_dump(), sort_keys=False))


@app.command()
def domain(
    file: Path = typer.Argument(..., help="a domain file (YAML), or a packaged domain's name: banking"),
) -> None:
    """Check a domain file: its keys, types and every reference between its sections; print what it holds."""
    from sparring.domains import DomainError, load_domain

    try:
        loaded = load_domain(file)
    except DomainError as exc:
        fail(str(exc))
    acts = sum(len(t.actions) or 1 for t in loaded.tools.values())
    typer.echo(
        f"{loaded.path}: domain {loaded.name!r} is valid: {len(loaded.tools)} tools ({acts} operations), "
        f"{len(loaded.intents)} intents, {len(loaded.targets)} object kinds, {len(loaded.personas)} personas, "
        f"{len(loaded.policy)} policy answers"
    )


@app.command()
def ingest(
    out: Path = typer.Option(
        Path("data/ingest"), help="output folder: new, empty, or an earlier `sparring ingest` output (replaced whole)"
    ),
    profile: str = typer.Option(None, help=" | ".join(PROFILES)),
    params_file: Path = typer.Option(Path("params.yaml"), "--params", help="the params file"),
) -> None:
    """Run ingestion alone, untracked (to check your own data); `sparring stage ingest` is the tracked stage."""
    from sparring.atomic import OutputRefused
    from sparring.data.sources import IngestError
    from sparring.drivers.ingest import Inputs, run

    resolved = load_or_fail(params_file, profile)
    try:
        result = run(Inputs(root=params_file.resolve().parent), resolved.ingest, out, resolved.seed)
    except (IngestError, OutputRefused) as exc:
        fail(str(exc))
    except OSError as exc:  # reading a source, or writing into the folder
        fail(f"{exc.filename or out}: {exc.strerror or exc}")
    for key, value in result.metrics.items():
        typer.echo(f"{key:>24}  {value}")


ROUTED_COLUMNS = ("intent", "tool", "reply")  # what `route` appends: a CSV ending with them is its own output


def _check_route_target(target: Path, csv_in: Path) -> None:
    """Refuse, before any work, a --out that would destroy what sparring did not write or cannot be written."""
    if target.resolve() == csv_in.resolve():
        fail(f"{target}: is the input file; choose another --out")
    if target.is_dir():
        fail(f"{target}: is a folder; --out names the CSV file to write")
    if target.exists():
        with target.open("rb") as f:
            header = f.readline().decode("utf-8", "replace").strip().split(",")
        if tuple(header[-3:]) != ROUTED_COLUMNS:
            fail(f"{target}: exists and is not a CSV `sparring route` wrote; choose another --out or remove it")
    parent = target.absolute().parent
    while not parent.exists():
        parent = parent.parent
    try:  # a probe file (deleted at once) where the output's folder would be made
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError:
        fail(f"{target}: cannot write there ({parent} is not a writable folder)")


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

    from sparring.atomic import OutputRefused, write_csv
    from sparring.data.sources import IngestError, read_text_csv

    try:
        frame = read_text_csv(csv_in)
    except IngestError as exc:
        fail(str(exc))
    target = out or csv_in.with_name(csv_in.stem + ".routed.csv")
    _check_route_target(target, csv_in)
    policy = _load_agent(checkpoint, max_new_tokens)
    from sparring.rollout import route_utterances

    texts, rows = frame["text"].to_list(), []
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("routing", total=len(texts))
        for i in range(0, len(texts), batch_size):
            rows += route_utterances(policy, texts[i : i + batch_size])
            progress.advance(task, min(batch_size, len(texts) - i))
    routed = frame.with_columns(**{c: pl.Series([r[c] for r in rows], dtype=pl.String) for c in ROUTED_COLUMNS})
    try:
        write_csv(routed, target)
    except OutputRefused as exc:
        fail(str(exc))
    found = routed.filter(pl.col("intent").is_not_null()).height
    typer.echo(f"routed {routed.height} rows ({found} with an intent) → {target}")


def _load_agent(checkpoint: Path, max_new_tokens: int):
    """An agent policy from a checkpoint folder (safetensors only), or one line naming the file at fault."""
    from sparring.lm.checkpoints import CheckpointError, check_checkpoint, load_checkpoint

    try:
        check_checkpoint(checkpoint)
    except CheckpointError as exc:
        fail(str(exc))
    from sparring.lm.policies import LMPolicy
    from sparring.runtime import apply_torch_threads

    apply_torch_threads(1)
    try:
        with _no_progress_bars():  # transformers' "Loading weights" bar is not the command's output
            model, tokenizer = load_checkpoint(checkpoint)
    except CheckpointError as exc:
        fail(str(exc))
    return LMPolicy(model, tokenizer, role="agent", max_new_tokens=max_new_tokens, greedy=True)


@app.command()
def chat(
    checkpoint: Path = typer.Option(Path("models/agent_sft"), help="a trained agent checkpoint folder"),
    scenario: str = typer.Option(None, help="id of the scenario to play (default: the first of --scenarios)"),
    scenarios: Path = typer.Option(
        Path("data/scenarios/heldout.jsonl"), help="scenarios to choose from (absent: generated ones, fixed seed)"
    ),
    judge: Path = typer.Option(Path("models/judge"), help="a trained judge folder (absent: the world's verdict alone)"),
    max_turns: int = typer.Option(10, min=1, help="rounds (your message and the agent's answer) before it stops"),
    max_calls_per_turn: int = typer.Option(3, min=1, help="tool calls the agent makes before you speak again"),
    max_new_tokens: int = typer.Option(96, min=8, help="longest agent message"),
    profile: str = typer.Option(None, help="the profile of the judge's settings in --params"),
    params_file: Path = typer.Option(Path("params.yaml"), "--params", help="the params file (the judge's settings)"),
    show_tags: bool = typer.Option(False, help="also show each agent message's <intent> tag and format faults"),
) -> None:
    """Talk to a trained agent as the customer: its tool calls, the world's answers and changes as they happen,
    the verdict at the end. Reads stdin, so piped lines script it; /end or end of input leaves."""
    import sys

    from sparring.evaluate.chat_session import ChatError, choose_scenario, play_chat

    try:
        chosen, source = choose_scenario(scenarios, scenario)
    except ChatError as exc:
        fail(str(exc))
    with _no_progress_bars():  # "Loading weights" bars, the judge's encoder's too, would land in the transcript
        policy = _load_agent(checkpoint, max_new_tokens)
        scorer = _chat_judge(judge, params_file, profile)
        play_chat(
            policy,
            chosen,
            sys.stdin,
            Console(highlight=False),
            max_turns=max_turns,
            max_calls_per_turn=max_calls_per_turn,
            judge=scorer,
            source=source,
            show_tags=show_tags,
        )


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers' progress bars off for the block (as they were after it)."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def _chat_judge(judge_dir: Path, params_file: Path, profile: str | None):
    """The judge under ``judge_dir`` with --params' settings (the defaults without that file), or None when
    there is no such folder; a folder that does not load is one line naming it."""
    if not judge_dir.exists():
        return None
    from sparring.catalog import load_judge
    from sparring.params import Judge as JudgeParams

    if params_file.is_file():
        resolved = load_or_fail(params_file, profile)
        cfg, turns = resolved.judge, resolved.coevolution.agent_grpo.max_turns  # its turns part as in training
    else:
        cfg, turns = JudgeParams(), 6
    try:
        return load_judge(judge_dir, cfg, turns)
    except Exception as exc:  # the oracle's and discriminator's loaders raise many types for a bad folder
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        fail(f"{judge_dir}: cannot load the judge: {first}")
