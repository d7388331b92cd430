"""TRACER stage 2 (train.tracer): replayed sessions, the two rewards on hand-made sessions, their group
normalization, and the cycles' choice of simulator."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sparring.agents.scripted import CooperativeCustomer, ExpertAgent
from sparring.data.dialogues import generate_dialogues
from sparring.data.sources import read_dialogues_jsonl
from sparring.drivers.coevolution import previous_state
from sparring.evaluate.fidelity import false_negative_rate
from sparring.judge.oracle import embed
from sparring.lm.policies import TurnOutput, TurnRequest
from sparring.rollout import run_episodes
from sparring.settings import SimulatorRLSettings
from sparring.train.iapo import group_normalized
from sparring.train.tracer import (
    REWARD_KEY,
    RealSession,
    TracerScorer,
    hierarchical_rewards,
    replay_sessions,
    simulated_outcome,
)


class Says:
    """A customer who says its lines in order, then goodbye."""

    tokenizer = None

    def __init__(self, *lines: str) -> None:
        self.lines = lines

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        out = []
        for r in requests:
            own = sum(m["role"] == "assistant" for m in r.messages)
            out.append(TurnOutput(self.lines[own] if own < len(self.lines) else "Thanks, bye."))
        return out


def _hash_embed(texts):  # a cheap stand-in where the trajectory term is not under test
    return np.asarray([[len(t) % 7 + 1.0, t.count(" ") + 1.0] for t in texts])


@pytest.fixture(scope="module")
def dialogues():
    return generate_dialogues(240, 3)


def test_group_normalized_standardizes_each_group_and_leaves_flat_groups_at_zero():
    out = np.asarray(group_normalized([1.0, 0.0, 0.5, 0.5, 2.0, 2.0, 2.0, 5.0], 4))
    assert out[:4] == pytest.approx([1.2247, -1.2247, 0.0, 0.0], abs=1e-3)  # sample std, as TRL's
    assert out[4:].mean() == pytest.approx(0.0, abs=1e-9) and out[7] > 0 > out[4]
    assert group_normalized([0.3, 0.3], 2) == pytest.approx([0.0, 0.0])
    with pytest.raises(ValueError, match="groups of 3"):
        group_normalized([1.0, 2.0], 3)


def test_replay_sessions_keep_each_dialogue_ending_and_customer_turns(dialogues):
    scenarios, sessions = replay_sessions(dialogues, seed=0, n=50)
    assert len(scenarios) == len(sessions) == 50
    by_opening = {row["turns"][0]["text"]: row for row in dialogues.iter_rows(named=True)}
    for sc in scenarios:
        real = sessions[sc.scenario_id]
        row = by_opening[real.turns[0]]
        assert real.outcome == row["outcome"] and sc.intent == row["intent"]
        assert list(real.turns) == [t["text"] for t in row["turns"] if t["role"] == "customer"]
    again, _ = replay_sessions(dialogues, seed=0, n=50)
    assert [s.scenario_id for s in again] == [s.scenario_id for s in scenarios]  # seeded


def test_a_session_that_ends_as_the_real_one_scores_higher(dialogues):
    scenarios, sessions = replay_sessions(dialogues, seed=0)
    abandoned = next(s for s in scenarios if sessions[s.scenario_id].outcome == "abandoned")
    left = run_episodes([abandoned], ExpertAgent(), Says(abandoned.utterance, "Forget it, bye."), seed=0)
    stayed = run_episodes([abandoned], ExpertAgent(), CooperativeCustomer(), seed=0)
    assert simulated_outcome(left[0]) == "abandoned" and simulated_outcome(stayed[0]) == "resolved"
    settings = SimulatorRLSettings(trajectory_weight=0.0)
    scorer = TracerScorer(sessions, 2, settings, _hash_embed)
    scores = scorer.score([*left, *stayed])
    assert [s["sim_outcome_match"] for s in scores] == [1.0, 0.0]
    assert scores[0][REWARD_KEY] > scores[1][REWARD_KEY]
    assert scorer.history[-1]["ended_abandoned"] == 0.5 and scorer.history[-1]["outcome_match"] == 0.5


def test_the_hierarchical_reward_gives_no_trajectory_credit_across_mismatched_endings():
    outcome = [1.0, 0.0, 1.0, 0.0] + [0.0] * 4 + [1.0] * 4
    trajectory = [0.2, 0.9, 0.6, 0.1] + [0.5, 0.7, 0.1, 0.3] + [0.1, 0.3, 0.2, 0.5]
    got = hierarchical_rewards(outcome, trajectory, 4, 1.0, 1.0)
    # matched: 1 + the trajectory min-max scaled among the matched; unmatched: 0 whatever their turns
    assert got == pytest.approx([1.0, 0.0, 2.0, 0.0] + [0.0] * 4 + [1.0, 1.5, 1.25, 2.0])
    swapped = hierarchical_rewards(outcome, [0.2, 0.1, 0.6, 0.9, *trajectory[4:]], 4, 1.0, 1.0)
    assert swapped == got  # the mismatched episodes' trajectories move nothing
    assert hierarchical_rewards(outcome[:4], trajectory[:4], 4, 2.0, 0.5) == pytest.approx([2.0, 0.0, 2.5, 0.0])
    assert hierarchical_rewards([1.0, 1.0, 0.0], [0.4, 0.4, 0.9], 3, 1.0, 1.0) == [1.5, 1.5, 0.0]  # one value: ½
    # the summed form (z_out + z_traj): the mismatched episode with close turns outscores a matched one
    summed = np.asarray(group_normalized(outcome[:4], 4)) + np.asarray(group_normalized(trajectory[:4], 4))
    assert summed == pytest.approx([0.190, 0.351, 1.272, -1.813], abs=1e-3) and summed[1] > summed[0]
    with pytest.raises(ValueError, match="groups of 3"):
        hierarchical_rewards(outcome[:4], trajectory[:4], 3, 1.0, 1.0)


def test_the_scorer_ranks_a_group_by_ending_first_then_trajectory_among_the_matched(dialogues):
    scenarios, sessions = replay_sessions(dialogues, seed=0)
    abandoned = next(s for s in scenarios if sessions[s.scenario_id].outcome == "abandoned")
    leave, stay = "Never mind, I have to go.", ("Okay.", "Thanks.", "Great.", "Right.", "Sure.")
    customers = [Says(abandoned.utterance, "Forget it, bye."), Says(abandoned.utterance, leave)]
    customers += [CooperativeCustomer(), Says(abandoned.utterance, *stay)]
    group = [run_episodes([abandoned], ExpertAgent(), c, seed=0)[0] for c in customers]
    assert [simulated_outcome(e) for e in group] == ["abandoned", "abandoned", "resolved", "resolved"]
    scorer = TracerScorer(sessions, 4, SimulatorRLSettings(), _hash_embed)
    similarity = scorer.trajectory_similarity(group)
    assert similarity[0] != similarity[1] and similarity[2] != similarity[3]
    rewards = [s[REWARD_KEY] for s in scorer.score(group)]
    assert rewards[2] == rewards[3] == 0.0  # stayed, where the real customer left: no credit for their turns
    assert sorted(rewards[:2]) == [1.0, 2.0] and rewards[int(np.argmax(similarity[:2]))] == 2.0
    summed = TracerScorer(sessions, 4, SimulatorRLSettings(reward="summed"), _hash_embed).score(group)
    assert summed[2][REWARD_KEY] != summed[3][REWARD_KEY]  # the alternative credits their trajectories


class WordsJudge:
    """A judge backend whose realism is the share of a customer's turns with no bracketed placeholder left."""

    def realism(self, customer_turns):
        return np.asarray([np.mean([("[" not in t) for t in turns]) if turns else 0.0 for turns in customer_turns])


