"""Issue 76's agent gym: a league of opponents in the declared shares, and agent_rl's self-training (the expert's
corrections) as a cycle's agent trainer, deterministic and resumable as the GRPO gym is."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest
import torch

from sparring.agents.openings import ContinuesUtterance, OpensWithUtterance
from sparring.agents.scripted import expert_agent
from sparring.data.synthetic import generate_utterances
from sparring.judge.rewards import Judge
from sparring.lm.chat import known_intents
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.models import build_model
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import CoevolutionSettings, SelfTrainingSettings, SFTSettings
from sparring.train.coevolution import agent_opponents, run_cycle
from sparring.train.cycle_state import CycleState, dips_and_recovers
from sparring.train.self_training import Teacher
from sparring.world.scenarios import sample_scenarios
from sparring.world.taxonomy import load_taxonomy
from tests.test_coevolution import SPEC, FixedBackend, comparable, tiny

LEAGUE = {"adversary": 0.4, "pool": 0.2, "ref": 0.2, "coop": 0.2}


@pytest.fixture(scope="module")
def scenarios():
    """test_coevolution's twelve scenarios."""
    tools = {name: i.tool for name, i in load_taxonomy().intents.items()}
    frame = generate_utterances(1, 9).with_columns(
        id=pl.format("c-{}", pl.int_range(pl.len())), tool=pl.col("intent").replace_strict(tools),
        source=pl.lit("synthetic"),
    )  # fmt: skip
    return sample_scenarios(frame, 12, seed=4)


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """test_coevolution's DA0 and simulator: tiny random-init models sharing one tokenizer."""
    root = tmp_path_factory.mktemp("league")
    tok = train_tokenizer(generate_utterances(3, 0)["text"].to_list(), 700, sorted(known_intents()))
    save_checkpoint(build_model(SPEC, tok), tok, root / "da0")
    save_checkpoint(build_model(SPEC, tok, seed=1), tok, root / "sim")
    return CycleState(agent_dir=str(root / "da0"), simulator_dir=str(root / "sim"))


class Fake:
    tokenizer = None

    def __init__(self, folder: str) -> None:
        self.folder = folder


def _who(policy: object) -> str:
    """Which league member a drawn customer is: coop (the simulator opening with the utterance, cooperative), ref
    (the simulator as generation 0, going on from it) or a generation's folder."""
    if isinstance(policy, OpensWithUtterance):
        return "coop"
    folder = policy.policy.folder if isinstance(policy, ContinuesUtterance) else policy.folder
    return "ref" if folder == "sim" else folder


def test_the_league_draws_the_current_adversary_past_generations_and_generation_0_in_the_declared_shares(scenarios):
    state = CycleState(cycle=4, agent_dir="a", simulator_dir="sim", adversary_dirs=["g1", "g2", "g3"])
    choose = agent_opponents(state, LEAGUE, Fake, "utterance", "utterance")
    n = 6000
    drawn = Counter(_who(choose(scenarios[0], seed)) for seed in range(n))
    expected = {"g3": 0.4, "g1": 0.1, "g2": 0.1, "ref": 0.2, "coop": 0.2}  # pool: uniform over the earlier two
    assert set(drawn) == set(expected)
    for who, share in expected.items():
        assert abs(drawn[who] / n - share) < 0.02, (who, drawn[who] / n)


def test_before_any_generation_is_earlier_the_pool_share_meets_the_current_adversary(scenarios):
    state = CycleState(cycle=1, agent_dir="a", simulator_dir="sim", adversary_dirs=["g1"])
    choose = agent_opponents(state, {"pool": 1.0, "ref": 1.0}, Fake, "utterance", "utterance")
    assert {_who(choose(scenarios[0], seed)) for seed in range(40)} == {"g1", "ref"}


def test_a_mix_key_outside_the_league_is_refused():
    state = CycleState(cycle=1, agent_dir="a", simulator_dir="sim")
    with pytest.raises(ValueError, match="adversary/pool/ref/coop"):
        agent_opponents(state, {"champion": 1.0}, Fake, "utterance", "utterance")
    with pytest.raises(ValueError, match="agent_self_training.rounds"):
        CoevolutionSettings(agent_recipe="self_training", agent_self_training=SelfTrainingSettings(rounds=0))


