"""RL-ADA cycles: the stop rule, the replay mix, state files, and tiny real cycles (deterministic, resumable)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import numpy as np
import polars as pl
import pytest
import torch

from sparring.data.synthetic import generate_utterances
from sparring.judge.rewards import Judge
from sparring.lm.chat import known_intents
from sparring.lm.checkpoints import load_checkpoint, save_checkpoint
from sparring.lm.models import ModelSpec, build_model
from sparring.lm.tokenizer import train_tokenizer
from sparring.settings import CoevolutionSettings, GRPOSettings
from sparring.train.coevolution import behind_side, gym_scenarios, pick_side, run_cycle, stop_reason, weaker_side
from sparring.train.cycle_state import CycleState
from sparring.world.scenarios import sample_scenarios
from sparring.world.taxonomy import load_taxonomy

torch.set_num_threads(1)
SPEC = ModelSpec(
    hidden_size=48, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=96, tie_word_embeddings=False
)


class FixedBackend:
    """Fixed faithfulness/realism; "naming the intent" on odd-length texts, so the adversary's reward (0 or -1
    against an agent that never identifies anyone) still spreads within groups and GRPO has something to do."""

    def faithfulness(self, turns: Sequence[Sequence[str]], intents: Sequence[str]) -> np.ndarray:
        return np.full(len(turns), 0.9)

    def realism(self, turns: Sequence[Sequence[str]]) -> np.ndarray:
        return np.full(len(turns), 0.8)

    def named_outright(self, text: str, intent: str) -> bool:
        return len(text) % 2 == 1


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([0.56, 0.64, 0.62], "gates"),  # RL-ADA's trajectory: both gates hold over the last two cycles
        ([0.56, 0.64], None),  # 0.56 is under the competency gate
        ([0.61, 0.70], None),  # competent but still moving (Δ = 0.09)
        ([0.70, 0.65], "gates"),  # Δ = 0.05 exactly is stable
        ([0.64, 0.59], None),
        ([0.62], None),  # one cycle cannot show stability
        ([0.3] * 7, None),
        ([0.3] * 8, "max_cycles"),
        ([0.3, 0.9, 0.3, 0.9, 0.3, 0.9, 0.3, 0.9], "max_cycles"),
    ],
)
def test_stop_rule(history, expected):
    assert stop_reason(history, CoevolutionSettings(max_cycles=8), BOTH) == expected


BOTH = ("adversary", "agent")


def test_stop_rule_window_and_budget():
    assert stop_reason([0.6, 0.62, 0.7], CoevolutionSettings(window=3, max_cycles=8), BOTH) is None
    assert stop_reason([0.5, 0.6, 0.62, 0.65], CoevolutionSettings(window=3, max_cycles=8), BOTH) == "gates"
    assert stop_reason([0.1, 0.2], CoevolutionSettings(max_cycles=2), BOTH) == "max_cycles"


@pytest.mark.parametrize("trained", [(), ("adversary",), ("adversary", "none"), ("agent", "agent")])
def test_the_stop_rule_cannot_fire_before_each_side_trained(trained):
    # DA1 holds the gates from the first arenas (W_DA 0.7 and steady): the loop goes on until both sides trained.
    assert stop_reason([0.7, 0.7, 0.7], CoevolutionSettings(max_cycles=8), trained) is None
    assert stop_reason([0.7, 0.7, 0.7], CoevolutionSettings(max_cycles=8), (*trained, "adversary", "agent")) == "gates"
    assert stop_reason([0.7] * 8, CoevolutionSettings(max_cycles=8), trained) == "max_cycles"


def test_a_side_that_never_trained_trains_before_the_rule_compares_them():
    # The adversary's gym moved nothing (a tie would alternate; a gain for the agent would train the adversary
    # again): the agent, which never trained, trains in cycle 2 whatever the arena says.
    assert behind_side([0.7, 0.9], [0.1, 0.05], ["adversary"]) == "agent"
    assert behind_side([0.7, 0.5], [0.1, 0.3], ["agent"]) == "adversary"
    assert behind_side([0.7, 0.9], [0.1, 0.05], ["adversary", "agent"]) == "adversary"


def test_the_literal_weaker_rule_compares_raw_rates_and_never_trains_the_agent_on_this_scale():
    assert weaker_side(0.3, 0.5) == "agent" and weaker_side(0.6, 0.2) == "adversary"
    assert weaker_side(0.0, 0.0) == "adversary"
    # A seed-0 trajectory under `weaker`: W_DA 0.896 -> 0.708 -> 0.563 -> 0.667 against adversary wins of 0.1-0.3.
    assert {weaker_side(w, a) for w, a in ((0.896, 0.1), (0.708, 0.25), (0.563, 0.3), (0.667, 0.2))} == {"adversary"}


@pytest.mark.parametrize(
    ("w_da", "adv", "trained", "expected"),
    [
        ([0.9], [0.1], [], "adversary"),  # cycle 1: no previous arena, the adversary (no RL yet) trains first
        ([0.9, 0.7], [0.1, 0.25], ["adversary"], "agent"),  # its gym cost the agent 0.2, gained it 0.15
        ([0.9, 0.7, 0.8], [0.1, 0.25, 0.15], ["adversary", "agent"], "adversary"),  # the agent's gym undid it
        ([0.9, 0.7, 0.8, 0.82], [0.1, 0.25, 0.15, 0.2], ["adversary", "agent", "adversary"], "agent"),  # +.02 < +.05
        ([0.9, 0.95], [0.2, 0.1], ["agent"], "adversary"),  # the agent gained, the adversary lost
        ([0.1, 0.3], [0.2, 0.4], ["adversary"], "agent"),  # a tie (+0.2 each, up to float noise): the other side
        ([0.1, 0.3], [0.2, 0.4], ["agent"], "adversary"),
        ([0.8, 0.8], [0.2, 0.2], ["adversary"], "agent"),  # nothing moved: a tie
        ([0.9, 0.7], [0.25], ["adversary"], "agent"),  # a state saved before adv_success was kept: alternate
    ],
)
def test_the_side_that_lost_more_ground_since_the_last_arena_trains(w_da, adv, trained, expected):
    assert behind_side(w_da, adv, trained) == expected


def test_pick_side_follows_the_settings_rule_and_the_stop_gates():
    history = ([0.9, 0.7], [0.1, 0.25], ["adversary"])  # after the adversary's gym lowered W_DA
    assert CoevolutionSettings().train == "behind"
    assert pick_side(CoevolutionSettings(), *history, None) == "agent"
    assert pick_side(CoevolutionSettings(train="weaker"), *history, None) == "adversary"  # 0.7 > 0.25
    assert pick_side(CoevolutionSettings(train="agent"), [0.9], [0.1], [], None) == "agent"
    assert pick_side(CoevolutionSettings(train="adversary"), *history, "max_cycles") == "adversary"
    assert pick_side(CoevolutionSettings(), *history, "gates") == "none"


def test_a_state_json_from_before_adv_success_history_loads(tmp_path):
    import json

    state = CycleState("a", "s", cycle=2, w_da_history=[0.9, 0.7], trained_history=["adversary"])
    state.save(tmp_path)
    raw = json.loads((tmp_path / "state.json").read_text())
    assert raw.pop("adv_success_history") == []
    (tmp_path / "state.json").write_text(json.dumps(raw))  # as an older version wrote it
    old = CycleState.load(tmp_path)
    assert old == state and old.adv_success_history == []


@pytest.fixture(scope="module")
def scenarios():
    tools = {name: i.tool for name, i in load_taxonomy().intents.items()}
    frame = generate_utterances(1, 9).with_columns(
        id=pl.format("c-{}", pl.int_range(pl.len())),
        tool=pl.col("intent").replace_strict(tools),
        source=pl.lit("synthetic"),
    )
    return sample_scenarios(frame, 12, seed=4)


def test_gym_mix_is_failure_heavy_and_tops_up(scenarios):
    fresh, old = scenarios[:6], scenarios[6:]
    transcripts = [
        {
            "scenario": sc.to_dict(),
            "agent_won": i % 2 == 0,
            "adv_won": i % 2 == 1,
            "messages": [{"role": "user", "content": f"recorded opening {i} "}, {"role": "assistant", "content": ""}],
        }
        for i, sc in enumerate(old * 4)
    ]
    picked = gym_scenarios(fresh, transcripts, "agent", 20, 0.5, 0.7, random.Random(0))
    lost = {t["scenario"]["scenario_id"] for t in transcripts if not t["agent_won"]}
    won = {t["scenario"]["scenario_id"] for t in transcripts if t["agent_won"]}
    replayed = [sc for sc in picked if sc.scenario_id not in {f.scenario_id for f in fresh}]
    assert len(picked) == 16 and len(replayed) == 10  # 10 replayed + all 6 fresh (fewer than asked)
    assert sum(sc.scenario_id in lost for sc in replayed) == 7 and sum(sc.scenario_id in won for sc in replayed) == 3
    only_wins = [t for t in transcripts if t["agent_won"]]
    picked = gym_scenarios(fresh, only_wins, "agent", 8, 0.5, 0.7, random.Random(0))
    assert sum(sc.scenario_id in won for sc in picked) == 4  # no losses to replay: wins fill the replay share


def test_the_agents_gym_replays_the_recorded_opening_and_the_adversarys_writes_afresh(scenarios):
    """A replayed transcript gives the agent's gym the customer's recorded opening (the message it lost on), and
    its opponent plays it before its own turns, whichever opponent the mix draws; the adversary's gym replays the
    scenario only (its messages are what it learns), and fresh scenarios keep their utterance."""
    from sparring.agents.openings import OpensWithUtterance
    from sparring.train.coevolution import REPLAYED, agent_opponents

    fresh, old = scenarios[:2], scenarios[2:6]
    transcripts = [
        {"scenario": sc.to_dict(), "agent_won": False, "adv_won": True, "messages": [
            {"role": "user", "content": f" opening {i} then camouflage "}, {"role": "assistant", "content": "Hi"}]}
        for i, sc in enumerate(old)
    ]  # fmt: skip
    recorded = {t["scenario"]["scenario_id"]: t["messages"][0]["content"].strip() for t in transcripts}
    agent_gym = gym_scenarios(fresh, transcripts, "agent", 6, 0.5, 0.7, random.Random(0))
    replayed = [sc for sc in agent_gym if sc.utterance_source == REPLAYED]
    assert len(replayed) == 3 and all(sc.utterance == recorded[sc.scenario_id] for sc in replayed)
    assert all(sc.utterance == f.utterance for sc in agent_gym for f in fresh if sc.scenario_id == f.scenario_id)
    adversary_gym = gym_scenarios(fresh, transcripts, "adversary", 6, 0.5, 0.7, random.Random(0))
    assert not any(sc.utterance_source == REPLAYED or sc.utterance.startswith(" opening") for sc in adversary_gym)

    class Fake:
        tokenizer = None

        def __init__(self, folder: str) -> None:
            self.folder = folder

    state = CycleState(cycle=2, agent_dir="a", simulator_dir="sim", adversary_dirs=["g1", "g2"])
    for mix, folders in (({"coop": 1.0}, {"sim"}), ({"adversary": 1.0}, {"g2"}), ({"pool": 1.0}, {"g1"})):
        choose = agent_opponents(state, mix, Fake, "simulator", "own")
        drawn = [choose(replayed[0], seed) for seed in range(6)]
        assert all(isinstance(p, OpensWithUtterance) for p in drawn) and {p.policy.folder for p in drawn} == folders
        assert not isinstance(choose(fresh[0], 0), OpensWithUtterance)  # fresh: as the opponent opens


def test_an_agent_gym_opens_its_replayed_groups_with_the_arenas_recorded_messages(
    monkeypatch, tmp_path, start, scenarios
):
    import sparring.train.coevolution as coevolution
    import sparring.train.grpo as grpo
    from sparring.train.coevolution import REPLAYED

    played: list[tuple[object, list]] = []
    monkeypatch.setattr(coevolution, "run_episodes", partial(_recording, played=played)(coevolution.run_episodes))
    gym: list[tuple[object, list]] = []
    monkeypatch.setattr(grpo, "run_episodes", partial(_recording, played=gym)(grpo.run_episodes))
    settings = tiny("agent").replace(replay_share=1.0, eval_scenarios=0)
    run_cycle(start, scenarios[:4], scenarios[8:], Judge(FixedBackend()), settings, tmp_path / "c1", seed=5)
    arena = played[0][1]  # the cycle's first rollout is its arena
    openings = {next(m["content"] for m in ep.messages if m["role"] == "user").strip() for ep in arena}
    replays = [ep for _, eps in gym for ep in eps if ep.scenario.utterance_source == REPLAYED]
    assert replays and len(replays) == sum(len(eps) for _, eps in gym)  # replay_share 1: every group replays
    for ep in replays:
        said = next(m["content"] for m in ep.messages if m["role"] == "user")
        assert said == ep.scenario.utterance and said in openings


def test_an_unplayed_agent_gym_draws_the_agents_fresh_groups_and_the_arena_keeps_the_training_scenarios(
    monkeypatch, tmp_path, start, scenarios
):
    """``coevolution.agent_gym: unplayed``: the agent's fresh groups come from the gym set it is given, the arena
    still plays the training scenarios."""
    import sparring.train.coevolution as coevolution
    import sparring.train.grpo as grpo

    played: list[tuple[object, list]] = []
    monkeypatch.setattr(coevolution, "run_episodes", partial(_recording, played=played)(coevolution.run_episodes))
    gym: list[tuple[object, list]] = []
    monkeypatch.setattr(grpo, "run_episodes", partial(_recording, played=gym)(grpo.run_episodes))
    settings = tiny("agent").replace(replay_share=0.0, eval_scenarios=0)
    train, unplayed = scenarios[:4], scenarios[4:8]
    run_cycle(start, train, [], Judge(FixedBackend()), settings, tmp_path / "c1", seed=5, agent_gym=unplayed)
    arena = {ep.scenario.scenario_id for ep in played[0][1]}
    trained = {ep.scenario.scenario_id for _, eps in gym for ep in eps}
    assert arena <= {s.scenario_id for s in train}
    assert trained and trained <= {s.scenario_id for s in unplayed}


@pytest.fixture(scope="module")
def start(tmp_path_factory, scenarios):
    """A DA0 and a simulator checkpoint: tiny random-init models sharing one tokenizer."""
    root = tmp_path_factory.mktemp("coev")
    tok = train_tokenizer(generate_utterances(3, 0)["text"].to_list(), 700, sorted(known_intents()))
    save_checkpoint(build_model(SPEC, tok), tok, root / "da0")
    save_checkpoint(build_model(SPEC, tok, seed=1), tok, root / "sim")
    return CycleState(agent_dir=str(root / "da0"), simulator_dir=str(root / "sim"))


def tiny(train: str = "behind") -> CoevolutionSettings:
    # Groups of 4: with FixedBackend's parity rule a group of 2 has no spread half the time, and a gym of only
    # such groups (1 in 16 draws at groups of 2) leaves the adversary where it started.
    grpo = GRPOSettings(
        num_generations=4, scenarios_per_step=2, max_steps=2, max_new_tokens=6, max_turns=2, learning_rate=1e-2
    )
    return CoevolutionSettings(
        agent_grpo=grpo, adversary_grpo=grpo, arena_scenarios=3, gym_scenarios=4, eval_scenarios=3, train=train
    )


def short_episodes(**kw) -> CoevolutionSettings:
    """Held-out evaluations' episode shape for tests: two turns, six tokens a message."""
    return CoevolutionSettings(
        agent_grpo=GRPOSettings(max_turns=2, max_new_tokens=6), adversary_grpo=GRPOSettings(max_new_tokens=6), **kw
    )


