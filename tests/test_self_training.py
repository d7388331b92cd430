"""Self-training on verified successes (agent_rl's first part): only the world's strict passes on gym scenarios are
trained on, a held-out or validation scenario is never sampled, the expert's corrections (DAgger) are its replies on
the agent's failed states, and agent_rl killed in either part resumes to the weights of an uninterrupted run."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from sparring.agents.scripted import CooperativeCustomer, ExpertAgent, RandomAgent
from sparring.agents.transcript import tool_results
from sparring.drivers.agent_rl import _metrics
from sparring.lm.checkpoints import load_checkpoint
from sparring.params import load_params
from sparring.rollout import run_episodes
from sparring.settings import AgentRLSettings, SelfTrainingSettings
from sparring.train import self_training
from sparring.train.agent_rl import SELF_TRAINING_DIR, ValidationPlay, train_agent_rl
from sparring.train.play import GameModels
from sparring.train.self_training import (
    READS,
    ROUNDS_FILE,
    Teacher,
    check_gym,
    expert_corrections,
    verified_successes,
)
from tests.test_agent_rl import CO, make_world, weights

torch.set_num_threads(1)
ST = SelfTrainingSettings(
    rounds=2,
    samples=2,
    batch=4,
    corrections=False,
    intent_rehearsal=0,
    sft=SelfTrainingSettings().sft.replace(warmup_steps=0),
)
RL = AgentRLSettings(max_steps=2, eval_every=2, validation_scenarios=3, self_training=ST)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("self-training"))


def test_only_the_worlds_strict_passes_are_kept_at_most_k_distinct_a_scenario(world):
    _, gym, _ = world
    experts = run_episodes(gym * 3, ExpertAgent(), CooperativeCustomer(), max_turns=6, seed=0)
    randoms = run_episodes(gym, RandomAgent(seed=0), CooperativeCustomer(), max_turns=6, seed=0)
    assert all(ep.outcome.strict_pass for ep in experts) and not any(ep.outcome.strict_pass for ep in randoms)
    kept = verified_successes(randoms + experts, keep_per_scenario=2)
    passed = [ep.messages for ep in experts]
    assert kept and all(m in passed for m in kept)  # nothing the world did not verify
    by_scenario = {}
    for ep in experts:
        if ep.messages in kept:
            by_scenario.setdefault(ep.scenario.scenario_id, set()).add(json.dumps(ep.messages))
    assert all(1 <= len(v) <= 2 for v in by_scenario.values()) and len(kept) == sum(map(len, by_scenario.values()))


def test_the_expert_corrects_only_where_it_would_act_otherwise_and_stops_at_the_agents_first_carried_out_act(world):
    _, gym, _ = world
    expert = ExpertAgent()
    experts = run_episodes(gym, expert, CooperativeCustomer(), max_turns=6, seed=0)
    failed = [dataclasses.replace(ep, outcome=dataclasses.replace(ep.outcome, strict_pass=False)) for ep in experts]
    assert expert_corrections(failed, expert) == []  # the expert's own turns are never corrected
    assert expert_corrections(experts, expert) == []  # and passes are not looked at
    randoms = run_episodes(gym * 4, RandomAgent(seed=1), CooperativeCustomer(), max_turns=6, seed=0)
    past_a_failed_act = 0
    for ep in randoms:
        fixes = expert_corrections([ep], expert)
        assert fixes  # a random episode fails, and its first turn is not the expert's
        for *prefix, target in fixes:
            assert all(m.get("train") is False for m in prefix if m["role"] == "assistant")  # the agent's: no loss
            shown = [{k: v for k, v in m.items() if k != "train"} for m in prefix]
            assert target == {"role": "assistant", "content": expert.reply(ep.scenario, shown)}
            acts = [(name, r.get("ok")) for name, r in tool_results(shown) if name not in READS]
            assert not any(ok for _, ok in acts)  # nothing labelled past an act the world carried out
            past_a_failed_act += bool(acts)
    assert past_a_failed_act  # a failed or refused act changes nothing: the expert's way on from it is labelled


def test_corrections_train_the_agent_and_need_the_expert(world, tmp_path):
    root, gym, _ = world
    st = ST.replace(rounds=1, corrections=True)
    with pytest.raises(ValueError, match="corrections needs the expert"):
        self_training.self_train(root / "da0", root / "sim", gym, CO, st, tmp_path / "none", seed=3)
    done = self_training.self_train(root / "da0", root / "sim", gym, CO, st, tmp_path / "st", seed=3,
                                    teacher=Teacher(expert=ExpertAgent()))  # fmt: skip
    (row,) = done.rounds
    assert row["kept"] == 0 and row["corrections"] > 0  # tiny random models never pass: corrections alone train
    start, trained = weights(root / "da0"), weights(done.agent_dir)
    assert any(not torch.equal(start[k], trained[k]) for k in start)


def test_a_held_out_or_validation_scenario_is_never_sampled(world, tmp_path):
    root, gym, validation = world
    with pytest.raises(ValueError, match=validation[0].scenario_id):
        check_gym([*gym, validation[0]], {validation[0].scenario_id})
    with pytest.raises(ValueError, match="gym scenarios only"):  # agent_rl adds its validation ids itself
        train_agent_rl(
            root / "da0", root / "sim", [*gym, validation[1]], validation, CO, RL, load_params().judge.reward,
            tmp_path / "da1", tmp_path / "scratch",
        )  # fmt: skip
    assert not (tmp_path / "da1").exists()


def run(made, out, scratch, log=lambda line: None):
    root, gym, validation = made
    return train_agent_rl(
        root / "da0", root / "sim", gym, validation, CO, RL, load_params().judge.reward, out, scratch,
        seed=3, log=log,
    )  # fmt: skip


class Killed(Exception):
    pass


def test_agent_rl_killed_in_self_training_resumes_to_the_uninterrupted_weights(world, tmp_path, monkeypatch):
    """Tiny random models never pass, so every sampled episode stands in for a verified one here: what is tested is
    that a round's sampling and fine-tuning replay exactly after a kill (the passes-only rule is tested above)."""
    monkeypatch.setattr(self_training, "verified_successes", lambda episodes, k: [ep.messages for ep in episodes])
    whole = run(world, tmp_path / "a" / "da1", tmp_path / "a" / "scratch")
    assert [r["round"] for r in whole.self_training] == [1, 2] and all(r["kept"] for r in whole.self_training)
    start, trained = weights(world[0] / "da0"), weights(tmp_path / "a" / "scratch" / SELF_TRAINING_DIR / "round_1")
    assert any(not torch.equal(start[k], trained[k]) for k in start), "self-training changed no weight"

    def kill_after_round_1(line: str) -> None:
        if line.startswith("self-training round 1"):
            raise Killed(line)

    scratch = tmp_path / "b" / "scratch"
    with pytest.raises(Killed):
        run(world, tmp_path / "b" / "da1", scratch, kill_after_round_1)
    assert (scratch / SELF_TRAINING_DIR / "round_1").is_dir() and not (tmp_path / "b" / "da1").exists()
    saved = json.loads((scratch / SELF_TRAINING_DIR / ROUNDS_FILE).read_text())["rounds"]
    assert [r["round"] for r in saved] == [1]
    lines: list[str] = []
    again = run(world, tmp_path / "b" / "da1", scratch, lines.append)
    assert "self-training: resuming after round 1" in lines
    assert [r["episodes"] for r in again.self_training] == [r["episodes"] for r in whole.self_training]
    for name in ("round_2",):
        a, b = (weights(tmp_path / x / "scratch" / SELF_TRAINING_DIR / name) for x in "ab")
        assert all(torch.equal(a[k], b[k]) for k in a), f"{name} differs after the resume"
    a, b = weights(tmp_path / "a" / "da1"), weights(tmp_path / "b" / "da1")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_self_training_alone_makes_its_agent_da1(world, tmp_path, monkeypatch):
    monkeypatch.setattr(self_training, "verified_successes", lambda episodes, k: [ep.messages for ep in episodes])
    root, gym, validation = world
    rl = RL.replace(max_steps=0, self_training=ST.replace(rounds=1))
    result = train_agent_rl(
        root / "da0", root / "sim", gym, validation, CO, rl, load_params().judge.reward, tmp_path / "da1",
        tmp_path / "scratch", seed=3,
    )  # fmt: skip
    assert result.step == 0 and result.grpo is None and [r["step"] for r in result.curve] == [0]
    a, b = weights(tmp_path / "da1"), weights(tmp_path / "scratch" / SELF_TRAINING_DIR / "round_1")
    assert all(torch.equal(a[k], b[k]) for k in a)
    # step 0 is the self-trained start; DA1 is measured against DA0 itself, played on the same validation
    models = GameModels(CO)
    models.model(root / "sim")
    play = ValidationPlay(models, str(root / "sim"), validation[: rl.validation_scenarios], 3)
    assert result.da0 == play(load_checkpoint(root / "da0")[0])
    metrics = _metrics(result)
    assert (
        metrics["val_score_da0"] == result.da0["score"]
        and metrics["val_score_self_trained"] == metrics["val_score_da1"]
    )


