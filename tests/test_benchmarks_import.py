"""Every benchmark imports as a module of the `benchmarks` package (its shared helpers are modules there, never a
sibling script reached through sys.path), defines `main`, and runs it only as a script (#62)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem != "__init__")
HELPERS = ("run_folders", "banking77_split")  # shared modules, not scripts


def test_no_benchmark_edits_sys_path():
    offending = [p.name for p in BENCHMARKS.glob("*.py") if "sys.path" in p.read_text(encoding="utf-8")]
    assert not offending, f"benchmarks that edit sys.path: {offending}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_imports_and_runs_main_only_as_a_script(name):
    module = importlib.import_module(f"benchmarks.{name}")
    if name in HELPERS:
        return
    assert callable(getattr(module, "main", None)), f"benchmarks/{name}.py has no main()"
    tree = ast.parse((BENCHMARKS / f"{name}.py").read_text(encoding="utf-8"))
    guarded = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert guarded, f"benchmarks/{name}.py runs on import: main() must sit under `if __name__ == '__main__':`"