def comparable(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if not k.endswith(("_seconds", "tokens_per_s"))}


def test_cycles_are_deterministic_and_resume_from_files(tmp_path, start, scenarios):
    judge = Judge(FixedBackend())
    train, heldout = scenarios[:8], scenarios[8:]
    first, m1 = run_cycle(start, train, heldout, judge, tiny(), tmp_path / "a1", seed=5)
    assert m1["trained"] == "adversary" and m1["w_da"] == 0.0  # random DA0 never passes; cycle 1 trains the CA
    assert first.adv_success_history == [m1["arena_adv_success"]] and 0.0 <= m1["arena_adv_faithfulness"] <= 1.0
    assert first.adversary_dirs == [str(tmp_path / "a1" / "adversary")] and first.agent_dir == start.agent_dir
    assert len(first.transcripts) == 6 and first.cycle == 1 and first.stopped is None
    for name in ("w_da", "strict_pass_coop", "routing_acc_coop", "strict_pass_adv", "strict_pass_advpool"):
        assert 0.0 <= m1[name] <= 1.0
    assert m1["adv_faithfulness"] == pytest.approx(0.9) and m1["grpo_tokens_per_s"] > 0
    sim, _ = load_checkpoint(tmp_path / "a1" / "adversary")
    base, _ = load_checkpoint(start.simulator_dir)  # the adversary started from the simulator and moved
    assert not torch.equal(sim.lm_head.weight, base.lm_head.weight)

    second, m2 = run_cycle(first, train, heldout, judge, tiny("agent"), tmp_path / "a2", seed=5)
    assert m2["trained"] == "agent" and second.agent_dir == str(tmp_path / "a2" / "agent")
    assert second.w_da_history == [m1["w_da"], m2["w_da"]] and second.trained_history == ["adversary", "agent"]
    assert second.adv_success_history == [m1["arena_adv_success"], m2["arena_adv_success"]]

    # Same seed again, cycle 2 resumed from the files cycle 1 left: the same metrics and weights.
    again, r1 = run_cycle(start, train, heldout, judge, tiny(), tmp_path / "b1", seed=5)
    loaded = CycleState.load(tmp_path / "b1")
    assert loaded == again
    _, r2 = run_cycle(loaded, train, heldout, judge, tiny("agent"), tmp_path / "b2", seed=5)
    assert comparable(r1) == comparable(m1) and comparable(r2) == comparable(m2)
    a, _ = load_checkpoint(tmp_path / "a2" / "agent")
    b, _ = load_checkpoint(tmp_path / "b2" / "agent")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def test_stopped_state_refuses_another_cycle(tmp_path, start, scenarios):
    done = replace(start, w_da_history=[0.7, 0.68], cycle=2, stopped="gates")
    done.save(tmp_path)
    assert CycleState.load(tmp_path) == done
    with pytest.raises(ValueError, match="stopped"):
        run_cycle(done, scenarios, scenarios, Judge(FixedBackend()), tiny(), tmp_path / "c3", seed=5)


