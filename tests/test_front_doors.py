"""Every mistake a user can make at the front doors ends in one line naming the file, key or stage, a non-zero
exit, no traceback, and nothing that stood before changed: `sparring ingest --out`, `sparring route` and its
checkpoint, `sparring stage` with a missing upstream or a profile DVC would not record.

With tests/test_ingest_bad_input.py (the input files' own problems) these are the bad-input cases of issue 23."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pipelines.cli import app
from sparring.atomic import MANIFEST
from sparring.lm.checkpoints import CheckpointError, load_checkpoint
from sparring.world.taxonomy import load_taxonomy
from stagekit.project import copy_project

ROOT = Path(__file__).resolve().parents[1]
INTENTS = load_taxonomy().intent_names
PARQUET = {f"{p}{s}.parquet" for p in ("", "dialogues_") for s in ("train", "validation", "test")}


def digest(path: Path) -> dict[str, str]:
    """Every file under ``path`` (or ``path`` itself) by relative name -> sha256."""
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def flat(output: str) -> str:
    return " ".join(output.split())  # rich wraps long lines


def assert_one_clear_error(result, *expected: str) -> None:
    """Refused: a non-zero exit, every expected fragment in the message, no traceback."""
    assert result.exit_code not in (0, None), result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, AssertionError), result.output
    assert result.output.lstrip().startswith("error:"), result.output
    for fragment in expected:
        assert " ".join(fragment.split()) in flat(result.output), (fragment, result.output)


# ---- sparring ingest --out -------------------------------------------------------------------------------------


def good_csv(per_intent: int = 4) -> str:
    rows = [f'"help me with {i.replace("_", " ")}, case {k}",{i}' for i in INTENTS for k in range(per_intent)]
    return "text,category\n" + "\n".join(rows) + "\n"


def good_jsonl(n: int = 77) -> str:
    lines = []
    for k in range(n):
        turns = [{"role": "customer", "text": f"about case {k}"}, {"role": "agent", "text": "On it."}]
        lines.append(json.dumps({"id": f"d{k}", "intent": INTENTS[k % 77], "outcome": "resolved", "turns": turns}))
    return "\n".join(lines) + "\n"


@pytest.fixture()
def project(tmp_path):
    """A params file pointing at u.csv and d.jsonl (good data), and a good ingest output in out/."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["ingest"]["utterances"].update(source="banking77_csv", path="u.csv")
    raw["ingest"]["dialogues"].update(source="dialogues_jsonl", path="d.jsonl")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "u.csv").write_text(good_csv())
    (tmp_path / "d.jsonl").write_text(good_jsonl())
    result = ingest(tmp_path, tmp_path / "out")
    assert result.exit_code == 0, result.output
    return tmp_path


def ingest(root: Path, out: Path):
    args = ["ingest", "--profile", "quick", "--params", str(root / "params.yaml"), "--out", str(out)]
    return CliRunner().invoke(app, args)


def test_out_naming_a_file_is_refused_and_the_file_kept(project):
    target = project / "thesis.tex"
    target.write_text("four years of work")
    result = ingest(project, target)
    assert_one_clear_error(result, f"{target}: exists and is not a folder sparring wrote")
    assert target.read_text() == "four years of work"


def test_out_holding_unrelated_files_is_refused_by_name(project):
    out = project / "notes"
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (out / "sub" / "thesis.tex").write_text("also mine")
    before = digest(out)
    result = ingest(project, out)
    assert_one_clear_error(result, f"{out}: holds files sparring did not write (notes.txt, sub/thesis.tex)")
    assert digest(out) == before


def test_out_dot_is_refused_and_the_project_untouched(project):
    before = digest(project)
    result = ingest(project, project)  # `--out .` from the project folder
    assert_one_clear_error(result, f"{project}: holds files sparring did not write")
    assert digest(project) == before


def test_a_file_added_to_sparrings_output_makes_it_no_longer_replaceable(project):
    (project / "out" / "my_analysis.ipynb").write_text("{}")
    before = digest(project / "out")
    result = ingest(project, project / "out")
    assert_one_clear_error(result, "holds files sparring did not write (my_analysis.ipynb)")
    assert digest(project / "out") == before


