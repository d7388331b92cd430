"""benchmarks/credit_arms.py: credit arms compared from their per-scenario outcomes alone (issue 57)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks.credit_arms as credit


def rows(passes: str, kinds: str = "") -> list[list]:
    """[scenario id, opponent, strict pass, failure kind] rows; ``kinds`` one letter per scenario (r: refused)."""
    names = {"r": "refused", "m": "misroute", "l": "left", "-": ""}
    kinds = kinds or "-" * len(passes)
    return [
        [f"sc{i}", "sim", int(p), names[k] if p == "0" else ""]
        for i, (p, k) in enumerate(zip(passes, kinds, strict=True))
    ]


def arms_file(path: Path, seed: int, start: str, arms: dict[str, dict[int, str]], kinds: str = "") -> Path:
    saved = {
        "scenario_ids": [f"sc{i}" for i in range(len(start))],
        "start": {"advpool": rows(start, kinds), "coop": rows(start)},
        "arms": {
            name: {
                "seed": seed,
                "checkpoints": {str(k): {"advpool": rows(v, kinds), "coop": rows(v)} for k, v in cps.items()},
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
