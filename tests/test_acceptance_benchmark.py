"""benchmarks/coevolution_acceptance.py: the criteria it reads from finished runs, its paired intervals over
(scenario, draw) and the nested bootstrap over runs, older runs (no draws) still read, and its refusal (exit 2,
naming the path) of a run folder or file that is missing or bad."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sparring.evaluate.episodes import compact_episodes, paired_bootstrap

ROOT = Path(__file__).resolve().parents[1]
import benchmarks.coevolution_acceptance as acceptance  # noqa: E402

N = 20  # held-out scenarios of the fake runs


def cycles(trained=("adversary", "agent"), success=(0.10, 0.25), faith=0.86) -> list[dict]:
    """Finished cycles as metrics.json lists them: who trained, each arena's adversary success and faithfulness."""
    return [
        {"cycle": k, "trained": t, "w_da": 0.7, "arena_adv_success": s, "arena_adv_faithfulness": faith}
        for k, (t, s) in enumerate(zip(trained, success, strict=True), start=1)
    ]


def fake_run(
    root: Path,
    passes: dict[str, int],
    *,
    coop: dict[str, float] | None = None,
    camo: dict[str, float] | None = None,
    cycle_list: list[dict] | None = None,
    seed: int = 0,
    episodes: bool = True,
) -> Path:
    """A finished run's two reports: ``passes[agent]`` of the N pool scenarios won (the first ones), DA0's wins a
    subset of the final agent's when it wins more (so the paired differences are all >= 0)."""
    coop = coop or {"da0": 0.96, "final": 0.98}
    camo = camo or {"da0": 0.80, "final": 0.85}
    flags = {a: [int(i < n) for i in range(N)] for a, n in passes.items()}
    agents = {
        a: {"strict_pass_advpool": passes[a] / N, "routing_acc_coop": coop[a], "strict_pass_camo": camo[a]}
        for a in ("da0", "final")
    }
    metrics = {
        "profile": "default", "seed": seed, "n_heldout": N, "agents": agents,
        "ceiling": {"strict_pass_advpool": passes["expert"] / N},
        "cycles": cycles() if cycle_list is None else cycle_list,
    }  # fmt: skip
    metrics["trained_history"] = [c["trained"] for c in metrics["cycles"]]
    ids = [f"sc_{i}" for i in range(N)]
    record = {a: {"advpool": {"scenario_id": ids, "strict_pass": f, "routed": f}} for a, f in flags.items()}
    evaluate = {"profile": "default", "seed": seed, **({"episodes": compact_episodes(record)} if episodes else {})}
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "metrics.json").write_text(json.dumps(metrics))
    (root / "reports" / "evaluate.json").write_text(json.dumps(evaluate))
    return root


def test_the_paired_bootstrap_on_hand_made_cases():
    same = [0, 1, 1, 0, 1] * 8
    assert paired_bootstrap(same, same) == (0.0, 0.0)
    low, high = paired_bootstrap([0] * 30 + [1] * 10, [1] * 40)  # every pair improved or held
    assert 0 < low <= 0.75 <= high and paired_bootstrap([0] * 40, [1] * 40) == (1.0, 1.0)
    mixed = ([0, 1] * 20, [1, 0] * 20)  # as many pairs lost as won: the interval straddles 0, seeded
    low, high = paired_bootstrap(*mixed)
    assert low < 0 < high and paired_bootstrap(*mixed) == (low, high)
    with pytest.raises(ValueError):
        paired_bootstrap([], [])


def test_a_run_that_meets_every_criterion(tmp_path):
    f = acceptance.seed_figures(fake_run(tmp_path, {"da0": 8, "final": 15, "expert": 20}), "default")
    assert f["pool_target"] == pytest.approx(0.7) and f["final_minus_da0_advpool"] == pytest.approx(0.35)
    low, high = f["final_minus_da0_advpool_ci"]
    assert 0 < low <= 0.35 <= high and f["n_paired"] == N
    assert f["routing_error_coop_final"] == pytest.approx(0.02)
    assert (f["adv_success_before_gym"], f["adv_success_after_gym"], f["adv_faithfulness_after_gym"]) == (
        0.10, 0.25, 0.86
    )  # fmt: skip
    assert f["faithfulness_source"] == "arena"
    assert acceptance.checks(f) == dict.fromkeys(acceptance.CRITERIA, True)


