"""What `evaluate` and `report` compute beyond averages: pass^k, Wilson intervals, failure kinds, the ceiling
share, cross-play reuse, the report's figures and tables, and the asset checks on planted bad inputs."""

from __future__ import annotations

import json

import pytest

from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, ExpertAgent, RandomAgent
from sparring.evaluate import checks
from sparring.evaluate.crossplay import (
    FAILURE_KINDS,
    cross_play_matrix,
    failure_kind,
    failure_rates,
    pass_hat_k,
    pass_hat_metrics,
    share_of_ceiling,
    wilson_interval,
)
from sparring.evaluate.figures import FIGURES
from sparring.evaluate.report import build_report, gain_rows, rl_verdict, summary_rows
from sparring.metrics import routed_correctly
from sparring.rollout import run_episodes


@pytest.mark.parametrize(
    ("successes", "n", "k", "expected"),
    [
        ([4, 0], 4, 1, 0.5),  # pass^1 is the mean success rate: (4/4 + 0/4) / 2
        ([3, 2], 4, 2, (3 / 6 + 1 / 6) / 2),  # C(3,2)/C(4,2) = 3/6, C(2,2)/C(4,2) = 1/6
        ([3, 4, 1], 4, 4, 1 / 3),  # only a task passed 4 of 4 times counts at k = n
        ([2], 5, 3, 0.0),  # fewer successes than k
        ([5, 4], 5, 2, (10 / 10 + 6 / 10) / 2),
    ],
)
def test_pass_hat_k_matches_hand_computed_values(successes, n, k, expected):
    assert pass_hat_k(successes, n, k) == pytest.approx(expected)


def test_pass_hat_k_refuses_impossible_counts():
    with pytest.raises(ValueError, match="k <= n"):
        pass_hat_k([1], 2, 3)
    with pytest.raises(ValueError, match="successes"):
        pass_hat_k([3], 2, 1)


def test_wilson_interval_is_the_textbook_one():
    low, high = wilson_interval(8, 10)  # the standard worked example: 0.490 .. 0.943
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.fixture(scope="module")
def played(heldout):
    """The expert and a random agent against scripted customers: real episodes, no model."""
    scenarios = heldout[:12]
    expert = run_episodes(scenarios, ExpertAgent(), CooperativeCustomer(), max_turns=6)
    skipping = run_episodes(scenarios, ExpertAgent(skip_lookup=True), CooperativeCustomer(), max_turns=6)
    random = run_episodes(scenarios, RandomAgent(seed=3), CamouflagingCustomer(seed=0), max_turns=3)
    return {"expert": expert, "skipping": skipping, "random": random}


def test_failure_kinds_classify_real_episodes(played):
    assert all(failure_kind(ep) is None for ep in played["expert"] if ep.outcome.strict_pass)
    assert sum(ep.outcome.strict_pass for ep in played["expert"]) >= 10
    # The world refuses a resolving call made before the caller was looked up: refused, not misrouted.
    skipped = [failure_kind(ep) for ep in played["skipping"]]
    assert "refused" in skipped and "misroute" not in skipped and None not in skipped
    kinds = {failure_kind(ep) for ep in played["random"]}
    assert kinds <= {*FAILURE_KINDS} and kinds & {"misroute", "format"}
    for name, episodes in played.items():
        rates = failure_rates(episodes, "_x")
        strict = sum(ep.outcome.strict_pass for ep in episodes) / len(episodes)
        assert sum(rates.values()) == pytest.approx(1 - strict), name


def test_pass_hat_metrics_over_runs(played):
    runs = [played["expert"], played["skipping"]]  # one scenario list played twice, by two policies
    m = pass_hat_metrics(runs, "_coop")
    both = sum(a.outcome.strict_pass and b.outcome.strict_pass for a, b in zip(*runs, strict=True)) / len(runs[0])
    assert m["pass_hat_2_coop"] == pytest.approx(both)
    mean = sum(ep.outcome.strict_pass for run in runs for ep in run) / (2 * len(runs[0]))
    assert m["pass_hat_1_coop"] == pytest.approx(mean)
    with pytest.raises(ValueError, match="same scenarios"):
        pass_hat_metrics([played["expert"], played["expert"][:3]], "_coop")