def test_sparrings_own_output_is_replaced_whole(project):
    """The positive side: its own earlier output (manifest), or one from before manifests (the six parquet
    files alone), is replaced, atomically, with nothing left beside it."""
    (project / "u.csv").write_text(good_csv(per_intent=5))
    before = digest(project / "out")
    assert ingest(project, project / "out").exit_code == 0
    after = digest(project / "out")
    assert after != before and set(after) == PARQUET | {MANIFEST}
    (project / "out" / MANIFEST).unlink()  # as a version of sparring without manifests left it
    assert ingest(project, project / "out").exit_code == 0
    assert not [p for p in project.iterdir() if p.name.startswith(".out.")]


def unwritable(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes through permission bits; /sys refuses even root
        return Path("/sys/sparring-front-doors-test/out")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return locked / "out"


def test_unwritable_out_is_one_line(project, tmp_path):
    target = unwritable(tmp_path)
    result = ingest(project, target)
    assert_one_clear_error(result, f"{target}: cannot write the output")
    assert not target.exists()


def test_one_row_repeated_is_refused_with_the_counts(project):
    before = digest(project / "out")
    (project / "u.csv").write_text("text,category\n" + "my card has not arrived,card_arrival\n" * 50)
    result = ingest(project, project / "out")
    assert_one_clear_error(
        result,
        f"{project / 'u.csv'}: too few distinct rows to split: train 1, validation 0, test 0 rows after dropping "
        "49 duplicate(s)",
        "intent 'card_arrival': train 1, validation 0, test 0",
    )
    assert digest(project / "out") == before


def test_an_intent_too_small_to_split_is_refused_by_name(project):
    before = digest(project / "out")
    lines = [line for line in good_csv().splitlines() if not line.endswith(",card_arrival")]
    (project / "u.csv").write_text("\n".join([*lines, "only one,card_arrival"]) + "\n")
    result = ingest(project, project / "out")
    assert_one_clear_error(result, "intent 'card_arrival': train 1, validation 0, test 0", "at least 3 distinct rows")
    assert digest(project / "out") == before


def test_dialogues_too_few_to_split_are_refused_with_the_counts(project):
    before = digest(project / "out")
    (project / "d.jsonl").write_text(good_jsonl(n=2))
    result = ingest(project, project / "out")
    assert_one_clear_error(
        result, f"{project / 'd.jsonl'}: too few distinct dialogues to split: train 2, validation 0, test 0"
    )
    assert digest(project / "out") == before


# ---- sparring route and checkpoints ----------------------------------------------------------------------------


def fake_checkpoint(folder: Path) -> Path:
    """A folder shaped as a checkpoint (config, tokenizer config, one real safetensors file): enough for every
    check that runs before transformers is asked to load anything."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / "tokenizer_config.json").write_text("{}")
    save_file({"w": np.zeros((64, 64), dtype=np.float32)}, str(folder / "model.safetensors"))
    return folder


@pytest.fixture()
def routing(tmp_path):
    csv_in = tmp_path / "in.csv"
    csv_in.write_text("text\nmy card never came\n")
    return csv_in, fake_checkpoint(tmp_path / "ckpt")


def route(csv_in: Path, checkpoint: Path, *extra: str):
    return CliRunner().invoke(app, ["route", str(csv_in), "--checkpoint", str(checkpoint), *extra])


def test_route_refuses_a_truncated_checkpoint_naming_the_file(routing):
    csv_in, ckpt = routing
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    before = digest(csv_in.parent)
    result = route(csv_in, ckpt)
    assert_one_clear_error(result, f"{weights}: truncated or corrupt")
    assert len(result.output.strip().splitlines()) <= 2 and digest(csv_in.parent) == before


@pytest.mark.parametrize("pickle_name", ["pytorch_model.bin", "model.pt", "state.pkl"])
def test_route_refuses_a_checkpoint_holding_a_pickle(routing, pickle_name):
    csv_in, ckpt = routing
    (ckpt / pickle_name).write_bytes(b"\x80\x04K\x01.")  # a pickle: loading it could run code
    before = digest(csv_in.parent)
    result = route(csv_in, ckpt)
    assert_one_clear_error(result, f"{ckpt / pickle_name}: a pickle file; sparring loads only safetensors")
    assert digest(csv_in.parent) == before


def test_load_checkpoint_refuses_pickles_for_every_caller(tmp_path):
    """evaluate and co-evolution load agents and adversaries through load_checkpoint: the same refusal."""
    ckpt = fake_checkpoint(tmp_path / "ckpt")
    (ckpt / "model.safetensors").unlink()
    (ckpt / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(CheckpointError, match="pytorch_model.bin: a pickle file"):
        load_checkpoint(ckpt)


def test_route_refuses_a_checkpoint_with_a_corrupt_config(routing):
    csv_in, ckpt = routing
    (ckpt / "config.json").write_text('{"model_type": ')
    result = route(csv_in, ckpt)
    assert_one_clear_error(result, f"{ckpt / 'config.json'}: not valid JSON")


def test_route_names_a_checkpoint_transformers_cannot_load(routing):
    csv_in, ckpt = routing
    (ckpt / "config.json").write_text(json.dumps({"model_type": "no_such_architecture"}))
    before = digest(csv_in.parent)
    result = route(csv_in, ckpt)
    assert_one_clear_error(result, f"{ckpt}: cannot load the checkpoint")
    assert digest(csv_in.parent) == before


def test_route_out_naming_a_folder_is_refused_and_leaves_no_temp_file(routing):
    csv_in, ckpt = routing
    folder = csv_in.parent / "results"
    folder.mkdir()
    (folder / "keep.csv").write_text("a\n1\n")
    before = digest(csv_in.parent)
    result = route(csv_in, ckpt, "--out", str(folder))
    assert_one_clear_error(result, f"{folder}: is a folder; --out names the CSV file to write")
    assert digest(csv_in.parent) == before and not list(csv_in.parent.rglob(".*tmp*"))


def test_route_out_over_a_file_it_did_not_write_is_refused(routing):
    csv_in, ckpt = routing
    target = csv_in.parent / "budget.csv"
    target.write_text("month,amount\njan,3\n")
    result = route(csv_in, ckpt, "--out", str(target))
    assert_one_clear_error(result, f"{target}: exists and is not a CSV `sparring route` wrote")
    assert target.read_text() == "month,amount\njan,3\n"


def test_route_out_over_its_own_input_is_refused(routing):
    csv_in, ckpt = routing
    before = digest(csv_in)
    result = route(csv_in, ckpt, "--out", str(csv_in))
    assert_one_clear_error(result, f"{csv_in}: is the input file")
    assert digest(csv_in) == before


def test_route_unwritable_out_is_one_line(routing, tmp_path):
    csv_in, ckpt = routing
    target = unwritable(tmp_path).with_suffix(".csv")
    result = route(csv_in, ckpt, "--out", str(target))
    assert_one_clear_error(result, f"{target}: cannot write there")


# ---- sparring stage ---------------------------------------------------------------------------------------------


@pytest.fixture()
def empty_project(tmp_path):
    root = copy_project(ROOT, tmp_path / "project", lambda raw: raw.update(profile="quick"))
    return root, {"SPARRING_ROOT": str(root), "DAGSTER_HOME": str(root / ".dagster"), "SPARRING_PROFILE": None}


def test_stage_with_a_missing_upstream_says_which_stage_to_run_first(empty_project):
    root, env = empty_project
    (root / "data" / "ingest").mkdir(parents=True)  # ingest made, scenarios not
    result = CliRunner().invoke(app, ["stage", "tokenizer"], env={**env, "DVC_STAGE": None})
    assert_one_clear_error(
        result,
        "stage tokenizer needs data/scenarios from stage scenarios: run `sparring stage scenarios` "
        "(or `sparring run`) first",
    )
    assert len(result.output.strip().splitlines()) <= 2  # before any log line
    assert digest(root / "data") == {} and not (root / "mlruns").exists()


def test_unknown_stage_lists_the_stages(empty_project):
    root, env = empty_project
    result = CliRunner().invoke(app, ["stage", "ingets"], env=env)
    assert_one_clear_error(result, "unknown stage 'ingets' (stages: ingest,", "cycle_1,", "evaluate, report)")


def test_stage_under_dvc_refuses_a_profile_dvc_would_not_record(empty_project):
    """DVC records params.yaml's `profile:`; a stage run by `dvc repro` on another profile would make dvc.lock lie."""
    root, env = empty_project
    under_dvc = {**env, "DVC_STAGE": "ingest", "SPARRING_PROFILE": "default"}
    result = CliRunner().invoke(app, ["stage", "ingest"], env=under_dvc)
    assert_one_clear_error(
        result,
        "stage ingest: SPARRING_PROFILE=default, but DVC tracks params.yaml's `profile: quick`",
        "set `profile: default` in params.yaml, or run `dvc exp run -S profile=default`",
    )
    assert not (root / "data").exists() and not (root / "reports").exists()


def test_a_stage_refusing_bad_input_prints_one_line_and_keeps_the_earlier_output(empty_project):
    """Inside Dagster: the user's error, not Dagster's log of it with a stack trace; the good output stays."""
    root, env = empty_project
    raw = yaml.safe_load((root / "params.yaml").read_text())
    raw["ingest"]["utterances"].update(source="banking77_csv", path="u.csv")
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (root / "u.csv").write_text(good_csv())
    made = CliRunner().invoke(app, ["stage", "ingest"], env=env)
    assert made.exit_code == 0, made.output
    before = {**digest(root / "data" / "ingest"), **digest(root / "reports" / "ingest.json")}
    (root / "u.csv").write_text("text,category\nhi,card_arrival\nyo,card_arival\n")
    result = CliRunner().invoke(app, ["stage", "ingest"], env=env)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "STEP_FAILURE" not in result.output, result.output
    assert f"{root / 'u.csv'}: 1 problem(s): row 2, column 'category': unknown intent 'card_arival'" in flat(
        result.output
    )
    assert "IngestError" not in result.output  # the message, not the exception's class
    assert {**digest(root / "data" / "ingest"), **digest(root / "reports" / "ingest.json")} == before


# ---- first contact: help, version, a mistyped profile ------------------------------------------------------------


def test_run_help_says_what_each_profile_is_and_how_long_it_takes():
    from sparring.params import PROFILE_GUIDE, PROFILES

    assert set(PROFILE_GUIDE) == set(PROFILES)
    shown = flat(CliRunner().invoke(app, ["run", "--help"], terminal_width=200).output)
    for name, (what, took) in PROFILE_GUIDE.items():
        assert f"{name}: {what}. On 2 cores: {took}." in shown, name
    assert "quick: the smoke test" in shown and "about 70 s" in shown and "default: the main job" in shown
    assert "about 2 h 20 min" in shown


def test_params_help_lists_every_profile_and_stage_help_every_stage():
    from sparring.params import PROFILES

    params_help = flat(CliRunner().invoke(app, ["params", "--help"], terminal_width=200).output)
    assert " | ".join(PROFILES) in params_help
    stage_help = flat(CliRunner().invoke(app, ["stage", "--help"], terminal_width=200).output)
    stages = list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])
    assert f"Stages, in run order: {', '.join(stages)}." in stage_help


