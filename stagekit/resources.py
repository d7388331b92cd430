"""Dagster resources: where the project and its params are, and MLflow tracking.

The library under src/sparring knows neither Dagster nor MLflow; these resources are the only place the
pipeline touches them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from dagster import ConfigurableResource, DagsterExecutionInterruptedError
from dagster._utils.interrupts import capture_interrupts  # defers SIGINT/SIGTERM in the main thread (Dagster's own)

from sparring.params import Params, load_params
from sparring.runtime import apply_torch_threads, git_commit, project_root
from stagekit.compute_logs import DAGSTER_YAML_BLOCK

# What a SIGINT or SIGTERM raises in a stage (Dagster maps SIGTERM to its SIGINT handling): its runs end KILLED.
INTERRUPTS = (KeyboardInterrupt, DagsterExecutionInterruptedError)
VERBOSE_ENV = "SPARRING_VERBOSE"  # "1": trainer output (TRL's dicts, tqdm bars, HF warnings) goes to the terminal


class ProjectResource(ConfigurableResource):
    """The project folder and its validated params. Empty fields mean: $SPARRING_ROOT / the folder holding
    params.yaml, and $SPARRING_PROFILE / the file's `profile` key. Set `profile` in the launchpad to run
    another profile from the UI."""

    root: str = ""
    profile: str = ""

    def path(self) -> Path:
        return Path(self.root).resolve() if self.root else project_root()

    def params(self) -> Params:
        """Load params and apply the thread policy: every stage starts here, so this is 'start-up'. A stage whose
        code has not imported torch (ingest, scenarios) does not pay seconds to import it here: the thread count
        goes into the environment, which torch reads when it is imported (as apply_torch_threads does first)."""
        params = load_params(self.path() / "params.yaml", self.profile or None)
        threads = params.runtime.torch_threads
        if "torch" in sys.modules:
            apply_torch_threads(threads)
        elif threads > 0:
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                os.environ[var] = str(threads)
        return params


# MLflow 3 files an experiment as model training (runs table) or GenAI (traces) by this tag; one without it opens
# on the empty Traces page in UIs that read it. MLflow 3.17's UI decides by its GenAI / Model training switch
# instead (remembered by the browser, or `?workflowType=machine_learning` in the experiment's URL).
TRAINING_EXPERIMENT = ("mlflow.experimentKind", "custom_model_development")


KIND_TAG = "sparring.kind"  # "pipeline" on the parent run of a pipeline execution (closing.py settles it)


@lru_cache(maxsize=1)
def _code_commit() -> str | None:
    import sparring

    return git_commit(Path(sparring.__file__).resolve().parent)  # the checkout the running code comes from


def source_tags(params: Params) -> dict[str, str]:
    """What tells runs of different code or params apart, on every run: the commit (MLflow's Source column, with
    ``sparring.git_commit`` saying ``-dirty`` when the checkout had changes) and a digest of the resolved params."""
    resolved = json.dumps(params.model_dump(mode="json"), sort_keys=True).encode()
    tags = {"sparring.params_digest": hashlib.sha256(resolved).hexdigest()[:12], "mlflow.source.name": "sparring"}
    commit = _code_commit()
    if commit:
        tags.update({"mlflow.source.git.commit": commit.removesuffix("-dirty"), "sparring.git_commit": commit})
    return tags


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value
    return out


class MlflowTracking(ConfigurableResource):
    """One parent MLflow run per Dagster run, one nested run per stage (later: per cycle).

    The store is sqlite under <project>/mlruns (MLflow 3.17 refuses a plain file store) with artifacts beside
    it, so `mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db` shows everything. Params are logged
    flat with dotted names and metrics unprefixed on the stage run (and `<stage>.<metric>` on the parent), so
    runs line up column by column in MLflow's comparison view.
    """

    root: str = ""
    tracking_uri: str = ""

    def store(self) -> Path:
        return (Path(self.root).resolve() if self.root else project_root()) / "mlruns"

    def uri(self) -> str:
        return self.tracking_uri or f"sqlite:///{self.store() / 'mlflow.db'}"

    def existing_client(self) -> Any | None:
        """A client of the store, or None when the project's own store does not exist yet (nothing to read)."""
        if not self.tracking_uri and not (self.store() / "mlflow.db").is_file():
            return None
        import mlflow

        if os.environ.get(VERBOSE_ENV) != "1":
            logging.getLogger("mlflow").setLevel(logging.WARNING)
        return mlflow.MlflowClient(self.uri())

    def _setup(self, experiment: str) -> tuple[Any, str]:
        import mlflow

        if os.environ.get(VERBOSE_ENV) != "1":  # its store's INFO lines ("Creating initial ... tables")
            logging.getLogger("mlflow").setLevel(logging.WARNING)
        store = self.store()
        store.mkdir(parents=True, exist_ok=True)
        uri = self.uri()
        mlflow.set_tracking_uri(uri)
        client = mlflow.MlflowClient(uri)
        found = client.get_experiment_by_name(experiment)
        if found is None:
            return client, client.create_experiment(
                experiment, artifact_location=(store / "artifacts").as_uri(), tags=dict([TRAINING_EXPERIMENT])
            )
        if TRAINING_EXPERIMENT[0] not in found.tags:  # made before the tag existed
            client.set_experiment_tag(found.experiment_id, *TRAINING_EXPERIMENT)
        return client, found.experiment_id

    def _parent(self, client: Any, experiment_id: str, dagster_run_id: str, params: Params) -> str:
        runs = client.search_runs(
            [experiment_id], filter_string=f"tags.`dagster.run_id` = '{dagster_run_id}'", max_results=50
        )
        parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        if parents:
            return parents[0].info.run_id
        run = client.create_run(
            experiment_id,
            run_name=f"pipeline-{params.profile}-{dagster_run_id[:8]}",
            tags={
                "dagster.run_id": dagster_run_id,
                "sparring.profile": params.profile,
                KIND_TAG: "pipeline",
                **source_tags(params),
            },
        )  # RUNNING until the whole Dagster run is over: pipelines/closing.py settles it from all its stages
        _log_params(client, run.info.run_id, params.flat())
        return run.info.run_id

    @contextmanager
    def stage_run(self, dagster_run_id: str, stage: str, params: Params, sections: list[str]) -> Iterator[Any]:
        """Open the stage's nested run (active, so TRL's `report_to=["mlflow"]` logs into it) and yield a
        `StageLog` to log metrics and artifacts; close it FINISHED, KILLED if interrupted, FAILED if it raised.
        The parent run is left RUNNING: its status is the whole run's, not that of the stage that ended last."""
        import mlflow

        client, experiment_id = self._setup(params.tracking.experiment)
        parent = self._parent(client, experiment_id, dagster_run_id, params)
        child = client.create_run(
            experiment_id,
            run_name=stage,
            tags={
                "mlflow.parentRunId": parent,
                "dagster.run_id": dagster_run_id,
                "sparring.stage": stage,
                "sparring.profile": params.profile,
                **source_tags(params),
            },
        )
        run_id = child.info.run_id
        dumped = params.model_dump()
        _log_params(client, run_id, _flat("", {s: dumped[s] for s in sections}, {}))
        status = "FAILED"
        try:
            with mlflow.start_run(run_id=run_id):
                yield StageLog(client, run_id, parent, stage)
            status = "FINISHED"
        except INTERRUPTS:
            status = "KILLED"
            raise
        finally:
            with capture_interrupts():  # a second interrupt (Ctrl-C and Dagster's forwarded one) must not skip this
                client.set_terminated(run_id, status)


