"""The tables `sparring run` and `sparring stage` print when they end: each stage's wall time and metrics, and
reports/metrics.json's cycles and held-out agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def stage_summary(root: Path, stages: list[Any], headline_only: bool = False) -> None:
    """Each stage's wall time and metrics (with ``headline_only``, its headline metrics: the rest are in
    reports/<stage>.json)."""
    title = "sparring — stage summary" + (" (headline metrics; all of them in reports/<stage>.json)" * headline_only)
    table = Table(title=title, show_lines=False)
    for column in ("stage", "metric", "value"):
        table.add_column(column)
    from stagekit.timings import read_timings

    for stage in stages:
        report = json.loads((root / stage.report).read_text())
        timed = read_timings(root, stage.name, report.get("profile", "")) or {}  # beside the report, not in it
        seconds = timed.get("wall_seconds")
        table.add_row(stage.name, "wall_seconds", f"{seconds:.2f}" if isinstance(seconds, int | float) else "?")
        metrics = {**report["metrics"], **timed.get("metrics", {})}
        keys = stage.headline_metrics if headline_only else metrics
        for key in (k for k in keys if k in metrics):
            value = metrics[key]
            table.add_row("", key, f"{value:g}" if isinstance(value, float) else str(value))
    Console().print(table)


QUICK_NOTE = (
    "profile quick: its models are too small to learn anything, so zeros are expected here; it checks that the "
    "pipeline runs end to end (`--profile default` for real figures)"
)


def agents_summary(root: Path) -> None:
    """reports/metrics.json as two short tables: cycles (who trained, W_DA) and agents x key held-out metrics."""
    from sparring.catalog import METRICS

    path = root / METRICS
    if not path.is_file():
        return
    doc = json.loads(path.read_text())
    note = QUICK_NOTE if doc.get("profile") == "quick" else None
    console = Console()
    cycles = Table(title=f"co-evolution (stop: {doc.get('stop_reason')})")
    for column in ("cycle", "trained", "w_da", "arena_adv_success", "grpo_tokens_per_s"):
        cycles.add_column(column, justify="left" if column == "trained" else "right")
    from stagekit.timings import read_timings

    # The cycles' rates are timings: evaluate keeps them beside metrics.json, in the cycles' order.
    timed = ((read_timings(root, "evaluate", doc.get("profile", "")) or {}).get("timings") or {}).get("metrics_json")
    rates = (timed or {}).get("cycles") or []
    for k, c in enumerate(doc["cycles"]):
        tps = c.get("grpo_tokens_per_s", rates[k].get("grpo_tokens_per_s") if k < len(rates) else None)
        cycles.add_row(
            str(c["cycle"]),
            str(c["trained"]),
            f"{c['w_da']:.3f}",
            f"{c['arena_adv_success']:.3f}",
            f"{tps:.0f}" if tps is not None else "-",
        )
    console.print(cycles)

    from sparring.evaluate.report import gain_rows, rl_verdict, summary_rows

    draws = doc.get("draws", 1)
    per = f"{doc['n_heldout']} scenarios per opponent, {draws} customer draws each, profile {doc['profile']}"
    for title, (header, *rows), caption in (
        (f"held-out agents ({per})", summary_rows(doc), note),
        ("paired gains of strict PASS [95% interval over scenarios and draws]", gain_rows(doc), rl_verdict(doc)),
    ):
        if not rows:
            continue
        table = Table(title=title, caption=caption)
        for i, column in enumerate(header):
            table.add_column(column or "pair", justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    from sparring.catalog import REPORT_HTML, REPORT_MD

    if (root / REPORT_HTML).is_file():
        console.print(f"report: {REPORT_HTML} (and {REPORT_MD})", highlight=False)
