"""Code dependencies computed from imports (#62 item 2): dvc.yaml lists, for each stage, the import closure of its
asset module and the package data beside it, so no hand-kept list can miss a file again (train/lm_head.py, which
every GRPO update imports, was missing from simulator_rl, peer_rl and peer_members). The closure is checked against
what importing each asset module really loads, in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from stagekit.code_deps import code_files, collapse, import_closure, imports
from stagekit.stages import is_cycle, stage_module

ROOT = Path(__file__).resolve().parents[1]
LM_HEAD = "src/sparring/train/lm_head.py"
# A library file -> the module that is it or reads it (sparring.domains reads banking.yaml beside it).
LIBRARY_FILES = {
    LM_HEAD: "sparring.train.lm_head",
    "src/sparring/domains/banking.yaml": "sparring.domains",
    "src/sparring/evaluate/crossplay.py": "sparring.evaluate.crossplay",
    "src/sparring/agents/escalation.py": "sparring.agents.escalation",
}
# Run in a fresh interpreter: imports the asset modules given with every import statement recorded (importer ->
# the project modules it loads, parent packages and `from pkg import submodule` included) and prints, per module,
# the project modules reachable from it: what importing it alone loads.
ORACLE = r"""
import builtins, importlib, importlib.util, json, sys
from pathlib import Path

root, wanted = Path(sys.argv[1]).resolve(), sys.argv[2:]
edges, real_import = {}, builtins.__import__


def ours(name):
    path = getattr(sys.modules.get(name), "__file__", None)
    top = name.partition(".")[0] in ("sparring", "stagekit", "assets", "pipelines")
    return top and bool(path) and Path(path).resolve().is_relative_to(root)