def test_the_cooperative_simulator_plays_evaluations_at_coop_temperature(monkeypatch, tmp_path, start, scenarios):
    """`_coop` is played greedy by default, adversaries (here the simulator standing in for the pool) sampled."""
    import sparring.train.play as play
    from sparring.evaluate.heldout import evaluate_heldout

    built: list[tuple[bool, float]] = []

    class Recording(play.LMPolicy):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if args[2] == "customer":
                built.append((kwargs["greedy"], kwargs["temperature"]))

    monkeypatch.setattr(play, "LMPolicy", Recording)
    judge = Judge(FixedBackend())
    for coop_temperature, expected in ((0.0, [(True, 1.0), (False, 1.0)]), (0.7, [(False, 0.7), (False, 1.0)])):
        built.clear()
        results = evaluate_heldout(
            {"da0": start.agent_dir}, start.simulator_dir, [], scenarios[:2], judge,
            short_episodes(coop_temperature=coop_temperature),
        ).agents  # fmt: skip
        assert built == expected and results["da0"]["n_episodes_coop"] == 2
        built.clear()  # a cycle: arena and gym customers sample; its evaluation's `_coop` is the one greedy
        settings = tiny("adversary").replace(coop_temperature=coop_temperature, eval_scenarios=2)
        run_cycle(start, scenarios[:4], scenarios[8:], judge, settings, tmp_path / str(coop_temperature), seed=5)
        assert ((True, 1.0) in built) == (coop_temperature == 0.0) and (False, 1.0) in built
        assert ((False, 0.7) in built) == (coop_temperature == 0.7)


