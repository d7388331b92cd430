"""A stage's code dependencies, computed rather than kept by hand (#62): the import closure of its asset module.

Imports are read with `ast`, as tests/test_import_layers.py reads them: those inside functions (deferred ones) count,
since the stage calls them; those under ``if TYPE_CHECKING:`` do not, as they never run. Only the project's own
packages are followed (`sparring` in src/, `assets`, `pipelines`). Beside each module of the closure, the package
data in its folder (.json, .yaml, .txt: the taxonomy, the synthetic lexicon) counts too. A hand-kept list missed
train/lm_head.py, which every GRPO update imports, so `dvc repro` did not rerun the stages that use it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where each of the project's top-level packages lives; what is imported from anywhere else is not its code.
PACKAGES = {
    "sparring": ("src", "sparring"),
    "stagekit": ("stagekit",),
    "assets": ("assets",),
    "pipelines": ("pipelines",),
}
DATA_SUFFIXES = (".json", ".yaml", ".txt")  # package data a module reads from its own folder


def module_file(module: str, root: Path = ROOT) -> Path | None:
    """The project file that defines ``module`` (a package's __init__.py), or None when it is not the project's."""
    top, *rest = module.split(".")
    if top not in PACKAGES:
        return None
    base = root.joinpath(*PACKAGES[top], *rest)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _import_nodes(body: list[ast.stmt], late: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """The import statements among ``body`` and the statements inside them, each with whether it is deferred (in a
    function); those under ``if TYPE_CHECKING:`` left out (its else branch runs). Expressions hold no imports."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, late
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            yield from _import_nodes(node.orelse, late)
            continue
        inner = late or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _import_nodes([child], inner)
            elif isinstance(child, ast.excepthandler | ast.match_case):
                yield from _import_nodes(child.body, inner)


def _with_packages(module: str, root: Path) -> list[str]:
    """``module`` and the packages above it (importing a.b.c runs a/__init__.py and a/b/__init__.py): the project's."""
    parts = module.split(".")
    names = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return [name for name in names if module_file(name, root) is not None]


@functools.cache  # every stage's closure reads the same files again: ~3 s of loading the definitions
def imports(module: str, root: Path = ROOT) -> tuple[tuple[str, bool], ...]:
    """The project modules ``module``'s import statements load, each with whether the import is deferred (inside a
    function); ``from a.b import c`` loads a.b.c when that is a module, else a.b. TYPE_CHECKING imports are left out."""
    path = module_file(module, root)
    if path is None:
        return ()
    found: list[tuple[str, bool]] = []
    for node, late in _import_nodes(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            names = [f"{base}.{a.name}" if module_file(f"{base}.{a.name}", root) else base for a in node.names]
        found += [(name, late) for imported in names for name in _with_packages(imported, root)]
    return tuple(found)


def import_closure(module: str, root: Path = ROOT, deferred: bool = True) -> set[str]:
    """Every project module that importing ``module`` loads, with (``deferred``) those its functions import too."""
    seen: set[str] = set()
    todo = _with_packages(module, root)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [m for m, late in imports(name, root) if deferred or not late]
    return seen


def code_files(module: str, root: Path = ROOT) -> list[str]:
    """The files of ``module``'s import closure and the package data in their folders: sorted, project-relative."""
    files = {module_file(m, root) for m in import_closure(module, root)}
    folders = {f.parent for f in files if f is not None}
    data = {p for folder in folders for p in folder.iterdir() if p.suffix in DATA_SUFFIXES and p.is_file()}
    return sorted(p.relative_to(root).as_posix() for p in {*files, *data} if p is not None)


def ignored(relative: str) -> bool:
    """What tools write beside the code (bytecode, caches, hidden and backup files): DVC ignores it (.dvcignore)."""
    parts = Path(relative).parts
    return any(p == "__pycache__" or p.startswith(".") for p in parts) or relative.endswith(("~", ".pyc", ".pyo"))


def folder_files(folder: Path, root: Path = ROOT) -> list[str]:
    """The files under ``folder`` that DVC tracks as a dependency, project-relative."""
    files = (p.relative_to(root).as_posix() for p in folder.rglob("*") if p.is_file())
    return sorted(f for f in files if not ignored(f))


def collapse(paths: Iterable[str], root: Path = ROOT) -> list[str]:
    """``paths`` with every folder all of whose files are among them named once instead, so dvc.yaml stays readable."""
    listed = set(paths)
    whole: dict[Path, bool] = {}
    kept: set[str] = set()
    for path in listed:
        shown = path
        for folder in reversed(Path(path).parents[:-1]):  # the outermost whole folder wins
            if folder not in whole:
                whole[folder] = set(folder_files(root / folder, root)) <= listed
            if whole[folder]:
                shown = folder.as_posix()
                break
        kept.add(shown)
    return sorted(kept)
