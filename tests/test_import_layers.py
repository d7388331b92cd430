"""The import direction of src/sparring (#45): `train` never imports `evaluate` (evaluate may use train's pieces), the
judge depends on the world, not on `agents` or `lm`, `lm` (model plumbing) never imports `agents` (behaviour), and
no two files import each other, directly or round a longer loop. Imports are read with `ast`, so those inside
functions (deferred ones) count; those under ``if TYPE_CHECKING:`` do not, as they never run (a type named in an
annotation is no import cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "sparring"
# (importing package, imported package): an edge that must not exist
FORBIDDEN = (
    ("sparring.train", "sparring.evaluate"),
    ("sparring.judge", "sparring.agents"),
    ("sparring.judge", "sparring.lm"),
    ("sparring.lm", "sparring.agents"),  # model plumbing knows no behaviour (#62 item 5)
    # the method drivers sit above training and evaluation, the one place a before/after measurement lives (#62)
    *(
        (lower, "sparring.drivers")
        for lower in ("sparring.train", "sparring.evaluate", "sparring.lm", "sparring.agents")
    ),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            return True
    return False


def imported_names(path: Path, module: str) -> list[tuple[str, int]]:
    """Every module name an import statement of ``path`` names (``from a.b import c`` names a.b and a.b.c), with
    its line, wherever the statement stands (module level or in a function), but for ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    names: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            names += [(a.name, node.lineno) for a in node.names]
            continue
        base = node.module or ""
        if node.level:  # relative: resolved against the importing module's package
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
        names += [(base, node.lineno), *((f"{base}.{a.name}", node.lineno) for a in node.names)]
    return names


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {module of src/sparring it imports: the line of the first such import}."""
    files = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges: dict[str, int] = {}
        for name, line in imported_names(path, module):
            while name and name not in files:  # `from pkg.mod import func` -> pkg.mod
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.setdefault(name, line)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _file(module: str) -> str:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return str((path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).relative_to(SRC.parent))


@pytest.mark.parametrize(("lower", "upper"), FORBIDDEN, ids=[f"{a}-not-{b}" for a, b in FORBIDDEN])
def test_the_lower_layer_never_imports_the_upper(lower, upper):
    graph = import_graph()
    bad = [
        f"{_file(m)}:{line} imports {target}"
        for m, edges in sorted(graph.items())
        if m == lower or m.startswith(f"{lower}.")
        for target, line in sorted(edges.items())
        if target == upper or target.startswith(f"{upper}.")
    ]
    assert not bad, f"{lower} must not import {upper}:\n" + "\n".join(bad)


def test_no_two_files_import_each_other_directly_or_round_a_loop():
    graph = import_graph()
    found = cycles(graph)
    lines = []
    for component in found:
        inside = set(component)
        edges = [f"  {_file(m)}:{line} -> {_file(t)}" for m in component for t, line in graph[m].items() if t in inside]
        lines.append("cycle between " + ", ".join(_file(m) for m in component) + ":\n" + "\n".join(edges))
    assert not found, "import cycles in src/sparring:\n" + "\n".join(lines)


def test_the_walk_sees_deferred_imports_and_skips_type_checking_ones(tmp_path):
    """The checks above are only as good as the walk: a function's import is an edge, a TYPE_CHECKING one is not,
    and a two-file loop is reported with both files."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from sparring.world.bank import World\n"
        "def f():\n    from sparring.evaluate.heldout import evaluate_heldout\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    names = [name for name, _ in imported_names(path, "sparring.train.probe")]
    assert "sparring.evaluate.heldout" in names and "sparring.world.bank" not in names
    assert cycles({"a": {"b": 1}, "b": {"a": 2}, "c": {"a": 3}}) == [["a", "b"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def _dynamic_imports(path: Path) -> list[int]:
    """The lines of ``path`` that import by name at run time (``importlib.import_module``, ``__import__``): an
    import the static reading above cannot follow."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return [
        c.lineno for c in calls if ast.unparse(c.func) in ("importlib.import_module", "import_module", "__import__")
    ]


# package -> the project's packages it may import: the library, the stage kit, the assets, the composition on top
LAYERS = {
    "sparring": {"sparring"},
    "stagekit": {"sparring", "stagekit"},
    "assets": {"sparring", "stagekit"},
    "pipelines": {"sparring", "stagekit", "assets", "pipelines"},
    "benchmarks": {"sparring", "stagekit", "pipelines", "benchmarks"},
}


def test_the_kit_sits_below_the_assets_and_the_composition_above_them():
    """#81's layers: the library (src/sparring), the stage kit (stagekit/), the assets (none imports another:
    shared shape comes from stagekit/graph_shape.py), the composition (pipelines/: Definitions, one stage's job, the
    CLI), which alone reaches the assets; the benchmarks never import an asset. Nothing below the composition
    imports by name at run time, so no import escapes this test."""
    root = SRC.parent
    files = [*PACKAGE.rglob("*.py"), *(p for top in ("stagekit", "assets", "pipelines", "benchmarks") for p in
             (root / top).glob("*.py"))]  # fmt: skip
    bad = []
    for path in sorted(files):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removeprefix("src.")
        own = module.split(".")[0]
        for name, line in imported_names(path, module):
            top = name.split(".")[0]
            if top in LAYERS and top not in LAYERS[own]:
                bad.append(f"{path.relative_to(root)}:{line} ({own}) imports {name}")
            elif own == "assets" and top == "assets" and name.split(".")[:2] != module.split(".")[:2]:
                bad.append(f"{path.relative_to(root)}:{line} imports another asset, {name}")
        if own in ("sparring", "stagekit", "assets"):
            bad += [f"{path.relative_to(root)}:{line} imports by name at run time" for line in _dynamic_imports(path)]
    assert not bad, "an import against the layers:\n" + "\n".join(bad)


def test_the_layer_test_sees_an_import_by_name(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("import importlib\n\ndef load(name):\n    return importlib.import_module(f'assets.{name}')\n")
    assert _dynamic_imports(path) == [4]