def test_version_prints_the_package_version():
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith(f"sparring {version('sparring')}"), result.output


@pytest.mark.parametrize("command", ["run", "stage ingest"])
def test_a_mistyped_profile_names_the_flag(empty_project, command):
    root, env = empty_project
    result = CliRunner().invoke(app, [*command.split(), "--profile", "quik"], env=env)
    assert_one_clear_error(result, f"{root / 'params.yaml'}: --profile: unknown profile 'quik'")
    assert "SPARRING_PROFILE" not in result.output and not (root / "data").exists()


def test_a_first_run_prints_the_measured_estimate_until_its_stages_have_times(tmp_path):
    from pipelines.cli import estimate_line
    from pipelines.definitions import STAGES

    assert estimate_line(tmp_path, STAGES, "default", 2) == (
        "no stage times here yet; a whole run on 2 cores: about 2 h 20 min (2 h 18 min measured from a fresh clone "
        "on 2026-12-07, other work beside its first hour)"
    )
    (tmp_path / "reports" / "timings").mkdir(parents=True)
    timings = {"profile": "default", "wall_seconds": 60.0}
    (tmp_path / "reports" / "timings" / "ingest.json").write_text(json.dumps(timings))
    assert estimate_line(tmp_path, STAGES, "default", 2).startswith("at least 1m00s from the stages' last times")