def test_the_realism_guard_prefers_the_customer_like_episode_of_a_group(dialogues):
    scenarios, sessions = replay_sessions(dialogues, seed=0)
    scenario = scenarios[0]
    plain = run_episodes([scenario], ExpertAgent(), Says(scenario.utterance, "Forget it, bye."), seed=0)
    bracketed = run_episodes([scenario], ExpertAgent(), Says("[merchant] [amount] [date]", "Forget it, bye."), seed=0)
    settings = SimulatorRLSettings(trajectory_weight=0.0, realism_weight=1.0)
    scorer = TracerScorer(sessions, 2, settings, _hash_embed, judge=WordsJudge())
    scores = scorer.score([*plain, *bracketed])
    assert scores[0]["sim_outcome_match"] == scores[1]["sim_outcome_match"]  # the same ending: realism decides
    assert [s["sim_realism"] for s in scores] == [1.0, 0.5]
    assert scores[0][REWARD_KEY] > scores[1][REWARD_KEY]
    assert scorer.history[-1]["realism"] == 0.75
    unguarded = TracerScorer(sessions, 2, SimulatorRLSettings(trajectory_weight=0.0), _hash_embed).score(
        [*plain, *bracketed]
    )
    assert unguarded[0][REWARD_KEY] == unguarded[1][REWARD_KEY]