def test_cross_play_matrix_and_share_of_ceiling():
    cell = {"strict_pass": 0.5, "ci_low": 0.2, "ci_high": 0.8, "n": 10}
    m = cross_play_matrix({"da0": {"coop": cell, "adv_1": cell}, "final": {"coop": cell}})
    assert m["agents"] == ["da0", "final"] and m["opponents"] == ["coop", "adv_1"]
    assert m["strict_pass"] == [[0.5, 0.5], [0.5, None]]  # a cell never played is None, not 0
    shares = share_of_ceiling({"strict_pass_coop": 0.45, "strict_pass_camo": 0.3}, {"strict_pass_coop": 0.9,
                              "strict_pass_camo": 0.0})  # fmt: skip
    assert shares == {"share_of_ceiling_coop": pytest.approx(0.5)}  # a zero ceiling gives no share


def _metrics() -> dict:
    row = {"strict_pass_ref": 0.65, "strict_pass_coop": 0.8, "strict_pass_camo": 0.7, "strict_pass_advpool": 0.5,
           "routing_acc_coop": 0.9,
           "adv_success_advpool": 0.3, "share_of_ceiling_advpool": 0.5263, "pass_hat_1_advpool": 0.5,
           "pass_hat_4_advpool": 0.25, "n_episodes_coop": 40, "unauthorized_actions_coop": 0}  # fmt: skip
    return {
        "profile": "default", "seed": 0, "n_heldout": 40, "stop_reason": "gates",
        "agents": {"da0": dict(row), "cycle_1": dict(row, strict_pass_advpool=0.6), "final": dict(row)},
        "ceiling": dict(row, strict_pass_advpool=0.95),
        "cycles": [{"cycle": 1, "trained": "adversary", "w_da": 0.55}],
        "cross_play": cross_play_matrix({"da0": {"coop": {"strict_pass": 0.8, "ci_low": 0.6, "ci_high": 0.9,
                                                          "n": 40}}}),
        "strategies": [{"name": "Contextual Camouflage", "share_by_cycle": [0.4], "success_rate": 0.6,
                        "traits": {"mean_words": 30.0, "keyword_rate": 0.1, "detail_rate": 0.9},
                        "examples": ["a long story about a Tesco trip on the 12th"], "ngrams": ["tesco"]}],
        "simulator": {"sft": {"outcome_f1": 0.2, "sim_faithfulness": 0.54}},
    }  # fmt: skip


def test_report_shows_the_metrics_numbers_and_every_figure(tmp_path):
    metrics = _metrics()
    markdown, page, _ = build_report(metrics, tmp_path / "figures")
    assert sorted(p.stem for p in (tmp_path / "figures").glob("*.png")) == sorted(FIGURES)
    header, *rows = summary_rows(metrics)
    assert [r[0] for r in rows] == ["expert (ceiling)", "da0", "cycle_1", "final"]
    assert rows[2][header.index("PASS pool")] == "0.600" and rows[0][header.index("PASS pool")] == "0.950"
    assert rows[1][header.index("pass^k pool")] == "0.250"  # the largest k
    assert "| cycle_1 | 0.650 | 0.800 | 0.700 | 0.600 |" in markdown
    assert "Contextual Camouflage" in markdown and "0.800 [0.600, 0.900]" in markdown
    assert "](figures/cross_play.png)" in markdown and page.count("data:image/png;base64,") == len(FIGURES)
    assert "figures/" not in page  # self-contained: no link to a file beside it


def test_the_wall_time_table_lists_every_stage_in_run_order_evaluate_and_report_too(tmp_path):
    """Issue 61 item 7: the table was alphabetical, from metrics.json, which evaluate writes before it and report
    end. It now takes the run's order and every stage, from the timings the pipeline keeps beside the reports."""
    from stagekit.timings import run_order_times

    timings = tmp_path / "reports" / "timings"
    timings.mkdir(parents=True)
    walls = {"ingest": 2.0, "scenarios": 1.5, "agent_sft": 30.25, "evaluate": 12.0, "report": 99.0}
    for name, wall in walls.items():
        (timings / f"{name}.json").write_text(json.dumps({"stage": name, "profile": "quick", "wall_seconds": wall}))
    (timings / "cycle_1.json").write_text(json.dumps({"stage": "cycle_1", "profile": "default", "wall_seconds": 7}))
    order = ["ingest", "scenarios", "judge_models", "agent_sft", "cycle_1", "evaluate", "report"]
    wall = run_order_times(tmp_path, order, "quick", running="report")
    assert wall == {"ingest": 2.0, "scenarios": 1.5, "judge_models": None, "agent_sft": 30.25, "cycle_1": None,
                    "evaluate": 12.0, "report": "running now"}  # fmt: skip
    markdown, page, _ = build_report(_metrics(), tmp_path / "figures", wall)
    table = markdown.split("## Wall time per stage", 1)[1].strip().splitlines()
    assert [row.split(" | ")[0].strip("| ") for row in table[2:]] == order  # run order, not alphabetical
    assert table[2:] == ["| ingest | 2.000 |", "| scenarios | 1.500 |", "| judge_models | – |",
                         "| agent_sft | 30.250 |", "| cycle_1 | – |", "| evaluate | 12.000 |",
                         "| report | running now |"]  # fmt: skip
    assert "running now" in page


