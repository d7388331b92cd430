"""Asset `report`: reports/report.md and the self-contained reports/report.html with their PNG plots, from
reports/metrics.json; shown on the Dagster materialization (markdown with the plots inline) and logged to the
MLflow parent run. The plots are DVC plots too (`dvc plots show` draws them)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from dagster import MetadataValue

from pipelines.kit.project import declared_stages
from pipelines.kit.stages import Stage, StageContext, StageOutput, stage_asset
from pipelines.kit.timings import run_order_times
from sparring.atomic import replace_dir, write_text
from sparring.catalog import FIGURES as FIGURES_DIR
from sparring.catalog import METRICS, REPORT_HTML, REPORT_MD
from sparring.evaluate.figures import FIGURES
from sparring.evaluate.report import build_report, summary_rows, to_markdown

STAGE = Stage(
    name="report",
    description="The end-of-run report: summary table, strict PASS per generation, W_DA, cross-play heatmap, "
    "failure kinds, discovered strategies, simulator fidelity → reports/report.md, reports/report.html.",
    params=(),
    outs=(FIGURES_DIR, REPORT_MD, REPORT_HTML),
    upstream=("evaluate",),
    figures=tuple(f"{FIGURES_DIR}/{name}.png" for name in FIGURES),
    group="evaluation",
    kinds=("matplotlib", "mlflow"),
)


@stage_asset(STAGE)
def report(ctx: StageContext) -> StageOutput:
    data = ctx.catalog
    metrics = json.loads(data.path(METRICS).read_text(encoding="utf-8"))
    if metrics.get("profile") != ctx.params.profile:
        raise ValueError(
            f"{METRICS} is the {metrics.get('profile')!r} profile's; run `evaluate` on {ctx.params.profile!r} first"
        )
    # Every stage's time in run order (dvc.yaml's, the declared order), from the timings kept out of what DVC
    # tracks: evaluate's is known by now, this stage's own is not until it ends.
    order = declared_stages(data.root) or [STAGE.name]
    wall = run_order_times(data.root, order, ctx.params.profile, running=STAGE.name)
    built: dict[str, str] = {}
    replace_dir(data.path(FIGURES_DIR), lambda folder: built.update(_draw(metrics, folder, wall)))  # whole
    write_text(built["markdown"], data.path(REPORT_MD))
    write_text(built["html"], data.path(REPORT_HTML))
    for name in (REPORT_MD, REPORT_HTML):
        ctx.log.parent_artifact(data.path(name), "report")
    ctx.log.parent_artifacts(data.path(FIGURES_DIR), "report/figures")
    rows = summary_rows(metrics)
    table = "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
                      + ["| " + " | ".join(r) + " |" for r in rows[1:]])  # fmt: skip
    return StageOutput(
        metrics={"figures": len(FIGURES), "agents": len(rows) - 1},
        metadata={
            "report": MetadataValue.md(built["inline"]),
            "summary": MetadataValue.md(table),
            "report_html": MetadataValue.path(str(data.path(REPORT_HTML))),
        },
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
