"""The pipeline's catalog loads what the stages write, each Stage carries its own headline, plot, group and kinds,
and library functions take their own settings section, not the whole Params."""

import ast
import json
from pathlib import Path

from pipelines.definitions import STAGE_ASSETS, STAGES
from sparring import catalog
from sparring.catalog import Catalog, scenario_file
from sparring.world.scenarios import save_scenarios

ROOT = Path(__file__).resolve().parents[1]


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

    (tmp_path / catalog.REPORTS).mkdir()
    (tmp_path / catalog.stage_report("peer_rl")).write_text(json.dumps({"profile": "quick", "members": {}}))
    assert data.report("peer_rl", "quick") == {"profile": "quick", "members": {}}
    assert data.report("peer_rl", "default") is None  # another profile's report is stale
    assert data.report("evaluate", "quick") is None