def _recording(real, played: list[tuple[object, list]]):
    """``real`` (a ``run_episodes``) that also appends (customer, episodes) of every call to ``played``."""

    def run(scs, agent, customer, **kw):
        episodes = real(scs, agent, customer, **kw)
        played.append((customer, episodes))
        return episodes

    return run


def test_coop_continues_the_scenarios_utterance_and_coopsim_writes_its_own(monkeypatch, tmp_path, start, scenarios):
    """`_coop` opens with each held-out scenario's own utterance and the simulator writes the rest; `_coopsim` is
    the simulator from its first word. A cycle's `_coop` follows `coop_opening` too."""
    import sparring.evaluate.heldout as heldout
    import sparring.train.coevolution as coevolution
    import sparring.train.play as play
    from sparring.agents.openings import OpensWithUtterance

    played: list[tuple[object, list]] = []
    recorder = partial(_recording, played=played)

    def opening(ep) -> str:
        return next(m["content"] for m in ep.messages if m["role"] == "user")

    monkeypatch.setattr(heldout, "run_episodes", recorder(heldout.run_episodes))
    judge = Judge(FixedBackend())
    results = heldout.evaluate_heldout(
        {"da0": start.agent_dir}, start.simulator_dir, [], scenarios[:3], judge, short_episodes()
    ).agents
    (_, coop), (_, coopsim) = played[:2]
    assert [opening(ep) for ep in coop] == [s.utterance.strip() for s in scenarios[:3]]
    assert not any(opening(ep) == ep.scenario.utterance.strip() for ep in coopsim)
    assert results["da0"]["n_episodes_coop"] == results["da0"]["n_episodes_coopsim"] == 3

    monkeypatch.setattr(coevolution, "run_episodes", recorder(coevolution.run_episodes))
    for choice in ("utterance", "simulator"):
        played.clear()
        settings = tiny("adversary").replace(coop_opening=choice, eval_scenarios=2)
        run_cycle(start, scenarios[:4], scenarios[8:], judge, settings, tmp_path / choice, seed=5)
        assert any(isinstance(c, OpensWithUtterance) for c, _ in played) == (choice == "utterance")
    with pytest.raises(ValueError, match="coop_opening"):
        play.cooperative_customer(None, "real")  # type: ignore[arg-type]


