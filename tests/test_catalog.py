"""Thin assets over one catalog: each asset function is short, every stage's outputs are the catalog's paths, no
asset spells a data path itself, and library functions take their own settings section, not the whole Params."""

import ast
import inspect
import json
import re
from pathlib import Path

from pipelines.definitions import STAGE_ASSETS, STAGES
from sparring import catalog
from sparring.catalog import Catalog, scenario_file
from sparring.world.scenarios import save_scenarios

ROOT = Path(__file__).resolve().parents[1]
MAX_ASSET_LINES = 40
TOP_FOLDERS = ("data", "models", "reports", "scratch")  # where the stages' files live (sparring.catalog)
SPELLED_PATH = re.compile(rf"({'|'.join(TOP_FOLDERS)})/\S*")  # a path alone, not prose that names one


def stage_function(asset):
    """The plain `fn(StageContext) -> StageOutput` that `stage_asset` wrapped."""
    return inspect.getclosurevars(asset.op.compute_fn.decorated_fn).nonlocals["fn"]


def test_every_asset_function_is_at_most_40_lines():
    lengths = {stage.name: len(inspect.getsourcelines(stage_function(asset))[0]) for stage, asset in STAGE_ASSETS}
    assert len(lengths) == len(STAGES)
    assert {name: n for name, n in lengths.items() if n > MAX_ASSET_LINES} == {}


def test_every_stage_writes_catalog_paths():
    named = {v for k, v in vars(catalog).items() if k.isupper() and isinstance(v, str)}
    cycles = {catalog.cycle_dir(k) for k in range(1, len(STAGES) + 1)}
    for stage in STAGES:
        assert set(stage.outs) <= named | cycles, stage.name
        assert all(m in named for m in stage.metrics), stage.name
        assert stage.report == catalog.stage_report(stage.name)


def spelled_paths(source: str) -> list[str]:
    """Paths under the pipeline's top folders written out in ``source``: "models/x" literals, or root / "data"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SPELLED_PATH.fullmatch(node.value):
            found.append(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant):
            if node.right.value in TOP_FOLDERS:
                found.append(ast.unparse(node))
    return found


def test_no_asset_spells_a_data_path():
    planted = 'x = root / "models" / "judge"\ny = "data/ingest/train.parquet"'
    assert set(spelled_paths(planted)) == {"root / 'models'", "data/ingest/train.parquet"}
    for module in sorted((ROOT / "assets").glob("*.py")):
        assert spelled_paths(module.read_text()) == [], f"{module.name}: take these paths from sparring.catalog"


def test_library_functions_take_a_section_not_params():
    """The whole Params goes to no function under src/sparring: each receives the section it reads."""
    takers = []
    for path in sorted((ROOT / "src" / "sparring").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                if any(a.annotation is not None and ast.unparse(a.annotation) == "Params" for a in args):
                    takers.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert takers == []


def test_stage_tables_are_fields_of_each_stage():
    by_name = {s.name: s for s in STAGES}
    assert by_name["ingest"].headline_metrics == ("rows_train",) and by_name["ingest"].group == "data"
    assert by_name["agent_sft"].series is not None and by_name["agent_sft"].plot == "reports/plots/agent_sft.json"
    assert by_name["tokenizer"].plot is None  # no series: no plot file
    cycles = [s for s in STAGES if s.name.startswith("cycle_")]
    assert cycles and all(c.series == cycles[0].series and c.headline_metrics == ("w_da",) for c in cycles)
    for stage, asset in STAGE_ASSETS:
        spec = next(iter(asset.specs))
        assert spec.group_name == stage.group and set(stage.kinds) <= set(spec.kinds), stage.name


def test_catalog_loads_what_the_stages_write(tmp_path):
    import polars as pl

    from sparring.data.synthetic import generate_utterances
    from sparring.world.scenarios import sample_scenarios

    data = Catalog(tmp_path)
    (tmp_path / catalog.SCENARIOS).mkdir(parents=True)
    (tmp_path / catalog.INGEST).mkdir(parents=True)
    utterances = generate_utterances(2, seed=0)
    utterances = utterances.with_columns(id=pl.int_range(pl.len()).cast(pl.String))
    heldout = sample_scenarios(utterances, n=3, seed=0)
    save_scenarios(heldout, scenario_file(tmp_path / catalog.SCENARIOS, "heldout"))
    assert [s.to_dict() for s in data.scenarios("heldout")] == [s.to_dict() for s in heldout]
    assert len(data.scenarios("heldout", 2)) == 2
    pl.DataFrame({"text": ["hi"], "intent": ["x"]}).write_parquet(tmp_path / catalog.INGEST / "test.parquet")
    assert data.utterances("test")["text"].to_list() == ["hi"]

    (tmp_path / catalog.PEER_RL).mkdir(parents=True)
    (tmp_path / catalog.PEER_COHORT).write_text(json.dumps({"profile": "quick", "members": {}}))
    assert data.results(catalog.PEER_COHORT, "quick") == {"profile": "quick", "members": {}}
    assert data.results(catalog.PEER_COHORT, "default") is None  # another profile's results are stale
    assert data.results(catalog.SIMULATOR_RL_FIDELITY, "quick") is None


def test_saved_results_round_away_float_noise():
    """Two runs whose fidelity differs by MiniLM's ~1e-8 noise save the same bytes (the cycles digest the folder)."""
    from sparring.atomic import stable_results

    a = {"profile": "quick", "sft": {"trajectory_distance": 0.8965719618161364, "n": 3, "ok": True}, "ci": [0.1, 0.2]}
    b = {"profile": "quick", "sft": {"trajectory_distance": 0.8965719646010155, "n": 3, "ok": True}, "ci": (0.1, 0.2)}
    assert stable_results(a) == stable_results(b)
    assert stable_results(a)["sft"] == {"trajectory_distance": 0.8966, "n": 3, "ok": True}
