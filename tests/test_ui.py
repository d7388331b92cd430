"""The UIs open where the README says: `sparring ui` serves the Dagster asset graph on 127.0.0.1 from a fresh copy
of the project (DAGSTER_HOME=<project>/.dagster), and the MLflow experiment is filed as model training."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pipelines.definitions import STAGES
from sparring.params import load_params
from stagekit.project import copy_project
from stagekit.resources import TRAINING_EXPERIMENT, MlflowTracking

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STARTUP_S = 90  # the webserver answers in ~25 s on 2 busy cores; the code location loads right after
CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and os.access(p, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


ASSET_KEYS = "{ assetNodes { assetKey { path } } }"


def asset_names(port: int) -> set[str]:
    return {"/".join(n["assetKey"]["path"]) for n in graphql(port, ASSET_KEYS)["data"]["assetNodes"]}


def stop(process: subprocess.Popen) -> None:
    """Stop `dagster dev` and everything it started (webserver, daemon, code servers): they share its process
    group. Ctrl-C first, as in a terminal; whatever is still up after 10 s is killed."""
    for sig, wait in ((signal.SIGINT, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # the leader is gone; make sure its children are too
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory):
    """`sparring ui --port <free port>` in a fresh copy of the project (no .dagster yet, DAGSTER_HOME unset), up
    until GraphQL lists the code location's assets; stopped with its whole process group afterwards."""
    root = copy_project(ROOT, tmp_path_factory.mktemp("ui") / "project")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "SPARRING_ROOT", "SPARRING_PROFILE")}
    log = root.parent / "ui.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(BIN / "sparring"), "ui", "--port", str(port)],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stop() reaches every process it starts
        )
    try:
        deadline, names, error = time.monotonic() + STARTUP_S, set(), None
        while time.monotonic() < deadline and not names:
            if process.poll() is not None:
                pytest.fail(f"`sparring ui` exited with {process.returncode}:\n{log.read_text()}")
            try:
                names = asset_names(port)
            except (OSError, KeyError, TypeError, ValueError) as exc:  # not up yet, or the location still loading
                error = exc
                time.sleep(1)
        if not names:
            pytest.fail(f"no assets on http://127.0.0.1:{port} after {STARTUP_S} s ({error!r}):\n{log.read_text()}")
        yield root, port
    finally:
        stop(process)


def test_ui_serves_every_stage_asset_from_the_project_instance(dagster_ui):
    root, port = dagster_ui
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=10) as response:
        assert response.status == 200
    assert asset_names(port) == {s.name for s in STAGES}
    # DAGSTER_HOME was unset: the UI's instance is <project>/.dagster, so run history persists there.
    assert (root / ".dagster" / "dagster.yaml").is_file()
    assert (root / ".dagster" / "history").is_dir()


def rendered_texts(url: str, user_data_dir: Path) -> set[str]:
    """The element texts of `url` once headless Chromium has rendered it (the graph's nodes, the asset list)."""
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={user_data_dir}",
        "--window-size=1400,900",
        "--virtual-time-budget=20000",
        "--dump-dom",
        url,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return set(re.findall(r">\s*([A-Za-z0-9_]+)\s*<", result.stdout))


def test_asset_graph_page_shows_every_stage(dagster_ui, tmp_path):
    """The global lineage page folds assets into their groups, so each group's graph page is rendered and every
    stage must be drawn on its own group's page."""
    if CHROMIUM is None:
        pytest.skip("no chromium binary (/usr/bin/chromium or on PATH): the asset graph page is not rendered")
    _, port = dagster_ui
    nodes = graphql(port, "{ assetNodes { assetKey { path } groupName } }")["data"]["assetNodes"]
    groups: dict[str, set[str]] = {}
    for node in nodes:
        groups.setdefault(node["groupName"], set()).add("/".join(node["assetKey"]["path"]))
    assert set().union(*groups.values()) == {s.name for s in STAGES}
    overview = rendered_texts(f"http://127.0.0.1:{port}/asset-groups", tmp_path / "chromium")
    assert set(groups) <= overview, f"groups missing from the lineage page: {sorted(set(groups) - overview)}"
    for group, members in sorted(groups.items()):
        url = f"http://127.0.0.1:{port}/locations/pipelines.definitions/asset-groups/{group}/lineage"
        missing = sorted(members - rendered_texts(url, tmp_path / "chromium"))
        assert not missing, f"not on group {group}'s asset graph page: {missing}"


@pytest.fixture
def mlflow_uri(monkeypatch):
    """Put MLflow's global tracking URI, and the MLFLOW_TRACKING_URI it exports to subprocesses, back after the
    test (stage_run sets both, for TRL's logging)."""
    from mlflow.tracking._tracking_service import utils

    monkeypatch.setattr(utils, "_tracking_uri", utils._tracking_uri)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _stage(root: Path) -> None:
    params = load_params(ROOT / "params.yaml", "quick")
    with MlflowTracking(root=str(root)).stage_run("dagster-run-1", "ingest", params, ["tracking"]) as log:
        log.metrics({"rows_train": 1.0})


def _experiment(root: Path):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    return client, client.get_experiment_by_name(load_params(ROOT / "params.yaml", "quick").tracking.experiment)


def test_stage_run_files_the_experiment_as_model_training(tmp_path, mlflow_uri):
    _stage(tmp_path)
    _, experiment = _experiment(tmp_path)
    assert experiment.tags.get(TRAINING_EXPERIMENT[0]) == TRAINING_EXPERIMENT[1] == "custom_model_development"
    assert TRAINING_EXPERIMENT[0] == "mlflow.experimentKind"


def test_an_experiment_made_without_the_kind_gets_it_on_the_next_stage_run(tmp_path, mlflow_uri):
    import mlflow

    (tmp_path / "mlruns").mkdir()
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    name = load_params(ROOT / "params.yaml", "quick").tracking.experiment
    made = client.create_experiment(name, artifact_location=(tmp_path / "mlruns" / "artifacts").as_uri())
    assert TRAINING_EXPERIMENT[0] not in client.get_experiment(made).tags  # as older versions of this project left it
    _stage(tmp_path)
    _, experiment = _experiment(tmp_path)
    assert experiment.experiment_id == made
    assert experiment.tags[TRAINING_EXPERIMENT[0]] == TRAINING_EXPERIMENT[1]


def test_ui_on_a_busy_port_exits_at_once_with_one_line(tmp_path):
    """dagster dev said it served, failed to bind and kept running with nothing served: the port is checked first."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = subprocess.Popen(
            [str(BIN / "sparring"), "ui", "--port", str(port)],
            cwd=ROOT,
            env={**os.environ, "DAGSTER_HOME": str(tmp_path / ".dagster")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            stop(process)
            pytest.fail("`sparring ui` on a busy port was still running after 30 s")
    assert process.returncode not in (0, None)
    assert err.splitlines() == [f"error: 127.0.0.1:{port}: address already in use; choose another port with --port"]
    assert "Serving" not in out + err and not (tmp_path / ".dagster").exists()