@pytest.mark.parametrize(
    ("change", "failed"),
    [
        ({"passes": {"da0": 8, "final": 15, "expert": 18}}, "expert_ceiling"),  # 0.90 < 0.95
        ({"passes": {"da0": 8, "final": 13, "expert": 20}}, "pool_half_gap"),  # 0.65 < 0.70
        ({"coop": {"da0": 0.99, "final": 0.975}}, "coop_routing_camo"),  # 0.025 <= 0.03 but above DA0's 0.01
        ({"coop": {"da0": 0.90, "final": 0.96}}, "coop_routing_camo"),  # below DA0's, but 0.04 > 0.03
        ({"camo": {"da0": 0.90, "final": 0.85}}, "coop_routing_camo"),
        ({"cycle_list": cycles(("adversary", "adversary"))}, "both_sides_trained"),
        ({"cycle_list": cycles(success=(0.25, 0.25))}, "first_gym"),  # success did not rise
        ({"cycle_list": cycles(faith=0.7)}, "first_gym"),  # it rose, unfaithfully
    ],
)
def test_each_criterion_fails_on_its_own(tmp_path, change, failed):
    kw = {"passes": {"da0": 8, "final": 15, "expert": 20}, **change}
    result = acceptance.checks(acceptance.seed_figures(fake_run(tmp_path, **kw), "default"))
    assert result == {name: name != failed for name in acceptance.CRITERIA}


def test_the_first_gym_is_unmeasured_when_no_arena_shows_it_against_da0():
    agent_first = acceptance.first_gym(cycles(("agent", "adversary")))
    assert agent_first["first_gym"] == "unmeasured" and "agent trained before" in agent_first["first_gym_note"]
    last = acceptance.first_gym(cycles(("agent", "adversary"))[1:])  # the adversary's gym in the last cycle
    assert last["first_gym"] == "unmeasured" and "no arena after" in last["first_gym_note"]
    older = [{k: v for k, v in c.items() if k != "arena_adv_faithfulness"} for c in cycles()]
    older[0]["adv_faithfulness"] = 0.83  # a run from before arenas kept faithfulness: the gym cycle's held-out
    gym = acceptance.first_gym(older)
    assert gym["adv_faithfulness_after_gym"] == 0.83 and gym["faithfulness_source"] == "held-out _adv"
    assert acceptance.checks({**FIGURES, **gym})["first_gym"] is True
    assert acceptance.checks({**FIGURES, **agent_first})["first_gym"] is None


FIGURES = {
    "expert_strict_pass_advpool": 1.0, "final_strict_pass_advpool": 0.8, "pool_target": 0.7,
    "routing_error_coop_final": 0.0, "routing_error_coop_da0": 0.0, "strict_pass_camo_final": 1.0,
    "strict_pass_camo_da0": 1.0, "trained_history": ["adversary", "agent"],
}  # fmt: skip


