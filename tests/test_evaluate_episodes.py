"""Held-out evaluation keeps each agent's per-episode outcomes (scenario, strict PASS, routed) beside its figures,
in one process and merged from workers, compactly for evaluate's report, and reads them back for pairing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparring.agents.scripted import ExpertAgent
from sparring.evaluate.episodes import compact_episodes, episode_outcomes
from sparring.evaluate.heldout import EXPERT, HeldoutReport, evaluate_heldout
from sparring.evaluate.parallel import merge
from sparring.judge.rewards import Judge
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.models import ModelSpec, build_model
from sparring.settings import CoevolutionSettings, GRPOSettings
from sparring.train.distributed_check import ConstantStyle

torch.set_num_threads(1)
SPEC = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
OPPONENTS = ("coop", "coopsim", "camo", "advpool")


@pytest.fixture(scope="module")
def played(tmp_path_factory, tok, heldout):
    root = tmp_path_factory.mktemp("episodes")
    save_checkpoint(build_model(SPEC, tok), tok, root / "da0")
    save_checkpoint(build_model(SPEC, tok, seed=1), tok, root / "sim")
    settings = CoevolutionSettings(
        agent_grpo=GRPOSettings(max_turns=4, max_new_tokens=4), adversary_grpo=GRPOSettings(max_new_tokens=4)
    )
    scenarios = heldout[:4]
    agents = {"da0": root / "da0", "final": root / "da0"}  # one folder under two names: played once, kept twice
    report = evaluate_heldout(
        agents, root / "sim", [], scenarios, Judge(ConstantStyle()), settings, expert=ExpertAgent(refs="described")
    )
    return report, scenarios


def test_each_agent_keeps_its_episodes_outcomes_and_they_add_up_to_its_figures(played):
    report, scenarios = played
    assert set(report.episodes) == {"da0", "final", EXPERT}
    for name, by_opponent in report.episodes.items():
        figures = report.ceiling if name == EXPERT else report.agents[name]
        assert set(by_opponent) == set(OPPONENTS)
        for opponent, record in by_opponent.items():
            assert sorted(record["scenario_id"]) == sorted(s.scenario_id for s in scenarios)
            assert np.mean(record["strict_pass"]) == pytest.approx(figures[f"strict_pass_{opponent}"])
            assert np.mean(record["routed"]) == pytest.approx(figures[f"routing_acc_{opponent}"])
    assert report.episodes["final"] == report.episodes["da0"]
    assert sum(report.episodes[EXPERT]["camo"]["strict_pass"]) > 0  # the expert passes: the flags are not all 0


def test_the_compact_form_reads_back_episode_by_episode(played):
    report, scenarios = played
    compact = compact_episodes(report.episodes)
    assert set(compact) == {"scenario_ids", "strict_pass", "routed"}
    for opponent in OPPONENTS:
        record = report.episodes[EXPERT][opponent]
        assert compact["strict_pass"][EXPERT][opponent] == "".join(map(str, record["strict_pass"]))
        back = episode_outcomes(compact, EXPERT, opponent)
        assert back == {(sid, 0): v for sid, v in zip(record["scenario_id"], record["strict_pass"], strict=True)}
    assert list(compact["scenario_ids"]["coop"]) == [s.scenario_id for s in scenarios]  # play order
    with pytest.raises(KeyError):
        episode_outcomes(compact, "cycle_9", "advpool")
    again = {"a": {"coop": {"scenario_id": ["x", "x"], "strict_pass": [1, 0], "routed": [1, 1]}}}
    assert episode_outcomes(compact_episodes(again), "a", "coop") == {("x", 0): 1, ("x", 1): 0}
    other = {**again, "b": {"coop": {"scenario_id": ["y", "x"], "strict_pass": [1, 0], "routed": [1, 1]}}}
    with pytest.raises(ValueError, match="other scenarios"):
        compact_episodes(other)


def test_workers_parts_merge_with_their_episodes(played):
    report, _ = played
    first = HeldoutReport(agents={"da0": report.agents["da0"]}, episodes={"da0": report.episodes["da0"]})
    second = HeldoutReport(
        agents={"final": report.agents["final"]},
        ceiling=report.ceiling,
        episodes={"final": report.episodes["final"], EXPERT: report.episodes[EXPERT]},
    )
    merged = merge([first, second], ["da0", "final"], 1.0)
    assert merged.episodes == report.episodes and list(merged.episodes) == ["da0", "final", EXPERT]