def recording_import(name, globals=None, locals=None, fromlist=(), level=0):
    module = real_import(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__")
    if importer:
        full = importlib.util.resolve_name("." * level + name, globals.get("__package__")) if level else name
        parts = full.split(".")
        loaded = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        loaded += [f"{full}.{x}" for x in fromlist or () if f"{full}.{x}" in sys.modules]
        edges.setdefault(importer, set()).update(m for m in loaded if ours(m))
    return module


builtins.__import__ = recording_import
for name in wanted:
    importlib.import_module(name)
builtins.__import__ = real_import


def reached(name):
    parts = name.split(".")
    seen, todo = set(), [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    while todo:
        m = todo.pop()
        if m not in seen and ours(m):
            seen.add(m)
            todo += edges.get(m, ())
    return sorted(seen)


print(json.dumps({name: reached(name) for name in wanted}))
"""
# What importing one module alone puts in sys.modules: the plain oracle, to check the recording one against.
LOADED = r"""
import importlib, json, sys
from pathlib import Path

root = Path(sys.argv[1]).resolve()
importlib.import_module(sys.argv[2])
ours = [n for n in list(sys.modules) if n.partition(".")[0] in ("sparring", "stagekit", "assets", "pipelines")]
files = {n: getattr(sys.modules[n], "__file__", None) for n in ours}
print(json.dumps(sorted(n for n, f in files.items() if f and Path(f).resolve().is_relative_to(root))))
"""


def dvc_stages() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def covers(deps: list[str], path: str) -> bool:
    return any(path == d or path.startswith(f"{d}/") for d in deps)


def python(script: str, *args: str) -> object:
    """``script`` run in a fresh interpreter on this checkout's code; its last line of output, read as JSON."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARRING_ROOT", "SPARRING_PROFILE")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]), PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run(
        [sys.executable, "-c", script, str(ROOT), *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def walked() -> dict[str, tuple[set[str], set[str], list[str]]]:
    """Asset module -> its import closure, the part module-level imports reach, and its files (the walk's answers,
    each computed once)."""
    modules = {stage_module(name) for name in dvc_stages()}
    return {m: (import_closure(m), import_closure(m, deferred=False), code_files(m)) for m in sorted(modules)}


@pytest.fixture(scope="module")
def loaded() -> dict[str, set[str]]:
    """Asset module -> the project modules importing it loads, recorded in one fresh interpreter."""
    modules = sorted({stage_module(name) for name in dvc_stages()})
    return {module: set(names) for module, names in python(ORACLE, *modules).items()}


def test_lm_head_is_a_dep_of_every_stage_that_imports_grpo(walked):
    stages = dvc_stages()
    grpo = {name for name in stages if "sparring.train.trl" in walked[stage_module(name)][0]}
    assert {"simulator_rl", "agent_rl", "peer_rl", "peer_members", *filter(is_cycle, stages)} <= grpo
    assert not [name for name in grpo if not covers(stages[name]["deps"], LM_HEAD)]
    assert not covers(stages["ingest"]["deps"], LM_HEAD) and not covers(stages["scenarios"]["deps"], LM_HEAD)
    # tokenizer imports train/sft.py (through train/demos.py), whose SFT trainer imports lm_head inside a function:
    # deferred imports count, since the stage may call them.
    assert covers(stages["tokenizer"]["deps"], LM_HEAD)
    assert "sparring.train.lm_head" not in walked["assets.tokenizer"][1]


def test_the_recording_oracle_agrees_with_a_fresh_import(loaded):
    """The recorded graph, read for one module, is what a fresh interpreter holds after importing only it."""
    assert loaded["assets.ingest"] == set(python(LOADED, "assets.ingest"))


def test_the_closure_holds_what_importing_loads_and_more_only_through_deferred_imports(walked, loaded):
    extras = set()
    for module, names in loaded.items():
        closure, at_import, _ = walked[module]
        assert names <= closure, f"{module}: importing it loads {sorted(names - closure)}, which the walk missed"
        assert at_import <= names, f"{module}: {sorted(at_import - names)} are reached by module-level imports only"
        extras |= closure - names
    assert "sparring.train.lm_head" in extras  # the deferred imports matter (train/sft.py's, for tokenizer)


@pytest.mark.parametrize("path", sorted(LIBRARY_FILES))
def test_the_stages_that_list_a_file_are_those_whose_module_reaches_it(path, walked, loaded):
    stages, module = dvc_stages(), LIBRARY_FILES[path]
    listed = {name for name, s in stages.items() if covers(s["deps"], path)}
    assert listed == {name for name in stages if path in walked[stage_module(name)][2]}
    at_import = {name for name in stages if module in loaded[stage_module(name)]}
    assert at_import and at_import <= listed
    for name in listed - at_import:  # listed though importing the module does not load it: a deferred import
        closure, module_level, _ = walked[stage_module(name)]
        assert module in closure - module_level, name


def test_the_committed_dvc_yaml_passes_the_check_and_one_missing_lm_head_does_not(tmp_path):
    from pipelines.cli import app

    result = CliRunner().invoke(app, ["dvc-yaml"], env={"SPARRING_ROOT": str(ROOT)})
    assert result.exit_code == 0 and "matches the stages" in result.output, result.output
    text = (ROOT / "dvc.yaml").read_text()
    (tmp_path / "dvc.yaml").write_text(text.replace(f"    - {LM_HEAD}\n", "", 1))
    result = CliRunner().invoke(app, ["dvc-yaml"], env={"SPARRING_ROOT": str(tmp_path)})
    assert result.exit_code == 1 and "out of date" in " ".join(result.output.split()), result.output


def test_the_walk_reads_imports_as_python_runs_them(tmp_path):
    """Deferred imports count and are marked, TYPE_CHECKING ones do not (their else branch does), `from a import b`
    is the submodule a.b when there is one, relative imports resolve, packages above a module and package data
    beside it count, and a folder whose every file is listed is named once."""
    package = tmp_path / "src" / "sparring"
    (package / "world").mkdir(parents=True)
    for name in ("__init__.py", "world/__init__.py", "world/bank.py", "world/extra.py", "late.py", "typed.py"):
        (package / name).write_text("")
    (package / "world" / "taxonomy.json").write_text("{}")
    (package / "world" / "__pycache__").mkdir()
    (package / "world" / "__pycache__" / "bank.cpython-311.pyc").write_bytes(b"")  # ignored, as DVC ignores it
    (package / "main.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "from sparring.world import bank\n"
        "from . import world as w\n"
        "from .world.extra import CONSTANT\n"
        "if TYPE_CHECKING:\n    from sparring import typed\nelse:\n    pass\n"
        "def f():\n    from sparring import late\n"
    )
    assert sorted(imports("sparring.main", tmp_path)) == [
        ("sparring", False), ("sparring", False), ("sparring", False), ("sparring", True),
        ("sparring.late", True), ("sparring.world", False), ("sparring.world", False), ("sparring.world", False),
        ("sparring.world.bank", False), ("sparring.world.extra", False),
    ]  # fmt: skip
    assert import_closure("sparring.main", tmp_path, deferred=False) == {
        "sparring", "sparring.main", "sparring.world", "sparring.world.bank", "sparring.world.extra"
    }  # fmt: skip
    files = code_files("sparring.main", tmp_path)
    assert "src/sparring/late.py" in files and "src/sparring/typed.py" not in files
    assert "src/sparring/world/taxonomy.json" in files
    assert collapse(files, tmp_path) == [
        "src/sparring/__init__.py", "src/sparring/late.py", "src/sparring/main.py", "src/sparring/world"
    ]  # fmt: skip
