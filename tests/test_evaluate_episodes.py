"""Held-out evaluation over customer draws: each agent keeps its per-episode outcomes (scenario, draw, strict PASS,
routed) beside its figures, in one process and merged from workers, compactly for evaluate's report, and reads them
back for pairing. Two agents meet the same customer draws (common random numbers), the pool deals generation 0,
and a bad set of draws is refused."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from sparring.agents.scripted import ExpertAgent
from sparring.evaluate.episodes import compact_episodes, episode_outcomes, gains, outcome_matrix
from sparring.evaluate.heldout import EXPERT, HeldoutReport, check_draws, evaluate_heldout
from sparring.evaluate.parallel import merge
from sparring.judge.rewards import Judge
from sparring.lm.checkpoints import save_checkpoint
from sparring.lm.models import ModelSpec, build_model
from sparring.rollout import run_episodes
from sparring.settings import CoevolutionSettings, GRPOSettings
from sparring.train.play import GameModels
from sparring.train.world_reward import ConstantStyle

torch.set_num_threads(1)
SPEC = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
OPPONENTS = ("coop", "coopsim", "camo", "ref", "advpool")
DRAWS = [0, 1]
SETTINGS = CoevolutionSettings(
    agent_grpo=GRPOSettings(max_turns=4, max_new_tokens=4), adversary_grpo=GRPOSettings(max_new_tokens=6)
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tok):
    root = tmp_path_factory.mktemp("episodes")
    save_checkpoint(build_model(SPEC, tok), tok, root / "da0")
    shutil.copytree(root / "da0", root / "twin")  # the same checkpoint in another folder: played on its own
    save_checkpoint(build_model(SPEC, tok, seed=1), tok, root / "sim")
    save_checkpoint(build_model(SPEC, tok, seed=2), tok, root / "adv1")
    return root


@pytest.fixture(scope="module")
def played(folders, heldout):
    scenarios = heldout[:4]
    # da0 and final: one folder under two names, played once, kept twice; twin: the same weights played apart
    agents = {"da0": folders / "da0", "final": folders / "da0", "twin": folders / "twin"}
    report = evaluate_heldout(
        agents, folders / "sim", [folders / "adv1"], scenarios, Judge(ConstantStyle()), SETTINGS,
        draws=DRAWS, expert=ExpertAgent(refs="described"),
    )  # fmt: skip
    return report, scenarios


def test_each_agent_keeps_its_episodes_outcomes_and_they_add_up_to_its_figures(played):
    report, scenarios = played
    assert set(report.episodes) == {"da0", "final", "twin", EXPERT}
    for name, by_opponent in report.episodes.items():
        figures = report.ceiling if name == EXPERT else report.agents[name]
        assert set(by_opponent) == set(OPPONENTS)
        for opponent, record in by_opponent.items():
            k = 1 if opponent in ("coop", "coopsim") else len(DRAWS)  # greedy opponents play one draw
            assert record["scenario_id"] == [s.scenario_id for s in scenarios] * k  # draw by draw, in order
            assert sorted(set(record["draw"])) == DRAWS[:k] and figures[f"draws_{opponent}"] == k
            assert np.mean(record["strict_pass"]) == pytest.approx(figures[f"strict_pass_{opponent}"])
            assert np.mean(record["routed"]) == pytest.approx(figures[f"routing_acc_{opponent}"])
    assert report.episodes["final"] == report.episodes["da0"]
    assert sum(report.episodes[EXPERT]["camo"]["strict_pass"]) > 0  # the expert passes: the flags are not all 0
    assert {"pass_hat_1_ref", "pass_hat_2_ref", "pass_hat_2_advpool"} <= set(report.ceiling)


def test_the_expert_plays_its_first_draw_only_and_opponents_left_out_are_not_played(played, folders):
    """evaluate's defaults: the ceiling over ``expert_draws`` of the K draws, and only ``opponents``; what is played
    is the same episodes as when everything is (draw j's seed does not depend on what else is played)."""
    report, scenarios = played
    few = evaluate_heldout(
        {"da0": folders / "da0"}, folders / "sim", [folders / "adv1"], scenarios, Judge(ConstantStyle()), SETTINGS,
        draws=DRAWS, expert=ExpertAgent(refs="described"), opponents=("camo", "ref"), expert_draws=1,
    )  # fmt: skip
    assert set(few.episodes["da0"]) == set(few.episodes[EXPERT]) == {"camo", "ref"}
    assert few.episodes["da0"] == {o: report.episodes["da0"][o] for o in ("camo", "ref")}
    n = len(scenarios)
    for opponent in ("camo", "ref"):
        assert set(few.episodes[EXPERT][opponent]["draw"]) == {DRAWS[0]}
        assert few.episodes[EXPERT][opponent] == {k: v[:n] for k, v in report.episodes[EXPERT][opponent].items()}
    assert few.ceiling["draws_ref"] == 1 and "pass_hat_2_ref" not in few.ceiling
    assert few.agents["da0"]["draws_ref"] == len(DRAWS)
    # kept compactly as evaluate keeps them, whichever comes first: the expert's outcomes are its first draw's
    for order in ([EXPERT, "da0"], ["da0", EXPERT]):
        compact = compact_episodes({name: few.episodes[name] for name in order})
        mine = episode_outcomes(compact, EXPERT, "ref")
        assert {d for _, d in mine} == {DRAWS[0]} and len(mine) == n
        assert episode_outcomes(compact, "da0", "ref") == episode_outcomes(
            compact_episodes(report.episodes), "da0", "ref"
        )


def test_the_same_checkpoint_played_apart_meets_the_same_draws_episode_by_episode(played, folders, heldout):
    """Common random numbers: da0 and its twin (another folder, another process of play) give identical outcomes
    draw by draw against every sampled opponent, while the draws themselves differ from one another."""
    report, scenarios = played
    assert report.episodes["twin"] == report.episodes["da0"]
    # the customers really sample: draws 0 and 1 of one scenario differ somewhere (else the check could not fail)
    models = GameModels(SETTINGS, episode_draws=True)
    agent, ref = models.agent_policy_of(folders / "da0", True), models.adversary(folders / "sim")
    texts = [
        [" | ".join(m["content"] for m in ep.messages if m["role"] == "user") for ep in
         run_episodes(scenarios, agent, ref, max_turns=2, seed=seed)]
        for seed in (11, 12)
    ]  # fmt: skip
    assert texts[0] != texts[1]
    # an episode's draws do not depend on the batch it is played in: alone, the same customer words
    alone = run_episodes(scenarios[1:2], agent, ref, max_turns=2, seed=11)
    assert " | ".join(m["content"] for m in alone[0].messages if m["role"] == "user") == texts[0][1]
    # the twin (its own model object) in another batch order meets the same customer, word for word: the 0/1
    # outcomes above could agree by chance (tiny models mostly fail), whole transcripts cannot
    twin = models.agent_policy_of(folders / "twin", True)
    backwards = run_episodes(scenarios[::-1], twin, ref, max_turns=2, seed=11)[::-1]
    assert [[m["content"] for m in ep.messages] for ep in backwards] == [
        [m["content"] for m in ep.messages] for ep in run_episodes(scenarios, agent, ref, max_turns=2, seed=11)
    ]


def test_the_pool_takes_generation_0s_share_from_ref_and_plays_the_rest_against_its_own_generation(heldout):
    """_against_pool deals scenario i to generation i mod G: generation 0's scenarios reuse the given `_ref`
    episodes (the very objects), the others are played against their generation and no other."""
    from sparring.agents.scripted import CooperativeCustomer
    from sparring.evaluate.heldout import _against_pool

    class Recording(CooperativeCustomer):
        def __init__(self) -> None:
            super().__init__()
            self.seen: set[str] = set()

        def act(self, requests):
            self.seen |= {r.scenario.scenario_id for r in requests}
            return super().act(requests)

    scenarios, pool = heldout[:7], [Recording(), Recording(), Recording()]
    play = {"max_turns": 2, "seed": 3}
    ref = run_episodes(scenarios, ExpertAgent(), pool[0], **play)
    pool[0].seen.clear()
    episodes = _against_pool(scenarios, ExpertAgent(), pool, play, ref)
    assert [ep.scenario.scenario_id for ep in episodes] == [s.scenario_id for s in scenarios]
    assert all(episodes[i] is ref[i] for i in (0, 3, 6)) and not pool[0].seen
    assert pool[1].seen == {scenarios[i].scenario_id for i in (1, 4)}
    assert pool[2].seen == {scenarios[i].scenario_id for i in (2, 5)}


def test_the_pool_deals_generation_0_and_reports_each_generation(played):
    report, scenarios = played
    da0 = report.episodes["da0"]
    pool, ref = da0["advpool"], da0["ref"]
    for i, (sid, draw) in enumerate(zip(pool["scenario_id"], pool["draw"], strict=True)):
        j = ref["draw"].index(draw) + ref["scenario_id"][ref["draw"].index(draw) :].index(sid)
        if scenarios.index(next(s for s in scenarios if s.scenario_id == sid)) % 2 == 0:  # generation 0's share
            assert pool["strict_pass"][i] == ref["strict_pass"][j]
    by_generation = report.agents["da0"]["strict_pass_advpool_by_generation"]
    assert len(by_generation) == 2  # the simulator (generation 0) and the one trained generation
    assert np.mean(by_generation) == pytest.approx(report.agents["da0"]["strict_pass_advpool"])
    assert report.cross_play["opponents"] == ["coop", "camo", "adv_0", "adv_1"]
    assert set(report.adversary_episodes) == {1}  # strategies: the trained generation's episodes, not the simulator's


def test_the_compact_form_reads_back_by_scenario_and_draw(played):
    report, scenarios = played
    compact = compact_episodes(report.episodes)
    assert set(compact) == {"scenario_ids", "draws", "strict_pass", "routed"}
    for opponent in OPPONENTS:
        record = report.episodes[EXPERT][opponent]
        assert compact["strict_pass"][EXPERT][opponent] == "".join(map(str, record["strict_pass"]))
        back = episode_outcomes(compact, EXPERT, opponent)
        pairs = zip(record["scenario_id"], record["draw"], record["strict_pass"], strict=True)
        assert back == {(sid, d): v for sid, d, v in pairs}
    assert outcome_matrix(episode_outcomes(compact, EXPERT, "ref")).shape == (len(scenarios), len(DRAWS))
    assert list(compact["scenario_ids"]["coop"]) == [s.scenario_id for s in scenarios]  # play order
    with pytest.raises(KeyError):
        episode_outcomes(compact, "cycle_9", "advpool")
    old = {"a": {"coop": {"scenario_id": ["x", "x"], "strict_pass": [1, 0], "routed": [1, 1]}}}  # before draws
    assert episode_outcomes(compact_episodes(old), "a", "coop") == {("x", 0): 1, ("x", 1): 0}
    other = {**old, "b": {"coop": {"scenario_id": ["y", "x"], "strict_pass": [1, 0], "routed": [1, 1]}}}
    with pytest.raises(ValueError, match="other scenarios"):
        compact_episodes(other)


def test_gains_pair_agents_over_scenarios_and_draws():
    record = {
        "da0": {"ref": {"scenario_id": ["x", "y", "x", "y"], "draw": [0, 0, 1, 1], "strict_pass": [0, 1, 0, 1],
                        "routed": [1, 1, 1, 1]}},
        "da1": {"ref": {"scenario_id": ["x", "y", "x", "y"], "draw": [0, 0, 1, 1], "strict_pass": [1, 1, 1, 0],
                        "routed": [1, 1, 1, 1]}},
    }  # fmt: skip
    mean, low, high = gains(compact_episodes(record))["da1-da0"]["ref"]
    assert mean == pytest.approx(0.25)  # x: +1, +1; y: 0, -1
    assert low == pytest.approx(-0.5) and high == pytest.approx(1.0)  # scenario means +1 and -0.5, resampled whole


def test_a_bad_set_of_draws_is_refused():
    for bad in ([], [1, 1], [-1], [16]):
        with pytest.raises(ValueError, match="draws must be distinct indices in 0..15"):
            check_draws(bad)
    assert check_draws(range(16)) == list(range(16))


def test_workers_parts_merge_with_their_episodes(played):
    report, _ = played
    first = HeldoutReport(agents={"da0": report.agents["da0"]}, episodes={"da0": report.episodes["da0"]})
    second = HeldoutReport(
        agents={"final": report.agents["final"]},
        ceiling=report.ceiling,
        episodes={"final": report.episodes["final"], EXPERT: report.episodes[EXPERT]},
    )
    merged = merge([first, second], ["da0", "final"], 1.0)
    assert merged.episodes == {k: v for k, v in report.episodes.items() if k != "twin"}
    assert list(merged.episodes) == ["da0", "final", EXPERT]
