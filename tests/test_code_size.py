"""#81's size rule, kept: a file past 400 lines or a function past 60 says why at its top ("Over 400 lines: ..." in
the module's docstring, "Over 60 lines: ..." in the function's), or is split."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src", "stagekit", "pipelines", "assets", "benchmarks")


def unexplained(path: Path, root: Path = ROOT) -> list[str]:
    """The file itself and each function in it that is past the limit without its reason."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    found = []
    if len(text.splitlines()) > 400 and not re.search(r"over 400 lines", ast.get_docstring(tree) or "", re.I):
        found.append(f"{path.relative_to(root)}: {len(text.splitlines())} lines, no reason in its docstring")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 60:
            if not re.search(r"over 60 lines", ast.get_docstring(node) or "", re.I):
                lines = node.end_lineno - node.lineno + 1
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: {lines} lines, no reason")
    return found


def test_every_long_file_and_function_gives_its_reason():
    files = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
    assert [problem for path in files for problem in unexplained(path)] == []


def test_the_rule_sees_a_long_function_without_a_reason(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "m.py").write_text(f'"""m."""\n\n\ndef f():\n    """Does f."""\n{body}\n')
    assert unexplained(tmp_path / "m.py", tmp_path) == ["m.py:4 f: 63 lines, no reason"]