def test_no_round_asked_is_da0_whatever_an_earlier_run_left(world, tmp_path, monkeypatch):
    monkeypatch.setattr(self_training, "verified_successes", lambda episodes, k: [ep.messages for ep in episodes])
    root, gym, _ = world
    scratch = tmp_path / "st"
    one = self_training.self_train(root / "da0", root / "sim", gym, CO, ST.replace(rounds=1), scratch, seed=3)
    assert one.agent_dir == scratch / "round_1" and len(one.rounds) == 1
    none = self_training.self_train(root / "da0", root / "sim", gym, CO, ST.replace(rounds=0), scratch, seed=3)
    assert none.agent_dir == root / "da0" and none.rounds == []


def test_the_expert_answers_another_agents_mistaken_call_with_its_own_and_hands_over_after_its_own_fails():
    """DAgger asks the expert what it would do from the agent's states. After the agent's dispute with the wrong case
    queue (refused: nothing changed) it makes its own call with the queue it read; after its own call fails, as
    before, it asks or hands over (its own episodes, DA0's demonstrations, are unchanged by this)."""
    from sparring.data.synthetic import utterance_frame
    from sparring.world.scenarios import sample_scenarios
    from sparring.world.vocab import INTENT_SPECS, QUEUE

    expert = ExpertAgent(refs="described")
    pool = sample_scenarios(utterance_frame(2, 7), 300, seed=3)
    scenario = next(s for s in pool if INTENT_SPECS[s.intent].quotes_queue)
    (ep,) = run_episodes([scenario], expert, CooperativeCustomer(), max_turns=8, seed=0)
    i = next(i for i, m in enumerate(ep.messages) if any(QUEUE in c["function"]["arguments"]
                                                         for c in m.get("tool_calls") or []))  # fmt: skip
    call = ep.messages[i]["tool_calls"][0]["function"]
    right = call["arguments"][QUEUE]
    wrong = {**call, "arguments": {**call["arguments"], QUEUE: "nobody_team" if right != "nobody_team" else "x"}}
    refused = json.dumps({"ok": False, "error": f"cases are not handled by {wrong['arguments'][QUEUE]}"})
    mistaken = [*ep.messages[:i], {**ep.messages[i], "tool_calls": [{"type": "function", "function": wrong}]},
                {"role": "tool", "content": refused}]  # fmt: skip
    retry = expert.reply(scenario, mistaken)
    assert retry == expert.reply(scenario, ep.messages[:i])  # its own call, the right queue
    own_failed = [*ep.messages[: i + 1], {"role": "tool", "content": refused}]
    assert QUEUE not in expert.reply(scenario, own_failed)  # its own call refused: it no longer retries it