def test_the_agents_gym_meets_the_cooperative_simulator_as_coop_opens_and_adversaries_as_they_open(scenarios):
    """In the agent's gym "coop" opens with the scenario's utterance (coop_opening); the simulator standing in as
    the adversary before any has trained, and every adversary generation, open as adversary_opening says."""
    from sparring.agents.openings import ContinuesUtterance, OpensWithUtterance
    from sparring.train.coevolution import agent_opponents

    class Fake:
        tokenizer = None

        def __init__(self, folder: str) -> None:
            self.folder = folder

    fresh = CycleState(cycle=0, agent_dir="a", simulator_dir="sim")
    fresh_scenario = scenarios[0]  # not a replay: each opponent opens as it does
    choose = agent_opponents(fresh, {"coop": 1.0}, Fake, "utterance", "own")
    assert (
        isinstance(choose(fresh_scenario, 0), OpensWithUtterance) and choose(fresh_scenario, 0).policy.folder == "sim"
    )
    assert not isinstance(
        agent_opponents(fresh, {"coop": 1.0}, Fake, "simulator", "own")(fresh_scenario, 0), OpensWithUtterance
    )
    first = agent_opponents(fresh, {"adversary": 1.0}, Fake, "utterance", "own")(fresh_scenario, 0)
    assert isinstance(first, Fake) and first.folder == "sim"
    first = agent_opponents(fresh, {"adversary": 1.0}, Fake, "utterance", "utterance")(fresh_scenario, 0)
    assert isinstance(first, ContinuesUtterance) and first.policy.folder == "sim"
    later = replace(fresh, adversary_dirs=["g1", "g2"])
    mixed = agent_opponents(later, {"adversary": 1.0, "pool": 1.0}, Fake, "utterance", "own")
    drawn = {mixed(fresh_scenario, seed).folder for seed in range(20)}
    assert drawn == {"g1", "g2"}


