"""benchmarks/agent_rl_arms.py: an arm is the project's params with its overrides (a bad key is refused), and the
analysis pairs each seed's DA1 with DA0 over (scenario, draw), nests the seeds and reads the acceptance lines."""

from __future__ import annotations

import pytest

from benchmarks import agent_rl_arms as arms
from sparring.evaluate.episodes import compact_episodes

IDS = ["s0", "s1", "s2", "s3"]


def played(outcomes: dict[str, list[list[int]]], wrong: dict[str, float], routing: dict[str, float]) -> dict:
    """A play file: each agent's outcomes per scenario over 2 draws, the same against every opponent."""
    record, figures = {}, {}
    for agent, rows in outcomes.items():
        ids, drawn = [s for _ in range(2) for s in IDS], [d for d in range(2) for _ in IDS]
        flags = [rows[i][d] for d in range(2) for i in range(len(IDS))]
        one = {"scenario_id": ids, "draw": drawn, "strict_pass": flags, "routed": flags}
        record[agent] = dict.fromkeys(arms.OPPONENTS, one)
        figures[agent] = {f"failure_misroute_{o}": wrong[agent] for o in arms.OPPONENTS}
    banking77 = {a: {"accuracy": acc, "hits": ""} for a, acc in routing.items()}
    return {"scenario_order": IDS, "figures": figures, "banking77": banking77, "episodes": compact_episodes(record)}


def test_each_seed_is_paired_with_da0_and_the_acceptance_lines_read_them():
    da0 = [[0, 0], [1, 1], [0, 0], [1, 0]]
    up = [[1, 1], [1, 1], [0, 0], [1, 1]]  # +0.375 on every opponent
    down = [[0, 0], [1, 0], [0, 0], [1, 0]]  # −0.125
    doc = played(
        {"da0": da0, "v2_grpo_s0": up, "v2_grpo_s1": up, "st_s0": down},
        {"da0": 0.1, "v2_grpo_s0": 0.1, "v2_grpo_s1": 0.105, "st_s0": 0.2},
        {"da0": 0.60, "v2_grpo_s0": 0.61, "v2_grpo_s1": 0.595, "st_s0": 0.5},
    )
    result = arms.analyze_docs([doc], "da0")
    grpo, st = result["arms"]["v2_grpo"], result["arms"]["st"]
    assert grpo["seeds"] == [0, 1] and [m for m, _, _ in grpo["ref"]["intervals"]] == [0.375, 0.375]
    assert grpo["ref"]["mean"] == pytest.approx(0.375) and grpo["ref"]["prob_improvement"] == 1.0
    assert grpo["wrong_act"] == [pytest.approx(0.0), pytest.approx(0.005)]
    assert grpo["banking77"] == [pytest.approx(0.01), pytest.approx(-0.005)]
    assert all(grpo["acceptance"].values())
    assert st["ref"]["intervals"][0][0] == pytest.approx(-0.125)
    assert not any(
        st["acceptance"][k]
        for k in (
            "ref_mean_ge_0.08",
            "every_seed_ref_gain_gt_0",
            "wrong_act_at_most_da0_+0.01",
            "banking77_no_lower_than_-0.01",
        )
    )


def test_an_arm_is_the_projects_params_with_its_overrides_and_a_bad_key_is_refused():
    p = arms.arm_params("st", ["agent_rl.self_training.samples=3"], "default")
    assert p.agent_rl.self_training.rounds == 1 and p.agent_rl.max_steps == 0 and p.agent_rl.self_training.samples == 3
    v1 = arms.arm_params("v1_grpo", [], "default")
    assert v1.judge.reward.wrong_act == 0 and not v1.judge.reward.gate_partial_credit
    assert all(arms.arm_params(arm, [], "default") for arm in arms.ARMS)  # every arm's overrides are valid params
    assert v1.agent_rl.self_training.rounds == 0 and v1.agent_rl.max_steps == 100  # whatever the defaults are
    wide = arms.arm_params("dagger2_wide_r", [], "default").agent_rl
    assert (wide.self_training.rounds, wide.self_training.samples, wide.max_steps) == (2, 2, 0)
    assert wide.self_training.corrections and wide.self_training.intent_rehearsal == 2000
    dagger = arms.arm_params("dagger2_grpo", [], "default").agent_rl
    assert dagger.self_training.corrections and dagger.self_training.rounds == 2 and dagger.max_steps == 100
    with pytest.raises(SystemExit, match="unknown arm"):
        arms.arm_params("nope", [], "default")
    with pytest.raises(SystemExit, match="agent_rl.self_training.sample"):
        arms.arm_params("st", ["agent_rl.self_training.sample=3"], "default")
