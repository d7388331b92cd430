"""benchmarks/credit_arms.py: credit arms compared from their per-episode outcomes alone (issue 57): rows of
(scenario, draw), rows from before draws read as draw 0, and the nested bootstrap over seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.credit_arms as credit


def rows(passes: str, kinds: str = "", draws: int = 0) -> list[list]:
    """[scenario id, opponent, strict pass, failure kind] rows (as before draws); ``kinds`` one letter per scenario
    (r: refused). ``draws`` K: the rows of K draws, draw-major, each with its draw as a fifth field, ``passes``
    holding n x K characters."""
    names = {"r": "refused", "m": "misroute", "l": "left", "-": ""}
    kinds = kinds or "-" * len(passes)
    n = len(passes) // max(1, draws)
    return [
        [f"sc{i % n}", "sim", int(p), names[k] if p == "0" else "", *([i // n] if draws else [])]
        for i, (p, k) in enumerate(zip(passes, kinds, strict=True))
    ]


def arms_file(
    path: Path, seed: int, start: str, arms: dict[str, dict[int, str]], kinds: str = "", draws: int = 0
) -> Path:
    saved = {
        "scenario_ids": [f"sc{i}" for i in range(len(start) // max(1, draws))],
        "start": {"advpool": rows(start, kinds, draws), "coop": rows(start, draws=draws)},
        "arms": {
            name: {
                "seed": seed,
                "checkpoints": {
                    str(k): {"advpool": rows(v, kinds, draws), "coop": rows(v, draws=draws)} for k, v in cps.items()
                },
            }
            for name, cps in arms.items()
        },
    }
    path.write_text(json.dumps(saved))
    return path


def test_gains_and_the_pooled_difference_are_recomputed_from_the_outcomes(tmp_path, capsys):
    files = [
        arms_file(tmp_path / "a0.json", 0, "0000011111", {"grpo": {5: "0000011111", 10: "0000111111"}}),
        arms_file(tmp_path / "b0.json", 0, "0000011111", {"iapo": {10: "0011111111"}}),
        arms_file(tmp_path / "a1.json", 1, "0000011111", {"grpo": {10: "0000011111"}, "iapo": {10: "0001111111"}}),
    ]
    assert credit.main([str(f) for f in files]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    grpo0, iapo1 = summary["arms"]["grpo"]["0"], summary["arms"]["iapo"]["1"]
    assert grpo0["steps"] == [0, 5, 10] and grpo0["pool"] == pytest.approx([0.5, 0.5, 0.6])
    assert grpo0["gain"] == pytest.approx(0.1) and iapo1["gain"] == pytest.approx(0.2)
    versus = summary["versus_base"]["iapo"]
    assert versus["pairs"] == 20 and versus["seeds"] == ["0", "1"]
    assert versus["difference"] == pytest.approx((0.8 - 0.6 + 0.7 - 0.5) / 2)  # iapo's last minus grpo's, pooled
    assert versus["gain_ratio"] == pytest.approx(0.25 / 0.05)
    low, high = versus["difference_ci"]
    assert low <= versus["difference"] <= high
    nested = versus["nested"]  # two seeds: each one's figure and the nested bootstrap over them
    assert nested["seeds"] == ["0", "1"] and nested["per_seed"] == pytest.approx([0.2, 0.2])
    assert nested["mean"] == pytest.approx(0.2) and nested["low"] <= 0.2 <= nested["high"]
    gains = summary["over_seeds"]["iapo"]
    assert gains["per_seed"] == pytest.approx([0.3, 0.2]) and gains["prob_improvement"] == 1.0
    assert summary["over_seeds"]["grpo"]["per_seed"] == pytest.approx([0.1, 0.0])


def test_rows_of_two_draws_pair_by_scenario_and_draw_and_nest_over_seeds(tmp_path, capsys):
    """Rows with their draw (a fifth field): the curve and gains over every (scenario, draw), the interval resampling
    scenarios with their draws, and over two seeds every seed's figure beside the nested bootstrap."""
    seed0 = {"grpo": {4: "0111100111"}, "iapo": {4: "1111101111"}}  # 5 scenarios x 2 draws, draw-major
    seed1 = {"grpo": {4: "0001100111"}, "iapo": {4: "0111100111"}}
    files = [
        arms_file(tmp_path / "s0.json", 0, "0011100011", seed0, draws=2),
        arms_file(tmp_path / "s1.json", 1, "0001100011", seed1, draws=2),
    ]
    assert credit.main([str(f) for f in files]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    iapo0 = summary["arms"]["iapo"]["0"]
    assert iapo0["draws"] == 2 and iapo0["pool"] == pytest.approx([0.5, 0.9]) and iapo0["gain"] == pytest.approx(0.4)
    low, high = iapo0["gain_ci"]
    assert 0 < low <= 0.4 <= high
    gains = summary["over_seeds"]["iapo"]
    assert gains["seeds"] == ["0", "1"] and gains["per_seed"] == pytest.approx([0.4, 0.3])
    assert gains["draws"] == [2, 2] and gains["n_scenarios"] == [5, 5] and gains["mean"] == pytest.approx(0.35)
    assert gains["low"] <= 0.35 <= gains["high"] and gains["iqm_low"] <= gains["iqm"] <= gains["iqm_high"]
    versus = summary["versus_base"]["iapo"]
    assert versus["pairs"] == 20 and versus["scenarios"] == 10 and versus["difference"] == pytest.approx(0.2)
    assert versus["nested"]["per_seed"] == pytest.approx([0.2, 0.2])
    assert "iapo gain over 2 seeds: +0.350" in out and "per seed 0: +0.400, 1: +0.300" in out
    assert "iapo - grpo over 2 seeds" in out


def test_a_collapsed_arm_is_shown_but_left_out_of_the_pooled_figures(tmp_path, capsys):
    files = [
        arms_file(tmp_path / "s0.json", 0, "0000011111", {"grpo": {10: "0000011111"}, "iapo": {10: "1111111111"}}),
        arms_file(tmp_path / "s1.json", 1, "0000011111", {"grpo": {10: "0000011111"}, "iapo": {10: "0000000000"}}),
    ]
    assert credit.main([str(f) for f in files] + ["--collapsed", "iapo:1"]) == 0
    out = capsys.readouterr().out
    assert "COLLAPSED" in out
    assert json.loads(out.strip().splitlines()[-1])["versus_base"]["iapo"]["seeds"] == ["0"]


def test_failure_shares_come_from_the_kinds(tmp_path, capsys):
    files = [arms_file(tmp_path / "s.json", 0, "0011", {"grpo": {4: "0011"}}, kinds="rm--")]
    credit.main([str(files[0])])
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["arms"]["grpo"]["0"]["failures_last"]
    assert last["refused"] == last["misroute"] == 0.25 and last["left"] == 0


def test_files_of_two_warm_starts_are_refused_by_name(tmp_path):
    one = arms_file(tmp_path / "one.json", 0, "0011", {"grpo": {4: "0011"}})
    other = arms_file(tmp_path / "other.json", 0, "1111", {"iapo": {4: "0011"}})
    with pytest.raises(SystemExit, match="other.json: seed 0's start differs"):
        credit.main([str(one), str(other)])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit, match="bad.json: not a readable"):
        credit.main([str(tmp_path / "bad.json")])
    with pytest.raises(SystemExit, match="--base grpo: no such arm"):
        credit.main([str(other)])
    drawn = arms_file(tmp_path / "drawn.json", 0, "00110011", {"grpo": {4: "0011"}}, draws=2)
    with pytest.raises(SystemExit, match=r"other \(scenario, draw\) pairs"):  # 2 scenarios x 2 draws, not the start's 4
        credit.main([str(drawn)])