def test_adversaries_go_on_from_the_utterance_in_arena_gym_and_evaluation(monkeypatch, tmp_path, start, scenarios):
    """With adversary_opening "utterance" every adversary message that opens an episode starts with the scenario's
    utterance (arena, its gym's rollouts, the cycle's `_adv` and `_advpool`); with "own" none is wrapped."""
    import sparring.train.coevolution as coevolution
    import sparring.train.grpo as grpo
    import sparring.train.play as play
    from sparring.agents.openings import ContinuesUtterance

    played: list[tuple[object, list]] = []
    recorder = partial(_recording, played=played)

    monkeypatch.setattr(coevolution, "run_episodes", recorder(coevolution.run_episodes))
    monkeypatch.setattr(grpo, "run_episodes", recorder(grpo.run_episodes))
    judge = Judge(FixedBackend())
    for choice in ("utterance", "own"):
        played.clear()
        settings = tiny("adversary").replace(adversary_opening=choice, eval_scenarios=2)
        run_cycle(start, scenarios[:4], scenarios[8:], judge, settings, tmp_path / choice, seed=5)
        wrapped = [eps for c, eps in played if isinstance(c, ContinuesUtterance)]
        # arena, every gym rollout, `_adv`, `_advpool`; `_coop` is the simulator behind OpensWithUtterance
        assert len(wrapped) == (len(played) - 1 if choice == "utterance" else 0)
        for ep in (ep for eps in wrapped for ep in eps):
            said = next(m["content"] for m in ep.messages if m["role"] == "user")
            assert said.startswith(ep.scenario.utterance.strip())
    with pytest.raises(ValueError, match="adversary_opening"):
        play.adversary_customer(None, "scripted")  # type: ignore[arg-type]


@pytest.mark.parametrize("side", ["agent", "adversary"])
def test_a_cycle_trains_either_side_with_iapo_credit(tmp_path, start, scenarios, side):
    """The cycles run with any credit choice: IAPO's per-token advantages on the agent's and the adversary's
    episodes (the adversary's graph is its messages, weighted by what of them the agent acted on)."""
    base = tiny(side)
    settings = base.replace(
        agent_grpo=base.agent_grpo.replace(credit="iapo"), adversary_grpo=base.adversary_grpo.replace(credit="iapo")
    )
    new, metrics = run_cycle(start, scenarios[:4], scenarios[8:], Judge(FixedBackend()), settings, tmp_path, seed=5)
    assert metrics["trained"] == side and metrics["grpo_trained_tokens"] > 0
    assert (new.agent_dir != start.agent_dir) == (side == "agent")
