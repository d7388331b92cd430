"""Asset `report`: reports/report.md and the self-contained reports/report.html with their PNG plots, from
reports/metrics.json; shown on the Dagster materialization (markdown with the plots inline) and logged to the
MLflow parent run. The plots are DVC plots too (`dvc plots show` draws them)."""

from __future__ import annotations

from sparring.catalog import FIGURES as FIGURES_DIR
from sparring.catalog import METRICS, REPORT_HTML, REPORT_MD, REPORTS
from sparring.drivers import StageResult
from sparring.drivers.report import Inputs, run
from sparring.evaluate.figures import FIGURES
from stagekit.project import declared_stages
from stagekit.stages import Stage, StageContext, stage_asset
from stagekit.timings import run_order_times

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
def report(ctx: StageContext) -> StageResult:
    data, p = ctx.catalog, ctx.params
    inputs = Inputs(
        metrics=data.path(METRICS),
        profile=p.profile,
        # every stage's time in run order (dvc.yaml's, the declared order), from the timings kept out of what DVC
        # tracks: evaluate's is known by now, this stage's own is not until it ends
        wall=run_order_times(data.root, declared_stages(data.root) or [STAGE.name], p.profile, running=STAGE.name),
    )
    return run(inputs, None, data.path(REPORTS), p.seed)  # the report reads no params section: no settings