# ---- a stage's fixed output folder holding a file sparring did not write -----------------------------------------


def foreign_file_in(folder: Path) -> None:
    """``folder`` as sparring's own output (its manifest) with a user's NOTES.md added."""
    from sparring.atomic import write_manifest

    folder.mkdir(parents=True)
    write_manifest(folder)
    (folder / "NOTES.md").write_text("mine\n")


def test_a_foreign_file_in_a_stages_folder_is_refused_before_it_trains(empty_project, monkeypatch):
    """It was found after judge_models trained, when the new folder was swapped in (on the default profile, after
    up to 35 minutes of SFT for the stages that hold models); and "choose a new or empty folder" does not fit a
    stage, whose folder is fixed."""
    import sparring.drivers.judge_models

    root, env = empty_project
    assert CliRunner().invoke(app, ["stage", "ingest"], env=env).exit_code == 0
    foreign_file_in(root / "models" / "judge")
    trained = []
    monkeypatch.setattr(sparring.drivers.judge_models, "build_judge_models", lambda *a, **k: trained.append(1))
    result = CliRunner().invoke(app, ["stage", "judge_models"], env=env)
    assert_one_clear_error(
        result,
        f"{root / 'models' / 'judge'}: holds files sparring did not write (NOTES.md); refusing to replace it: "
        "stage judge_models writes this folder whole; move them elsewhere (nothing was run)",
    )
    assert not trained and (root / "models" / "judge" / "NOTES.md").read_text() == "mine\n"
    assert "choose a new" not in result.output and "started" not in result.output  # before Dagster starts it


