"""The end-of-run report as one run: reports/report.md and the self-contained reports/report.html with their PNG
figures, from evaluate's reports/metrics.json and every stage's wall time; for the Dagster UI the same markdown with
the figures inline, and the summary table."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparring.atomic import replace_dir, write_text
from sparring.catalog import FIGURES as FIGURES_DIR
from sparring.catalog import METRICS, REPORT_HTML, REPORT_MD, REPORTS
from sparring.drivers import StageResult
from sparring.evaluate.figures import FIGURES
from sparring.evaluate.report import build_report, summary_rows, to_markdown


@dataclass
class Inputs:
    metrics: Path  # evaluate's reports/metrics.json
    profile: str  # the run's profile: metrics.json must be its
    wall: dict[str, Any]  # every stage's wall time in run order (None: unknown, "running now": this stage)


def run(inputs: Inputs, settings: None, out_dir: Path, seed: int) -> StageResult:
    """The report drawn into ``out_dir`` (reports/: its figures folder, written whole, report.md and report.html);
    ``settings``: none, the report reads no params section."""
    metrics = json.loads(inputs.metrics.read_text(encoding="utf-8"))
    if metrics.get("profile") != inputs.profile:
        raise ValueError(
            f"{METRICS} is the {metrics.get('profile')!r} profile's; run `evaluate` on {inputs.profile!r} first"
        )
    figures, markdown, html = (
        out_dir / Path(out).relative_to(REPORTS) for out in (FIGURES_DIR, REPORT_MD, REPORT_HTML)
    )
    built: dict[str, str] = {}
    replace_dir(figures, lambda folder: built.update(_draw(metrics, folder, inputs.wall)))  # whole
    write_text(built["markdown"], markdown)
    write_text(built["html"], html)
    rows = summary_rows(metrics)
    table = "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
                      + ["| " + " | ".join(r) + " |" for r in rows[1:]])  # fmt: skip
    return StageResult(
        {"figures": len(FIGURES), "agents": len(rows) - 1},
        shared=[(markdown, "report"), (html, "report"), (figures, "report/figures")],
        shown={"report": built["inline"], "summary": table, "report_html": html},
    )


def _draw(metrics: dict, folder: Path, wall: dict[str, Any] | None = None) -> dict[str, str]:
    """The report as markdown and HTML with its figures drawn into ``folder``, and for Dagster the same markdown
    with the figures inline as data URIs; ``wall``: each stage's wall time, in run order."""
    markdown, page, blocks = build_report(metrics, folder, wall)
    inline = to_markdown(blocks, figures_link="")
    for name in FIGURES:
        data = base64.b64encode((folder / f"{name}.png").read_bytes()).decode()
        inline = inline.replace(f"]({name}.png)", f"](data:image/png;base64,{data})")
    return {"markdown": markdown, "html": page, "inline": inline}
