"""benchmarks/coevolution_arms.py: cross-play never pairs an agent with an adversary trained against it, every arm is
valid params, the foreign figure leaves generation 0's share out, and the W_DA trajectory is read for RL-ADA's
dip-and-recover."""

from __future__ import annotations

import pytest

from benchmarks import coevolution_arms as arms
from sparring.evaluate.episodes import compact_episodes
from sparring.params import Params, load_params


def test_cross_play_never_pairs_an_agent_with_an_adversary_trained_against_it():
    runs = {
        f"{arm}_s{seed}": {"seed": seed, "adversaries": [f"/r/{arm}_s{seed}/cycle_{k}/adversary" for k in (1, 3)]}
        for arm in arms.ARMS
        for seed in (0, 1, 2)
    }
    for seed in (0, 1, 2):
        pool = arms.foreign_pool(runs, seed)
        # every arm of seed s starts its cycles from DA1_s: none of seed s's generations, all of the others'
        assert pool and all(f"_s{seed}/" not in d for d in pool)
        assert sorted(pool) == sorted(d for name, r in runs.items() if r["seed"] != seed for d in r["adversaries"])
    assert arms.foreign_pool({"grpo_s0": runs["grpo_s0"], "league_st_s0": runs["league_st_s0"]}, 0) == []


def test_every_arm_is_valid_params_and_the_league_arm_trains_the_agent_by_self_training():
    raw = load_params("params.yaml").model_dump()
    for arm, overrides in arms.ARMS.items():
        p = Params.model_validate({**raw, "coevolution": {**raw["coevolution"], **overrides}})
        assert p.coevolution.agent_recipe == ("self_training" if arm == "league_st" else "grpo")
    assert sum(arms.LEAGUE.values()) == pytest.approx(1.0) and arms.LEAGUE["ref"] > 0 and arms.LEAGUE["pool"] > 0


def _seed_doc(outcomes: dict[str, dict[str, list[int]]], pool: int, ids: list[str]) -> dict:
    record = {
        agent: {o: {"scenario_id": ids, "draw": [0] * len(ids), "strict_pass": v, "routed": v} for o, v in per.items()}
        for agent, per in outcomes.items()
    }
    return {"agents": dict.fromkeys(outcomes, ""), "foreign_pool": ["g"] * pool, "episodes": compact_episodes(record)}


def test_final_minus_da1_is_paired_per_seed_and_the_foreign_figure_skips_generation_0():
    ids = [f"s{i}" for i in range(6)]
    # pool of 2 foreign generations: G = 3, scenarios 0 and 3 met generation 0 (ref's episodes), the rest foreign
    pool = {"da0": [1, 0, 0, 1, 0, 0], "da1": [1, 0, 0, 1, 1, 0], "grpo_s0": [0, 1, 1, 0, 1, 1]}
    same = {"da0": [0] * 6, "da1": [1] * 6, "grpo_s0": [1] * 6}
    doc = {
        "scenario_order": ids,
        "seeds": {"0": _seed_doc({a: {"advpool": pool[a], "ref": same[a], "coop": same[a]} for a in pool}, 2, ids)},
        "cycles": {"grpo_s0": [
            {"cycle": k, "trained": t, "w_da": w, "arena_adv_success": a, "arena_adv_faithfulness": 0.9}
            for k, t, w, a in ((1, "adversary", 0.7, 0.1), (2, "agent", 0.6, 0.2), (3, "adversary", 0.65, 0.15))
        ]},
    }  # fmt: skip
    result = arms.analyze_doc(doc)["arms"]["grpo"]
    foreign = result["foreign"]["per_seed"][0]
    assert foreign["final"] == 1.0 and foreign["da1"] == 0.25  # on scenarios 1, 2, 4, 5 only
    assert foreign["final-da1"][0] == pytest.approx(0.75)
    assert result["ref"]["per_seed"][0]["final-da1"][0] == 0.0 and result["ref"]["per_seed"][0]["da1-da0"][0] == 1.0
    assert result["cycles"][0]["dip_and_recover"] and result["cycles"][0]["adv_success"] == [0.1, 0.15]