def test_over_seeds_judges_the_pool_on_the_mean_and_the_sides_in_every_seed(tmp_path, capsys):
    behind = fake_run(tmp_path / "a", {"da0": 8, "final": 12, "expert": 20}, seed=0)  # 0.60 < its 0.70
    ahead = fake_run(tmp_path / "b", {"da0": 8, "final": 18, "expert": 20}, seed=1, episodes=False)
    assert acceptance.main(["--run", f"seed0={behind}", "--run", f"seed1={ahead}"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out.strip().splitlines()[-1])
    assert set(doc["seeds"]) == {"seed0", "seed1"} and doc["mean"]["final_strict_pass_advpool"] == 0.75
    assert doc["mean"]["pool_target"] == pytest.approx(0.7) and doc["criteria"]["pool_half_gap"] is True
    assert doc["criteria"] == {**dict.fromkeys(acceptance.CRITERIA, True), **dict.fromkeys(acceptance.PER_SEED)}
    older = doc["seeds"]["seed1"]  # runs from before agent_rl: no DA1, no gains, the agent-RL criteria unmeasured
    assert older["final_minus_da0_advpool_ci"] is None and "no per-episode outcomes" in older["ci_note"]
    assert doc["over_seeds"]["final-da0"]["advpool"]["seeds"] == ["seed0"]  # the run without episodes is left out
    verdicts = re.findall(r"criterion pool_half_gap +(\w+)", out)
    assert verdicts == ["FAIL", "PASS", "PASS"]  # seed0, seed1, the mean

    unmeasured = fake_run(
        tmp_path / "c", {"da0": 8, "final": 18, "expert": 20}, cycle_list=cycles(["adversary"], [0.1])
    )
    assert acceptance.main(["--run", f"s0={behind}", "--run", f"s2={unmeasured}"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["criteria"]["first_gym"] is None and doc["criteria"]["both_sides_trained"] is False


def test_a_missing_or_bad_run_exits_2_naming_the_path(tmp_path, capsys):
    good = fake_run(tmp_path / "good", {"da0": 8, "final": 15, "expert": 20})

    def refused(folder: Path, *extra: str) -> str:
        assert acceptance.main(["--run", f"seed0={good}", "--run", f"seed1={folder}", *extra]) == 2
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and not captured.out
        return captured.err

    assert f"--run seed1: {tmp_path / 'nowhere'}: no such run folder" in refused(tmp_path / "nowhere")
    bad = fake_run(tmp_path / "bad", {"da0": 8, "final": 15, "expert": 20})
    (bad / "reports" / "evaluate.json").unlink()
    assert f"{bad / 'reports' / 'evaluate.json'}: missing" in refused(bad)
    (bad / "reports" / "evaluate.json").write_text("{not json")
    assert f"{bad / 'reports' / 'evaluate.json'}: unreadable" in refused(bad)
    (bad / "reports" / "evaluate.json").write_text(json.dumps({"profile": "default", "seed": 3}))
    assert "another run's" in refused(bad)
    metrics = json.loads((good / "reports" / "metrics.json").read_text())
    del metrics["agents"]["final"]["strict_pass_camo"]
    (bad / "reports" / "evaluate.json").write_text(json.dumps({"profile": "default", "seed": 0}))
    (bad / "reports" / "metrics.json").write_text(json.dumps(metrics))
    assert f"{bad / 'reports' / 'metrics.json'}: no agents.final.strict_pass_camo" in refused(bad)
    assert "profile 'default', expected 'quick'" in refused(good, "--profile", "quick")
    with pytest.raises(SystemExit) as exit_:
        acceptance.main(["--run", str(good)])  # no LABEL=
    assert exit_.value.code == 2 and "expected LABEL=DIR" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("gains", "expected"),
    [
        ({"da1-da0": (0.06, 0.01, 0.11), "final-da0": (0.09, 0.03, 0.15), "coop": -0.01, "camo": 0.0}, (True,) * 3),
        ({"da1-da0": (0.06, -0.01, 0.11), "final-da0": (0.09, 0.03, 0.15), "coop": 0, "camo": 0}, (False, True, True)),
        ({"da1-da0": (0.04, 0.01, 0.08), "final-da0": (0.07, 0.02, 0.12), "coop": 0, "camo": 0}, (False, False, True)),
        ({"da1-da0": (0.06, 0.01, 0.11), "final-da0": (0.09, 0.03, 0.15), "coop": 0, "camo": -0.03}, (1, 1, 0)),
    ],
)
def test_the_agent_rl_criteria_read_the_paired_gains(gains, expected):
    """DA1 - DA0 >= +0.05 and final - DA0 >= +0.08 vs the pool, each with its interval above 0; coop and camo held
    within 0.02 (issue 63), from metrics.json's gains as seed_figures reads them."""
    metrics = {"gains": {"da1-da0": {"advpool": list(gains["da1-da0"])},
                         "final-da0": {"advpool": list(gains["final-da0"]), "coop": [gains["coop"], -1, 1],
                                       "camo": [gains["camo"], -1, 1]}}}  # fmt: skip
    checks = acceptance.gain_checks(acceptance.rl_gains(metrics))
    assert tuple(checks[name] for name in acceptance.PER_SEED) == tuple(bool(x) for x in expected)


def test_a_project_copy_runs_its_own_code_not_the_originals(tmp_path):
    """The venv's editable install points at the original's src/, which may be edited while a seed's copy runs:
    the copy's stages import the copy's library (and its pipelines/) first."""
    import subprocess
    import sys

    for package in ("sparring", "pipelines"):
        folder = tmp_path / ("src" if package == "sparring" else "") / package
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("COPY = True\n")
    _, env = acceptance.copy_command(tmp_path)
    code = "import sparring, pipelines; print(sparring.__file__); print(pipelines.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd="/", env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        str(tmp_path / "src" / "sparring" / "__init__.py"),
        str(tmp_path / "pipelines" / "__init__.py"),
    ]


def test_the_pool_is_split_by_the_generation_each_scenario_was_dealt_to():
    """against_pool deals held-out scenario i to generation i % n, oldest first, one generation per adversary gym:
    the split gives each generation's strict PASS per agent."""
    ids = [f"sc_{i}" for i in range(N)]
    order = ids[0::2] + ids[1::2]  # two generations
    flags = {"da0": [1] * 10 + [0] * 10, "da1": [1] * 5 + [0] * 15}  # in play order: generation 0's ten first
    record = {a: {"advpool": {"scenario_id": order, "strict_pass": f, "routed": f}} for a, f in flags.items()}
    trained = ["adversary", "agent", "adversary"]
    split = acceptance.pool_by_generation({"episodes": compact_episodes(record)}, trained)
    assert split == {"pool_generations": 2, "strict_pass_advpool_by_generation": {"da0": [1.0, 0.0], "da1": [0.5, 0.0]}}
    assert acceptance.pool_by_generation({}, trained) == {}  # an older run without per-episode outcomes


def test_the_split_by_generation_is_read_from_metrics_where_evaluate_kept_it():
    """A run with metrics.json's per-agent list (generation 0, the simulator, first) is read as it is; the episodes'
    split is only for runs from before it."""
    metrics = {"agents": {"da0": {"strict_pass_advpool_by_generation": [0.5, 0.25, 0.0]}, "final": {}}}
    split = acceptance.pool_by_generation({}, ["adversary", "agent", "adversary"], metrics)
    assert split == {"pool_generations": 3, "strict_pass_advpool_by_generation": {"da0": [0.5, 0.25, 0.0]}}


def two_draw_run(root: Path, outcomes: dict[str, dict[str, str]], seed: int) -> Path:
    """A fake run whose evaluate.json holds 2 customer draws: ``outcomes[agent][opponent]`` one 0/1 per (scenario,
    draw), draw-major (draw 0's N scenarios, then draw 1's), as evaluate writes them."""
    fake_run(root, {"da0": 8, "final": 15, "expert": 20}, seed=seed)
    ids, draws = [f"sc_{i}" for i in range(N)] * 2, [0] * N + [1] * N
    record = {
        agent: {o: {"scenario_id": ids, "draw": draws, "strict_pass": list(map(int, f)), "routed": [0] * 2 * N}
                for o, f in by_opponent.items()}
        for agent, by_opponent in outcomes.items()
    }  # fmt: skip
    evaluate = {"profile": "default", "seed": seed, "episodes": compact_episodes(record)}
    (root / "reports" / "evaluate.json").write_text(json.dumps(evaluate))
    return root


def test_the_nested_bootstrap_over_runs_sits_beside_every_seeds_paired_difference(tmp_path, capsys):
    """Two runs of 2 draws and an older run (one draw, no draws key, no DA1 nor _ref): DA1 - DA0 and final - DA0
    against ref and advpool over every run's (scenario, draw), each run's figure beside the nested bootstrap."""
    none, half, fifth = "0" * N, "1" * (N // 2) + "0" * (N // 2), "1" * 4 + "0" * (N - 4)
    a = two_draw_run(
        tmp_path / "a",
        {"da0": {"advpool": none * 2, "ref": none * 2}, "da1": {"advpool": half * 2, "ref": fifth * 2},
         "final": {"advpool": "1" * N + half, "ref": half * 2}},
        seed=0,
    )  # fmt: skip
    b = two_draw_run(
        tmp_path / "b",
        {"da0": {"advpool": none * 2, "ref": none * 2}, "da1": {"advpool": fifth + none, "ref": none * 2},
         "final": {"advpool": "1" * N + none, "ref": half + none}},
        seed=1,
    )  # fmt: skip
    old = fake_run(tmp_path / "old", {"da0": 8, "final": 15, "expert": 20}, seed=2)
    assert acceptance.main(["--run", f"a={a}", "--run", f"b={b}", "--run", f"old={old}"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out.strip().splitlines()[-1])
    assert (doc["seeds"]["a"]["n_paired"], doc["seeds"]["a"]["draws"]) == (N, 2)
    assert (doc["seeds"]["old"]["n_paired"], doc["seeds"]["old"]["draws"]) == (N, 1)
    nested = doc["over_seeds"]
    da1 = nested["da1-da0"]["advpool"]  # the older run played no DA1: two seeds
    assert da1["seeds"] == ["a", "b"] and da1["per_seed"] == pytest.approx([0.5, 0.1])
    assert da1["mean"] == pytest.approx(0.3) and da1["draws"] == [2, 2] and da1["n_scenarios"] == [N, N]
    assert da1["low"] <= 0.3 <= da1["high"] and da1["iqm_low"] <= da1["iqm"] <= da1["iqm_high"]
    assert da1["prob_improvement"] == 1.0
    final = nested["final-da0"]["advpool"]
    assert final["seeds"] == ["a", "b", "old"] and final["per_seed"] == pytest.approx([0.75, 0.5, 0.35])
    assert final["draws"] == [2, 2, 1]
    assert nested["final-da0"]["ref"]["seeds"] == ["a", "b"]
    assert nested["final-da0"]["ref"]["per_seed"] == pytest.approx([0.5, 0.25])
    assert nested["da1-da0"]["ref"]["per_seed"] == pytest.approx([0.2, 0.0])
    assert "da1-da0 vs advpool over 2 seeds: +0.300" in out and "per seed a: +0.500, b: +0.100" in out