def test_report_leaves_out_what_has_not_run(tmp_path):
    metrics = {"profile": "quick", "seed": 0, "n_heldout": 3, "agents": {"da0": {"strict_pass_coop": 0.0}}}
    markdown, _, _ = build_report(metrics, tmp_path / "f")
    assert "Cross-play" not in markdown and "Peer-reward" not in markdown and "Simulator fidelity" not in markdown
    assert "No adversary generation has trained yet" in markdown
    assert (tmp_path / "f" / "cross_play.png").is_file()  # drawn anyway, saying what is missing


def test_checks_pass_on_good_reports_and_fail_on_planted_bad_ones():
    good = _metrics()
    assert checks.final_no_worse_than_da0(good)[0] and checks.no_unauthorized_actions(good)[0]
    worse = json.loads(json.dumps(good))
    worse["agents"]["final"]["strict_pass_coop"] = 0.5  # 20/40: its interval tops out near 0.65 < 0.8
    passed, details = checks.final_no_worse_than_da0(worse)
    assert not passed and details["da0"] == 0.8 and details["final_ci_high"] < 0.8
    bad = json.loads(json.dumps(good))
    bad["agents"]["cycle_1"]["unauthorized_actions_advpool"] = 2
    passed, details = checks.no_unauthorized_actions(bad)
    assert not passed and details["unauthorized_actions"] == {"cycle_1.unauthorized_actions_advpool": 2}
    assert checks.da0_beats_tfidf({"metrics": {"intent_acc_heldout_split": 0.93,
                                               "tfidf_intent_acc_heldout_split": 0.9}})[0]  # fmt: skip
    assert not checks.da0_beats_tfidf({"metrics": {"intent_acc_heldout_split": 0.5,
                                                   "tfidf_intent_acc_heldout_split": 0.9}})[0]  # fmt: skip
    assert not checks.da0_beats_tfidf({"metrics": {}})[0]  # a report without the figures fails, it does not pass
    assert checks.simulator_is_faithful({"metrics": {"sim_faithfulness": 0.54}})[0]
    assert not checks.simulator_is_faithful({"metrics": {"sim_faithfulness": 0.2}})[0]
    floor = checks.FAITHFULNESS_FLOOR  # the floor itself passes, anything under it fails
    assert checks.simulator_is_faithful({"sim_faithfulness": floor})[0]
    assert not checks.simulator_is_faithful({"sim_faithfulness": floor - 1e-6})[0]


def test_dagster_checks_read_the_report_and_fail_on_a_missing_or_bad_file(tmp_path):
    from assets.evaluate import no_unauthorized_actions
    from stagekit.resources import ProjectResource

    project = ProjectResource(root=str(tmp_path))
    result = no_unauthorized_actions(project=project)
    assert not result.passed and "reports/metrics.json" in str(result.metadata["error"].value)
    (tmp_path / "reports").mkdir()
    bad = _metrics()
    bad["agents"]["final"]["unauthorized_actions_camo"] = 1
    (tmp_path / "reports" / "metrics.json").write_text(json.dumps(bad))
    assert not no_unauthorized_actions(project=project).passed
    (tmp_path / "reports" / "metrics.json").write_text(json.dumps(_metrics()))
    assert no_unauthorized_actions(project=project).passed
    assert "not verified" in next(iter(no_unauthorized_actions.check_specs)).description  # shown in the UI


def test_an_episode_the_turn_cap_cut_off_is_not_called_a_misroute(heldout):
    """The expert against the camouflaging customer on quick's one round read as misroute 1.000 beside an intent
    accuracy of 1.0: it was still looking the customer up when the turns ran out."""
    cut = run_episodes(heldout[:12], ExpertAgent(), CamouflagingCustomer(seed=0), max_turns=1)
    assert all(ep.ended_by is None and not routed_correctly(ep) for ep in cut)
    assert {failure_kind(ep) for ep in cut} == {"turn_cap"}
    assert failure_rates(cut, "_camo")["failure_turn_cap_camo"] == 1.0
    # A wrong resolving tool is still a misroute when the turns run out after it.
    played = played_wrong_tool(heldout[:12])
    wrong = [ep for ep in played if any(c.name in WRONG - {ep.scenario.tool} for c in ep.log.tool_calls())]
    assert len(wrong) >= 6 and all(ep.ended_by is None for ep in wrong)
    assert {failure_kind(ep) for ep in wrong} == {"misroute"}
    assert {failure_kind(ep) for ep in played if ep not in wrong} == {"turn_cap"}  # cut off while confirming


