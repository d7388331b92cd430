"""#81's one contract: every stage has a driver ``run(inputs, settings, out_dir, seed) -> StageResult`` in
src/sparring/drivers/, and its asset holds nothing but catalog loads, that one call and its return (the kit records
the result)."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from pipelines.definitions import STAGES
from stagekit.stages import is_cycle

ROOT = Path(__file__).resolve().parents[1]
SIGNATURE = ["inputs", "settings", "out_dir", "seed"]
STAGE_WORK = ("log", "replace_dir", "save_checkpoint", "write_json", "write_text", "write_results")


def _module(stage: str) -> str:
    return "coevolution" if is_cycle(stage) else stage


@pytest.mark.parametrize("stage", sorted({_module(s.name) for s in STAGES}))
def test_every_stage_has_a_driver_of_the_one_signature(stage):
    driver = importlib.import_module(f"sparring.drivers.{stage}")
    signature = inspect.signature(driver.run)
    assert list(signature.parameters) == SIGNATURE, f"sparring.drivers.{stage}.run{signature}"
    assert signature.return_annotation in ("StageResult", "sparring.drivers.StageResult"), stage
    assert inspect.isclass(driver.Inputs), f"sparring.drivers.{stage} declares no Inputs"


def _asset_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    decorated = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.decorator_list]
    return [f for f in decorated if any("stage_asset" in ast.unparse(d) for d in f.decorator_list)]


def asset_problems(source: str) -> list[str]:
    """What an asset module's stage functions hold beyond catalog loads, one driver call and its return."""
    problems = []
    for fn in _asset_functions(ast.parse(source)):
        calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call)]
        names = [ast.unparse(c.func) for c in calls]
        if sum(n == "run" or n.endswith(".run") for n in names) != 1:
            problems.append(f"{fn.name}: {sum(n == 'run' for n in names)} driver calls")
        work = [n for n in names if n.split(".")[-1] in STAGE_WORK or ".log." in f".{n}."]
        problems += [f"{fn.name}: {n}(...) is stage work" for n in work]
        for node in fn.body:
            if not isinstance(node, ast.Assign | ast.AnnAssign | ast.Return | ast.Expr):
                problems.append(f"{fn.name}:{node.lineno}: a {type(node).__name__} in the asset")
    return problems


@pytest.mark.parametrize("module", sorted({_module(s.name) for s in STAGES}))
def test_an_asset_is_catalog_loads_one_driver_call_and_a_return(module):
    source = (ROOT / "assets" / f"{module}.py").read_text(encoding="utf-8")
    assert _asset_functions(ast.parse(source)), f"assets/{module}.py declares no stage function"
    assert asset_problems(source) == []


def test_the_asset_check_sees_stage_work_in_an_asset():
    source = (
        "@stage_asset(STAGE)\ndef s(ctx):\n    done = run(Inputs(), ctx.params.x, out, 0)\n"
        "    ctx.log.checkpoint(out, '')\n    for row in done.curve:\n        pass\n    return done\n"
    )
    problems = asset_problems(source)
    assert any("ctx.log.checkpoint" in p for p in problems) and any("For" in p for p in problems)