def test_a_stage_run_from_dagster_refuses_a_foreign_file_before_it_trains(tmp_path):
    """The Dagster UI (and `sparring run`'s stage processes) run the asset without the command's check."""
    from dagster import materialize

    from stagekit.resources import MlflowTracking, ProjectResource
    from stagekit.stages import Stage, StageOutput, stage_asset

    ran = []
    declared = Stage(name="fixed", description="", params=(), deps=(), outs=("models/fixed",))
    asset = stage_asset(declared)(lambda ctx: ran.append(1) or StageOutput(metrics={}))
    (tmp_path / "params.yaml").write_text("profile: quick\n")
    foreign_file_in(tmp_path / "models" / "fixed")
    resources = {"project": ProjectResource(root=str(tmp_path)), "mlflow": MlflowTracking(root=str(tmp_path))}
    result = materialize([asset], resources=resources, raise_on_error=False)
    assert not result.success and not ran
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.cause.message
    assert "models/fixed: holds files sparring did not write (NOTES.md)" in message
    assert "stage fixed writes this folder whole" in message and not (tmp_path / "mlruns").exists()


def test_run_checks_every_stages_folder_before_the_first_stage(empty_project):
    root, env = empty_project
    foreign_file_in(root / "models" / "cycles" / "cycle_2")
    result = CliRunner().invoke(app, ["run"], env=env)
    assert_one_clear_error(result, "cycle_2: holds files sparring did not write (NOTES.md)", "stage cycle_2 writes")
    assert not (root / "data").exists() and not (root / "reports").exists()  # no stage ran


# ---- checkpoints: the hint names the agent folder; weights readable like their siblings ---------------------------


def test_a_folder_holding_checkpoints_is_named_with_them(tmp_path):
    """`sparring chat --checkpoint models/cycles/cycle_2` said "train one with `sparring run`": the agent was in it."""
    cycle = tmp_path / "cycles" / "cycle_2"
    for side in ("agent", "adversary"):
        (cycle / side).mkdir(parents=True)
        (cycle / side / "config.json").write_text("{}")
    (cycle / "state.json").write_text("{}")
    result = CliRunner().invoke(app, ["chat", "--checkpoint", str(cycle)], input="/end\n")
    in_it = f"{cycle / 'agent'}, {cycle / 'adversary'}"
    assert_one_clear_error(result, f"{cycle}: not a model checkpoint (no config.json); the checkpoints in it: {in_it}")
    assert "sparring run" not in result.output
    result = CliRunner().invoke(app, ["chat", "--checkpoint", str(tmp_path)], input="/end\n")
    assert_one_clear_error(result, f"{tmp_path}: not a model checkpoint (no config.json); train one with `sparring")


def test_weights_in_an_output_folder_are_readable_like_their_siblings(tmp_path):
    """safetensors writes its files 0600; a checkpoint's config and tokenizer beside them are 0644."""
    import torch
    from safetensors.torch import save_file

    from sparring.atomic import replace_dir

    def fill(folder: Path) -> None:
        save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))
        (folder / "config.json").write_text("{}")

    replace_dir(tmp_path / "ckpt", fill)
    umask = os.umask(0o022)
    os.umask(umask)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "ckpt").iterdir()}
    assert set(modes.values()) == {0o666 & ~umask}, {k: oct(v) for k, v in modes.items()}