def test_a_turn_aligned_paraphrase_is_closer_than_an_unrelated_turn(heldout):
    scenario = heldout[0]
    real = RealSession(  # cut off at two rounds, both episodes end as this one did: the trajectory decides
        "abandoned",
        ("My new card still hasn't arrived and it's been two weeks.", "Sure, my customer id is C-1234."),
    )
    paraphrase = Says("It's been a fortnight and the card you sent me has not come yet.", "Of course: id C-1234.")
    unrelated = Says("What is the exchange rate for euros today?", "I'd like to move my savings into an ISA.")
    episodes = [*run_episodes([scenario], ExpertAgent(), paraphrase, max_turns=2, seed=0),
                *run_episodes([scenario], ExpertAgent(), unrelated, max_turns=2, seed=0)]  # fmt: skip
    scorer = TracerScorer({scenario.scenario_id: real}, 2, SimulatorRLSettings(outcome_weight=0.0), embed)
    close, far = scorer.trajectory_similarity(episodes)
    assert close > far + 0.1
    scores = scorer.score(episodes)
    assert scores[0][REWARD_KEY] > scores[1][REWARD_KEY]


def test_scores_refuse_episodes_of_unknown_sessions_and_settings_need_a_reward(heldout):
    episodes = run_episodes(heldout[:2], ExpertAgent(), CooperativeCustomer(), seed=0)
    with pytest.raises(KeyError, match="no real session"):
        TracerScorer({}, 2, SimulatorRLSettings(), _hash_embed).score(episodes)
    with pytest.raises(ValueError, match="at least one"):
        SimulatorRLSettings(outcome_weight=0.0, trajectory_weight=0.0)
    for guard in ("faithfulness_weight", "realism_weight"):
        with pytest.raises(ValueError, match="judge backend"):
            TracerScorer({}, 2, SimulatorRLSettings(**{guard: 0.5}), _hash_embed)


def test_false_negatives_are_the_agent_failures_the_expert_also_fails_on_winnable_scenarios(heldout):
    scenarios = heldout[:6]
    reference = run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), seed=0)  # all pass
    passes = reference
    fails = run_episodes(scenarios, ExpertAgent(), Says("Forget it."), seed=0)  # all leave at once
    tested = [*fails[:4], *passes[4:]]  # the agent fails on 4 scenarios
    expert = [*fails[:1], *passes[1:]]  # the expert against the simulator fails on 1 of them
    assert false_negative_rate(tested, expert, reference) == pytest.approx(1 / 4)
    assert np.isnan(false_negative_rate(passes, passes, reference))


def test_cycles_start_from_the_simulator_params_name(tmp_path: Path):
    assert previous_state(tmp_path, 1, 4).simulator_dir == "models/simulator_sft"
    assert previous_state(tmp_path, 1, 4, "rl").simulator_dir == "models/simulator_rl"


def test_a_users_own_logs_are_replayed_with_their_endings(tmp_path: Path):
    """`ingest.dialogues.source: dialogues_jsonl` feeds stage 2 as it feeds stage 1: the same parquet schema."""
    rows = [
        {"id": "mine-1", "intent": "card_arrival", "outcome": "abandoned", "persona": "impatient",
         "turns": [{"role": "customer", "text": "where is my card"}, {"role": "agent", "text": "Let me check."},
                   {"role": "customer", "text": "Useless. Bye."}]},
        {"id": "mine-2", "intent": "cancel_transfer", "outcome": "escalated",
         "turns": [{"role": "customer", "text": "stop that transfer"}]},
    ]  # fmt: skip
    path = tmp_path / "logs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    scenarios, sessions = replay_sessions(read_dialogues_jsonl(path, 1000), seed=0)
    assert [s.intent for s in scenarios] == ["card_arrival", "cancel_transfer"]
    assert [s.persona for s in scenarios] == ["impatient", "cooperative"]  # unknown personas play cooperatively
    assert [sessions[s.scenario_id] for s in scenarios] == [
        RealSession("abandoned", ("where is my card", "Useless. Bye.")),
        RealSession("escalated", ("stop that transfer",)),
    ]