WRONG = {"fees_and_rates", "cash_services"}


class WrongToolExpert(ExpertAgent):
    """The expert, calling another intent's resolving tool wherever it would call the right one."""

    def reply(self, scenario, messages):
        text = super().reply(scenario, messages)
        wrong = "fees_and_rates" if scenario.tool != "fees_and_rates" else "cash_services"
        return text.replace(f"<call>{scenario.tool} ", f"<call>{wrong} ")


def played_wrong_tool(scenarios):
    return run_episodes(scenarios, WrongToolExpert(), CooperativeCustomer(), max_turns=2)


@pytest.mark.parametrize(
    ("pool", "verdict"),
    [([0.09, 0.03, 0.15], "RL helped"), ([-0.05, -0.1, -0.01], "RL hurt"), ([0.01, -0.05, 0.07], "distinguishable")],
)
def test_the_report_says_whether_rl_helped_from_the_paired_pool_gain(pool, verdict):
    metrics = {"gains": {"final-da0": {"advpool": pool, "coop": [0.0, -0.02, 0.02]}, "da1-da0": {"advpool": pool}}}
    line = rl_verdict(metrics)
    assert verdict in line
    assert f"{pool[0]:+.3f}" in line and f"{pool[1]:+.3f}, {pool[2]:+.3f}" in line
    rows = gain_rows(metrics)
    assert rows[0] == ["", "reference opponent", "adversary pool", "cooperative simulator", "camouflaging customer"]
    assert rows[1][0].startswith("DA1 − DA0") and rows[1][1] == rows[1][3] == "–"  # the pair's unplayed opponents
    assert rows[2][3] == "+0.000 [-0.020, +0.020]"
    assert rl_verdict({}).startswith("RL's gain: not measured")
    # with the reference opponent played, the verdict reads it: no compared agent trained against it
    metrics["gains"]["final-da0"]["ref"] = [-0.2, -0.3, -0.1]
    assert rl_verdict(metrics).startswith("RL hurt: final − DA0 strict PASS against the reference opponent -0.200")


def test_report_gives_each_peer_members_gain_interval_and_how_it_was_rewarded(tmp_path):
    metrics = {"profile": "banking77", "seed": 0, "n_heldout": 3, "agents": {"da0": {"strict_pass_coop": 0.0}}}
    metrics["peer"] = {
        "members": {
            "smollm": {"before": 0.51, "after": 0.51, "gain_ci": [0.0, 0.0], "collapsed": False},
            "neox": {"before": 0.28, "after": 0.38, "gain_ci": [0.073, 0.122], "collapsed": False},
        },
        "reward": "teacher",
        "estimate": "exact",
        "teacher": "smollm",
        "kappa": 0.1,
        "c": 0.3,
        "w": 0.02,
    }
    markdown, _, _ = build_report(metrics, tmp_path / "f")
    section = markdown.split("## Peer-reward RL", 1)[1]
    assert "| member | is | routing before | after | gain 95% CI | collapsed |" in section
    assert "| neox | a router | 0.280 | 0.380 | [+0.073, +0.122] |" in section
    assert "Reward teacher (exact), teacher smollm." in section
    # the default's co-training: the agent is the member played as peer_final, the labels are the joint vote's
    metrics["peer"].update(reward="cohort", teacher=None, loss="sft", keep=0.7, learners=["final"], n_measure=1000)
    metrics["peer"].update(measure_from="pool")
    metrics["peer"]["members"]["final"] = {
        "before": 0.566,
        "after": 0.612,
        "gain_ci": [0.026, 0.065],
        "collapsed": False,
    }
    section = build_report(metrics, tmp_path / "g")[0].split("## Peer-reward RL", 1)[1]
    assert "| final | the agent (played as peer_final) | 0.566 | 0.612 | [+0.026, +0.065] |" in section
    assert "on 1000 labelled utterances never trained on (held out of the unlabeled pool)" in section
    assert "the members' joint vote, its 70% most confident share, learned by final (sft)." in section