def self_training_settings(**kw) -> CoevolutionSettings:
    """tiny()'s cycles with the agent trained by one round of self-training (corrections on, no rehearsal)."""
    st = SelfTrainingSettings(
        rounds=1, samples=2, batch=8, intent_rehearsal=0, sft=SFTSettings(epochs=1, batch_size=4, max_length=512)
    )
    base = tiny("agent")
    return base.replace(agent_recipe="self_training", agent_self_training=st, self_training_scenarios=6,
                        agent_mix=LEAGUE, **kw)  # fmt: skip


def test_a_cycle_trains_the_agent_by_self_training_against_the_league_and_resumes_to_the_same_weights(
    tmp_path, start, scenarios
):
    judge, train, heldout = Judge(FixedBackend()), scenarios[:8], scenarios[8:]
    teacher = Teacher(expert=expert_agent(), forbidden=[s.scenario_id for s in heldout])
    first, m1 = run_cycle(start, train, heldout, judge, tiny("adversary"), tmp_path / "c1", seed=3)
    assert m1["trained"] == "adversary"
    settings = self_training_settings()
    second, m2 = run_cycle(first, train, heldout, judge, settings, tmp_path / "c2", seed=3, teacher=teacher)
    assert m2["trained"] == "agent" and second.agent_dir == str(tmp_path / "c2" / "agent")
    # a random DA0 never passes: every example is the expert's correction of a state the agent reached
    assert m2["self_training_episodes_round1"] == 12 and m2["self_training_kept_round1"] == 0
    assert m2["self_training_corrections_round1"] > 0 and "grpo_reward_first" not in m2
    assert not (tmp_path / "c2" / "self_training").exists()  # the rounds' scratch is not left in the cycle
    before, _ = load_checkpoint(first.agent_dir)
    after, _ = load_checkpoint(second.agent_dir)
    assert not torch.equal(before.lm_head.weight, after.lm_head.weight)

    loaded = CycleState.load(tmp_path / "c1")
    again, r2 = run_cycle(loaded, train, heldout, judge, settings, tmp_path / "d2", seed=3, teacher=teacher)
    timeless = [{k: v for k, v in comparable(m).items() if "seconds" not in k} for m in (r2, m2)]
    assert timeless[0] == timeless[1]  # self-training's figures are per round: self_training_<key>_round<r>
    resumed, _ = load_checkpoint(again.agent_dir)
    pairs = zip(after.state_dict().values(), resumed.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs)


def test_a_self_training_gym_without_its_teacher_or_with_a_held_out_scenario_is_refused(tmp_path, start, scenarios):
    judge, settings = Judge(FixedBackend()), self_training_settings()
    with pytest.raises(ValueError, match="expert that corrects"):
        run_cycle(start, scenarios[:8], scenarios[8:], judge, settings, tmp_path / "x", seed=3)
    leaked = Teacher(expert=expert_agent(), forbidden=[s.scenario_id for s in scenarios[:8]])
    with pytest.raises(ValueError, match="held-out or validation ids"):
        run_cycle(start, scenarios[:8], scenarios[8:], judge, settings, tmp_path / "y", seed=3, teacher=leaked)


@pytest.mark.parametrize(
    ("w_da", "trained", "expected"),
    [
        ([0.7, 0.6, 0.65], ["adversary", "agent", "adversary"], True),  # dipped after the adversary, recovered
        ([0.7, 0.6, 0.55], ["adversary", "agent", "adversary"], False),  # the agent's gym did not recover it
        ([0.7, 0.75, 0.8], ["adversary", "agent", "adversary"], False),  # no dip
        ([0.7, 0.6, 0.65], ["agent", "adversary", "agent"], False),  # the dip followed the agent's own gym
        ([0.7, 0.6], ["adversary", "agent"], False),  # no arena after the agent's gym yet
    ],
)
def test_dip_and_recover_reads_an_adversary_gym_then_the_agent_gym_after_it(w_da, trained, expected):
    assert dips_and_recovers(trained, w_da) is expected
