"""benchmarks/yardstick.py's analysis on hand-made outcomes: the A/A check pairs a draw's first half with its
second, gains pair agents over (scenario, draw) and split the pool by the generation each scenario was dealt to, the
minimum detectable effect shrinks with K, and files of other scenarios are refused by name."""

from __future__ import annotations

import pytest

from benchmarks import yardstick
from sparring.evaluate.episodes import compact_episodes

IDS = ["s0", "s1", "s2", "s3"]


def doc(outcomes: dict[str, list[list[int]]], draws: int = 4, order: list[str] = IDS) -> dict:
    """A played file: per agent, each scenario's outcomes over ``draws`` draws, the same against ref and the pool."""
    record = {}
    for agent, rows in outcomes.items():
        ids = [sid for _ in range(draws) for sid in order]
        drawn = [d for d in range(draws) for _ in order]
        flags = [rows[i][d] for d in range(draws) for i in range(len(order))]
        one = {"scenario_id": ids, "draw": drawn, "strict_pass": flags, "routed": flags}
        record[agent] = {"ref": one, "advpool": one}
    return {"scenario_order": order, "generations": 2, "episodes": compact_episodes(record)}


def test_the_analysis_pairs_draws_scenarios_and_generations():
    da0 = [[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]]
    rl0 = [[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]]  # only s0 gains: +0.5 on average over draws
    result = yardstick.analyze([doc({"da0": da0, "rl0": rl0})], "da0")
    aa = result["aa"]["da0"]["ref"]
    assert aa["k"] == 2 and aa["diff"][0] == pytest.approx(0.25)  # s0: draws 2,3 (1, 1) against 0,1 (0, 0)
    assert aa["covers_0"] == (aa["diff"][1] <= 0 <= aa["diff"][2])
    gain = result["gains"]["rl0"]["ref"]
    assert gain[0] == pytest.approx(0.125) and gain[1] <= 0.125 <= gain[2]
    by_generation = result["gains"]["rl0"]["by_generation"]
    assert [g[0] for g in by_generation] == [pytest.approx(0.25), pytest.approx(0.0)]  # s0, s2 went to generation 0
    mde = {(r["n"], r["k"]): r["mde"] for r in result["mde"]["rl0"]["advpool"]}
    assert mde[(240, 1)] >= mde[(240, 8)] and mde[(480, 4)] < mde[(240, 4)]
    assert result["nested"]["ref"]["per_seed"] == [pytest.approx(0.125)]
    assert set(result["chosen"]) >= {"n", "k"}


def test_files_of_other_scenarios_or_without_the_baseline_are_refused():
    one = doc({"da0": [[0] * 4] * 4})
    other = {**doc({"rl0": [[1] * 4] * 4}), "scenario_order": ["x", *IDS[1:]]}
    with pytest.raises(SystemExit, match="other scenarios"):
        yardstick.analyze([one, other], "da0")
    with pytest.raises(SystemExit, match="no agent 'da1'"):
        yardstick.analyze([one], "da1")


def test_agents_are_picked_by_name_and_an_unknown_one_is_refused():
    rows = [[1, 0, 1, 0]] * 4
    played = doc({"da0": rows, "da1": rows, "expert": [[1] * 4] * 4})
    result = yardstick.analyze([played], "da0", ["da1"])
    assert result["rl_agents"] == ["da1"] and result["gains"]["da1"]["ref"][0] == 0.0
    with pytest.raises(SystemExit, match="no agent \\['da9'\\]"):
        yardstick.analyze([played], "da0", ["da9"])


def test_files_holding_later_slices_of_the_order_merge_into_one_analysis():
    """`play --skip`: a file of the first scenarios and one of the rest read as one file of all of them; a slice
    that starts off the pool's dealing (an odd index with two generations) is refused."""
    da0 = [[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]]
    rl0 = [[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]]
    whole = yardstick.analyze([doc({"da0": da0, "rl0": rl0})], "da0")
    head = doc({"da0": da0[:2], "rl0": rl0[:2]}, order=IDS[:2])
    tail = doc({"da0": da0[2:], "rl0": rl0[2:]}, order=IDS[2:])
    merged = yardstick.analyze([head, tail], "da0")
    assert merged["n"] == 4 and merged["gains"] == whole["gains"] and merged["aa"] == whole["aa"]
    odd = doc({"da0": da0[1:], "rl0": rl0[1:]}, order=IDS[1:])
    with pytest.raises(SystemExit, match="other scenarios"):
        yardstick.analyze([doc({"da0": da0[:1], "rl0": rl0[:1]}, order=IDS[:1]), odd], "da0")
