"""Stage drivers: one module per stage (``drivers/<stage>.py``; every co-evolution cycle is ``coevolution``), each
with the one signature ``run(inputs, settings, out_dir, seed) -> StageResult``:

- ``inputs``: the module's own ``Inputs`` dataclass, everything the stage reads that it does not decide: upstream
  outputs (loaded objects or the paths of checkpoints it loads itself), the scratch folder, and what other params
  sections fix (the model's shape, the judge);
- ``settings``: the stage's own params section (``settings.py``'s type for it);
- ``out_dir``: the folder the driver writes its outputs to, whole (``sparring.atomic.replace_dir``);
- ``seed``: the run's seed.

It returns what it measured and what the tracker should keep (:class:`StageResult`). The one layer above
``train/`` and ``evaluate/`` where a before/after measurement lives; no Dagster, no MLflow: an asset resolves the
inputs from the Catalog, calls ``run`` and the stage kit records the result; a benchmark calls the same function."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparring.timing import Phases


@dataclass
class ChildRun:
    """A run nested under the stage's in the tracker (peer_rl: one per member)."""

    series: list[dict[str, float]] = field(default_factory=list)  # step-indexed rows, each with its "step"
    metrics: dict[str, float] = field(default_factory=dict)  # logged once, at step 0


@dataclass
class StageResult:
    """What a stage's driver returns: its figures, and what its asset hands the tracker (the outputs themselves
    the driver has written)."""

    metrics: dict[str, float]  # reports/<stage>.json's metrics, logged to the tracker, shown in the Dagster UI
    report: dict[str, Any] = field(default_factory=dict)  # the rest of reports/<stage>.json
    phases: Phases | None = None  # its timed phases: the report's "phases" (moved to reports/timings/)
    checkpoints: dict[str, Path] = field(default_factory=dict)  # model folders it wrote, by name ("": the stage's)
    curves: list[dict[str, Any]] = field(default_factory=list)  # a trainer's log history (loss, lr, ... by step)
    series: list[dict[str, float]] = field(default_factory=list)  # metrics by step (each row's "step")
    trajectory: list[tuple[str, float, int]] = field(default_factory=list)  # (name, value, step) on the pipeline's run
    children: dict[str, ChildRun] = field(default_factory=dict)  # nested runs by name
    json_artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)  # by file name
    files: list[Path] = field(default_factory=list)  # files logged as artifacts as they are
    shared: list[tuple[Path, str]] = field(default_factory=list)  # (file or folder, artifact folder) on the pipeline's
    # what the Dagster UI shows beside the metrics, by name: markdown (str), a path, or a JSON object (dict, list)
    shown: dict[str, str | Path | dict[str, Any] | list[Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # said in the Dagster run's log as warnings

    def full_report(self) -> dict[str, Any]:
        """reports/<stage>.json's body besides its metrics: the report, with the phases when timed."""
        return {**self.report, **({"phases": self.phases.as_dict()} if self.phases is not None else {})}
