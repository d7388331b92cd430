"""Asset `report`: reports/report.md and the self-contained reports/report.html with their PNG plots, from
reports/metrics.json; shown on the Dagster materialization (markdown with the plots inline) and logged to the
MLflow parent run. The plots are DVC plots too (`dvc plots show` draws them)."""

from __future__ import annotations

import base64
import json

from dagster import MetadataValue

from pipelines.stages import Stage, StageContext, StageOutput, stage_asset
from sparring.atomic import replace_dir, write_text
from sparring.evaluate.figures import FIGURES
from sparring.evaluate.report import build_report, summary_rows, to_markdown

FIGURES_DIR = "reports/figures"
STAGE = Stage(
    name="report",
    description="The end-of-run report: summary table, strict PASS per generation, W_DA, cross-play heatmap, "
    "failure kinds, discovered strategies, simulator fidelity → reports/report.md, reports/report.html.",
    params=(),
    deps=(
        "src/sparring/evaluate/report.py",
        "src/sparring/evaluate/figures.py",
        "src/sparring/evaluate/crossplay.py",  # FAILURE_KINDS: the failure table's columns
        "assets/report.py",
    ),
    outs=(FIGURES_DIR, "reports/report.md", "reports/report.html"),
    upstream=("evaluate",),
    figures=tuple(f"{FIGURES_DIR}/{name}.png" for name in FIGURES),
    group="evaluation",
    kinds=("matplotlib", "mlflow"),
)


@stage_asset(STAGE)
def report(ctx: StageContext) -> StageOutput:
    root = ctx.root
    metrics = json.loads((root / "reports" / "metrics.json").read_text(encoding="utf-8"))
    if metrics.get("profile") != ctx.params.profile:
        raise ValueError(
            f"reports/metrics.json is the {metrics.get('profile')!r} profile's; run `evaluate` on "
            f"{ctx.params.profile!r} first"
        )
    built: dict[str, str] = {}

    def draw(folder):  # the whole figures folder is swapped in at once
        markdown, page, blocks = build_report(metrics, folder)
        inline = to_markdown(blocks, figures_link="")  # for Dagster: the same report, its plots as data URIs
        for name in FIGURES:
            data = base64.b64encode((folder / f"{name}.png").read_bytes()).decode()
            inline = inline.replace(f"]({name}.png)", f"](data:image/png;base64,{data})")
        built.update(markdown=markdown, html=page, inline=inline)

    replace_dir(root / FIGURES_DIR, draw)
    write_text(built["markdown"], root / "reports" / "report.md")
    write_text(built["html"], root / "reports" / "report.html")
    for name in ("report.md", "report.html"):
        ctx.log.parent_artifact(root / "reports" / name, "report")
    ctx.log.parent_artifacts(root / FIGURES_DIR, "report/figures")
    rows = summary_rows(metrics)
    table = "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
                      + ["| " + " | ".join(r) + " |" for r in rows[1:]])  # fmt: skip
    return StageOutput(
        metrics={"figures": len(FIGURES), "agents": len(rows) - 1},
        metadata={
            "report": MetadataValue.md(built["inline"]),
            "summary": MetadataValue.md(table),
            "report_html": MetadataValue.path(str(root / "reports" / "report.html")),
        },
    )