def _log_params(client: Any, run_id: str, flat: dict[str, Any]) -> None:
    from mlflow.entities import Param

    items = [Param(k, str(v)) for k, v in flat.items()]
    for i in range(0, len(items), 100):  # MLflow caps a batch at 100 params
        client.log_batch(run_id, params=items[i : i + 100])


class StageLog:
    def __init__(self, client: Any, run_id: str, parent_id: str, stage: str):
        self.client, self.run_id, self.parent_id, self.stage = client, run_id, parent_id, stage
        self.logged_curves: list[dict[str, Any]] = []  # what `curves` logged: the stage's plot file reads it

    def metrics(self, values: dict[str, float], step: int = 0) -> None:
        self.series([{**values, "step": step}])

    def series(self, rows: Sequence[dict[str, float]]) -> None:
        """Step-indexed rows (each with its ``step``) on this run and, as ``<stage>.<metric>``, on its parent, in
        batches of MLflow's cap: peer_rl's 9,600 step rows logged one call each took 134-195 s (2026-12-06)."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        points = [(k, float(v), int(row["step"])) for row in rows for k, v in row.items() if k != "step"]
        own = [Metric(k, v, now, step) for k, v, step in points]
        on_parent = [Metric(f"{self.stage}.{k}", v, now, step) for k, v, step in points]
        for run_id, metrics in ((self.run_id, own), (self.parent_id, on_parent)):
            for i in range(0, len(metrics), 1000):  # MLflow caps a batch at 1000 metrics
                self.client.log_batch(run_id, metrics=metrics[i : i + 1000])

    def trajectory(self, name: str, value: float, step: int) -> None:
        """One point of a pipeline-level curve on the parent run (e.g. `coevolution.w_da` at step = cycle)."""
        from mlflow.entities import Metric

        self.client.log_batch(self.parent_id, metrics=[Metric(name, float(value), int(time.time() * 1000), step)])

    def curves(self, history: list[dict[str, float]]) -> None:
        """A trainer's log history as step-indexed curves (train_loss, learning_rate, …)."""
        from mlflow.entities import Metric

        self.logged_curves.extend(history)
        now = int(time.time() * 1000)
        points = [
            Metric(f"train_{k}" if k == "loss" else k, float(v), now, int(entry["step"]))
            for entry in history
            if "step" in entry and "train_runtime" not in entry
            for k, v in entry.items()
            if k in ("loss", "learning_rate", "grad_norm", "mean_token_accuracy", "entropy")
        ]
        for i in range(0, len(points), 1000):  # MLflow caps a batch at 1000 metrics
            self.client.log_batch(self.run_id, metrics=points[i : i + 1000])

    @contextmanager
    def child_run(self, name: str) -> Iterator[StageLog]:
        """A run nested under the stage's (peer_rl: one per member); its metrics also reach the stage's run as
        `<name>.<metric>`. Closed FINISHED, KILLED if interrupted, or FAILED if the body raised."""
        stage_run = self.client.get_run(self.run_id)
        tags = {"mlflow.parentRunId": self.run_id, "sparring.stage": self.stage, "sparring.member": name}
        tags["dagster.run_id"] = stage_run.data.tags.get("dagster.run_id", "")  # what closes it if left open
        source = ("mlflow.source.name", "mlflow.source.git.commit", "sparring.git_commit", "sparring.params_digest")
        tags.update({k: v for k, v in stage_run.data.tags.items() if k in source})
        child = self.client.create_run(stage_run.info.experiment_id, run_name=f"{self.stage}.{name}", tags=tags)
        status = "FAILED"
        try:
            yield StageLog(self.client, child.info.run_id, self.run_id, name)
            status = "FINISHED"
        except INTERRUPTS:
            status = "KILLED"
            raise
        finally:
            with capture_interrupts():
                self.client.set_terminated(child.info.run_id, status)

    def artifacts(self, folder: Path, name: str) -> None:
        self.client.log_artifacts(self.run_id, str(folder), name)

    def checkpoint(self, folder: Path, name: str) -> str:
        """A checkpoint folder as the run's artifacts under `checkpoint/<name>` and as an MLflow logged model
        (`<stage>-<name>`, linked to the run, tagged with its format — a LoRA adapter naming its base, or full
        safetensors weights): what MLflow 3's Models page lists. Returns the logged model's id."""
        self.artifacts(folder, f"checkpoint/{name}" if name else "checkpoint")
        from sparring.lm.adapters import MARKER  # deferred: it imports torch, which start-up need not

        marker = folder / MARKER  # an adapter checkpoint's record of its base
        meta = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else {}
        tags = {"sparring.stage": self.stage, "sparring.format": meta.get("format", "full-safetensors")}
        if meta.get("base"):
            tags["sparring.base"] = str(meta["base"])
        experiment_id = self.client.get_run(self.run_id).info.experiment_id
        model_name = f"{self.stage}-{name}" if name else self.stage  # MLflow refuses "." in a model name
        model = self.client.create_logged_model(experiment_id, name=model_name, source_run_id=self.run_id, tags=tags)
        try:
            self.client.log_model_artifacts(model.model_id, str(folder))
        except Exception:
            self.client.finalize_logged_model(model.model_id, "FAILED")
            raise
        self.client.finalize_logged_model(model.model_id, "READY")
        return model.model_id

    def artifact(self, path: Path, folder: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), folder)

    def parent_artifact(self, path: Path, folder: str | None = None) -> None:
        """A file on the pipeline's parent run (the report), where run comparison looks first."""
        self.client.log_artifact(self.parent_id, str(path), folder)

    def parent_artifacts(self, folder: Path, name: str) -> None:
        self.client.log_artifacts(self.parent_id, str(folder), name)

    def json_artifact(self, obj: dict, name: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(json.dumps(obj, indent=2, sort_keys=True), encoding="utf-8")
            self.client.log_artifact(self.run_id, str(path))


def ensure_dagster_home(root: Path) -> Path:
    """DAGSTER_HOME must be absolute or Dagster falls back to a temporary instance and history vanishes."""
    home = Path(os.environ.get("DAGSTER_HOME") or root / ".dagster").resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        # No telemetry (offline), no "join the community" pop-up over the asset graph on first open, and Dagster's
        # DEBUG engine events (a multiprocess step's "Executing step in subprocess") off the terminal.
        config.write_text(
            "telemetry:\n  enabled: false\nnux:\n  enabled: false\npython_logs:\n  python_log_level: INFO\n",
            encoding="utf-8",
        )
    text = config.read_text(encoding="utf-8")
    if "compute_logs" not in (yaml.safe_load(text) or {}):  # Ctrl-C-deaf log mirrors; a home made before gets it too
        config.write_text(text + ("" if text.endswith("\n") or not text else "\n") + DAGSTER_YAML_BLOCK, "utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    return home
