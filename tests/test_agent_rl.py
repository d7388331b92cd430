"""agent_rl (RL-ADA's step 1): DA0 -> DA1 by GRPO, validated every K steps, resumable after a kill."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch

from sparring.data.synthetic import generate_utterances
from sparring.lm.chat import known_intents
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.tokenizer import train_tokenizer
from sparring.params import ParamsError, load_params
from sparring.settings import AgentRLSettings, CoevolutionSettings, GRPOSettings, SelfTrainingSettings
from sparring.train.agent_rl import CURVE_FILE, TRAINER_DIR, chosen_step, train_agent_rl
from sparring.world.scenarios import sample_scenarios
from sparring.world.taxonomy import load_taxonomy

torch.set_num_threads(1)
SPEC = ModelSpec(hidden_size=48, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=96)
GRPO = GRPOSettings(
    num_generations=4, scenarios_per_step=2, max_new_tokens=6, max_turns=2, learning_rate=3e-2, lr_scheduler="constant"
)
CO = CoevolutionSettings(agent_grpo=GRPO, adversary_grpo=GRPO.replace(learning_rate=1e-4))
RL = AgentRLSettings(max_steps=4, eval_every=2, validation_scenarios=3, self_training=SelfTrainingSettings(rounds=0))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("agent-rl"))


def make_world(root):
    """DA0 and a simulator (tiny random-init models sharing one tokenizer), gym and validation scenarios."""
    tok = train_tokenizer(generate_utterances(3, 0)["text"].to_list(), 700, sorted(known_intents()))
    save_checkpoint(build_model(SPEC, tok), tok, root / "da0")
    save_checkpoint(build_model(SPEC, tok, seed=1), tok, root / "sim")
    tools = {name: i.tool for name, i in load_taxonomy().intents.items()}
    frame = generate_utterances(1, 9).with_columns(
        id=pl.format("c-{}", pl.int_range(pl.len())),
        tool=pl.col("intent").replace_strict(tools),
        source=pl.lit("synthetic"),
    )
    scenarios = sample_scenarios(frame, 10, seed=4)
    return root, scenarios[:6], scenarios[6:]


def run(world, out, scratch, callbacks=()):
    root, gym, validation = world
    return train_agent_rl(
        root / "da0", root / "sim", gym, validation, CO, RL, load_params().judge.reward, out, scratch,
        seed=3, callbacks=callbacks,
    )  # fmt: skip


def weights(folder):
    model, _ = load_checkpoint(folder)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(world, tmp_path, kill_at):
    whole = run(world, tmp_path / "a" / "da1", tmp_path / "a" / "scratch")
    assert [row["step"] for row in whole.curve] == [0, 2, 4] and whole.resumed_from == 0
    assert json.loads((tmp_path / "a" / "da1" / CURVE_FILE).read_text())["chosen_step"] == whole.step
    start, trained = weights(world[0] / "da0"), weights(tmp_path / "a" / "scratch" / "kept" / "step_4")
    assert any(not torch.equal(start[k], trained[k]) for k in start), "GRPO changed no weight: nothing to compare"

    scratch = tmp_path / "b" / "scratch"
    with pytest.raises(kill_at.Killed, match="killed before step 4"):
        run(world, tmp_path / "b" / "da1", scratch, [kill_at(3)])
    assert not (tmp_path / "b" / "da1").exists()  # no DA1 from a run cut short
    assert (scratch / TRAINER_DIR / "checkpoint-2").is_dir()
    again = run(world, tmp_path / "b" / "da1", scratch)
    assert again.resumed_from == 2 and again.step == whole.step
    assert [r["score"] for r in again.curve] == [r["score"] for r in whole.curve]
    for step in (2, 4):
        a, b = (weights(tmp_path / x / "scratch" / "kept" / f"step_{step}") for x in "ab")
        assert all(torch.equal(a[k], b[k]) for k in a), f"step {step} differs after the resume"
    a, b = weights(tmp_path / "a" / "da1"), weights(tmp_path / "b" / "da1")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_da1_is_the_trained_step_best_on_validation_or_the_last():
    curve = [
        {"step": 0, "score": 0.9},
        {"step": 20, "score": 0.5},
        {"step": 40, "score": 0.7},
        {"step": 60, "score": 0.7},
    ]
    assert chosen_step(curve, "best") == 40  # the start never counts; the earliest of equals
    assert chosen_step(curve, "last") == 60
    assert chosen_step(curve[:1], "best") == 0  # no GRPO step (max_steps 0): the start is DA1
    with pytest.raises(ValueError, match="no step"):
        chosen_step([], "best")


def test_validation_larger_than_given_is_refused(world, tmp_path):
    root, gym, validation = world
    with pytest.raises(ValueError, match="validation scenarios"):
        train_agent_rl(
            root / "da0", root / "sim", gym, validation[:2], CO, RL, load_params().judge.reward,
            tmp_path / "out", tmp_path / "scratch",
        )  # fmt: skip


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("agent_rl: {max_steps: -3}\n", "agent_rl.max_steps"),
        ("coevolution: {agent_grpo: {learning_rate: 0}}\n", "coevolution.agent_grpo.learning_rate"),
        ("agent_rl: {validation_scenarios: 500}\n", "agent_rl.validation_scenarios"),
        ("agent_rl: {max_steps: 100, eval_every: 500}\n", "agent_rl"),
    ],
)
def test_a_bad_agent_rl_setting_is_refused_with_the_keys_path(tmp_path, yaml_text, key):
    path = tmp_path / "params.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ParamsError, match=key.replace(".", r"\.")):
        load_params(path)
