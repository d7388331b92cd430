from pathlib import Path

import pytest
import yaml

from sparring.params import ParamsError, load_params

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def project_params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_project_params_load_in_every_profile(monkeypatch):
    monkeypatch.delenv("SPARRING_PROFILE", raising=False)
    quick = load_params(ROOT / "params.yaml", "quick")
    default = load_params(ROOT / "params.yaml", "default")
    scale = load_params(ROOT / "params.yaml", "scale")
    assert quick.profile == "quick" and quick.ingest.utterances.per_intent < default.ingest.utterances.per_intent
    assert scale.ingest.utterances.per_intent > default.ingest.utterances.per_intent
    assert scale.runtime.torch_threads == 0 and default.runtime.torch_threads == 1
    # An override changes only the keys it names.
    assert quick.ingest.max_text_chars == default.ingest.max_text_chars
    b77 = load_params(ROOT / "params.yaml", "banking77")
    assert b77.ingest.utterances.source == "banking77_csv" and b77.ingest.utterances.path.endswith("train.csv")
    assert b77.agent_sft.intent.epochs > default.agent_sft.intent.epochs and b77.model == default.model


def test_env_selects_profile(monkeypatch):
    monkeypatch.setenv("SPARRING_PROFILE", "quick")
    assert load_params(ROOT / "params.yaml").profile == "quick"
    monkeypatch.setenv("SPARRING_PROFILE", "huge")
    with pytest.raises(ParamsError, match="SPARRING_PROFILE: unknown profile 'huge'"):
        load_params(ROOT / "params.yaml")


def test_a_changed_file_is_read_again_and_a_loaded_one_is_shared(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARRING_PROFILE", raising=False)
    raw = project_params()
    path = write(tmp_path, raw)
    first = load_params(path, "quick")
    assert load_params(path, "quick") is first  # one validation per file text (every stage of a run loads it)
    raw["seed"] = 7
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert load_params(path, "quick").seed == 7 and first.seed == 0
    monkeypatch.setenv("SPARRING_PROFILE", "default")
    assert load_params(path).profile == "default"


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r["ingest"]["utterances"].update(per_intnt=3), "ingest.utterances.per_intnt: unknown key"),
        (lambda r: r["ingest"]["utterances"].update(per_intent="many"), "ingest.utterances.per_intent: "),
        (lambda r: r["ingest"]["utterances"].update(per_intent=-2), "ingest.utterances.per_intent: "),
        (lambda r: r["ingest"]["split"].update(test=0.9), "ingest.split.test: "),
        (lambda r: r["runtime"].update(torch_threads=1.5), "runtime.torch_threads: "),
        (lambda r: r.update(sede=1), "sede: unknown key"),
        (lambda r: r["ingest"]["utterances"].update(source="excel"), "ingest.utterances.source: "),
        # A typo inside a profile block is named where it is written, even when another profile runs.
        (
            lambda r: r["ingest"]["profiles"]["scale"]["utterances"].update(per_intent=0),
            "ingest.profiles.scale.utterances.per_intent: ",
        ),
        (lambda r: r["ingest"]["profiles"].update(huge={}), "ingest.profiles.huge: unknown profile"),
        (lambda r: r["coevolution"]["agent_grpo"].update(completion="turn"), "coevolution.agent_grpo.completion: "),
        (lambda r: r["coevolution"]["adversary_grpo"].update(completion="first_turn"), "first_turn windows are the"),
        # K customer draws: at least one, and no more than the draw seeds a run takes (sparring.seeds.DRAW_SET)
        (lambda r: r["evaluate"].update(draws=0), "evaluate.draws: "),
        (lambda r: r["evaluate"].update(draws=-3), "evaluate.draws: "),
        (lambda r: r["evaluate"].update(draws=17), "evaluate.draws: "),
        (lambda r: r["evaluate"]["profiles"]["quick"].update(draws=99), "evaluate.profiles.quick.draws: "),
        (lambda r: r["evaluate"].update(opponents=["coop", "pool"]), "evaluate.opponents.1: "),
        (lambda r: r["evaluate"].update(opponents=[]), "evaluate.opponents: "),
        (lambda r: r["evaluate"].update(expert_draws=0), "evaluate.expert_draws: "),
    ],
)
def test_bad_params_are_refused_with_the_full_key_path(tmp_path, monkeypatch, edit, message):
    monkeypatch.delenv("SPARRING_PROFILE", raising=False)
    raw = project_params()
    edit(raw)
    path = write(tmp_path, raw)
    with pytest.raises(ParamsError) as info:
        load_params(path, "quick")
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_csv_source_needs_a_path(tmp_path, monkeypatch):
    raw = project_params()
    raw["ingest"]["utterances"]["source"] = "banking77_csv"
    with pytest.raises(ParamsError, match="ingest.utterances: .*needs a path"):
        load_params(write(tmp_path, raw), "default")


def test_flat_names_are_stable():
    flat = load_params(ROOT / "params.yaml", "quick").flat()
    assert flat["ingest.utterances.per_intent"] == 12
    assert flat["profile"] == "quick" and "seed" in flat


def test_params_yaml_says_what_the_code_defaults_are(monkeypatch):
    """The default profile of params.yaml and the settings types' defaults are one set of values: a reader of
    either sees what runs (a value changed in one place only fails here)."""
    from sparring.params import Params

    monkeypatch.delenv("SPARRING_PROFILE", raising=False)
    assert load_params(ROOT / "params.yaml", "default") == Params()


def test_the_trainers_read_the_settings_params_yaml_declares():
    """params.yaml's trainer sections are the library's settings types themselves, not copies of their fields."""
    from sparring.params import Params
    from sparring.settings import AgentSFTSettings, CoevolutionSettings, GRPOSettings, ModelSpec, SimulatorSFTSettings

    fields = Params.model_fields
    assert fields["model"].annotation is ModelSpec
    assert fields["agent_sft"].annotation is AgentSFTSettings
    assert fields["simulator_sft"].annotation is SimulatorSFTSettings
    assert fields["coevolution"].annotation is CoevolutionSettings
    assert CoevolutionSettings.model_fields["agent_grpo"].annotation is GRPOSettings


def test_a_key_written_twice_is_refused_naming_its_path(tmp_path, monkeypatch):
    """YAML keeps the last of two equal keys silently: `seed:` twice ran with the second seed."""
    monkeypatch.delenv("SPARRING_PROFILE", raising=False)
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    path = tmp_path / "params.yaml"
    path.write_text(text.replace("\nseed: 0\n", "\nseed: 0\nseed: 1\n", 1), encoding="utf-8")
    line = text.splitlines().index("seed: 0") + 1
    with pytest.raises(ParamsError, match=rf"^{path}: seed: written twice \(lines {line} and {line + 1}\); keep one$"):
        load_params(path, "quick")
    nested = text.replace("  parallel_stages: 2", "  parallel_stages: 2\n  parallel_stages: 3", 1)
    path.write_text(nested, encoding="utf-8")
    with pytest.raises(ParamsError, match="runtime.parallel_stages: written twice"):
        load_params(path, "quick")
