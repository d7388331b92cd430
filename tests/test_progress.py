"""Progress of long work: a meter that logs a throttled line with share, rate and ETA; the trainers' callback (SFT
loss, GRPO reward); held-out play counting the episodes it planned; lines from worker processes; and the
pipeline's side: the terminal line, Dagster's log, the heartbeat, the run's estimate at the start and its critical
path at the end."""

from __future__ import annotations

import io
import json
import logging
import multiprocessing
import re
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch

from pipelines.cli import critical_line, run_timing
from sparring.progress import INTERVAL_ENV, LOGGER, ProgressMeter, format_duration, forward_to, relay_from
from stagekit.progress import (
    critical_path,
    estimate_run,
    run_estimate,
    scheduled_path,
    stage_progress,
    upstream_closure,
)
from stagekit.stages import Stage

torch.set_num_threads(1)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def lines(caplog):
    """The progress lines logged while the test runs, every update shown (no throttle)."""
    caplog.set_level(logging.INFO, logger=LOGGER.name)
    return lambda: [r.getMessage() for r in caplog.records if r.name == LOGGER.name]


def counts(lines: list[str], label: str) -> list[tuple[int, int]]:
    pattern = re.compile(re.escape(label) + r": ([\d,]+)/([\d,]+) ")
    found = [pattern.match(line) for line in lines]
    return [(int(m[1].replace(",", "")), int(m[2].replace(",", ""))) for m in found if m]


def test_a_meter_logs_at_most_once_an_interval_with_share_rate_and_eta(lines):
    clock = Clock()
    meter = ProgressMeter("SFT demos", 600, interval=30, clock=clock)
    clock.now = 10
    assert meter.update(20, "loss 2.5") is None  # within the first interval: quiet
    clock.now = 60
    line = meter.update(120, "loss 2.31")
    assert line == "SFT demos: 120/600 steps (20%), loss 2.31, 2 steps/s, ETA 4m00s"
    clock.now = 80
    assert meter.update(160) is None  # 20 s after the last line
    clock.now = 300
    assert meter.update(600).startswith("SFT demos: 600/600 steps (100%)")
    assert meter.finish("loss 1.2") == "SFT demos: 600/600 steps, loss 1.2, done in 5m00s"
    assert lines() == [line, lines()[1], "SFT demos: 600/600 steps, loss 1.2, done in 5m00s"]


def test_a_short_task_stays_silent_and_a_slow_one_shows_seconds_per_unit(lines):
    clock = Clock()
    quiet = ProgressMeter("quick", 10, interval=30, clock=clock)
    clock.now = 5
    quiet.update(10)
    assert quiet.finish() is None and lines() == []
    slow = ProgressMeter("GRPO agent_reward", 30, interval=30, clock=clock)
    clock.now = 125  # 2 steps in 120 s
    assert slow.update(2) == "GRPO agent_reward: 2/30 steps (7%), 60 s per step, ETA 28m00s"
    assert [format_duration(s) for s in (42, 545, 3720)] == ["42s", "9m05s", "1h02m"]


def test_sft_shows_every_step_with_its_loss(lines, tok, tmp_path, monkeypatch):
    from sparring.data.synthetic import generate_utterances
    from sparring.lm.models import build_model
    from sparring.settings import ModelSpec, SFTSettings
    from sparring.train.demos import intent_examples
    from sparring.train.sft import train_sft

    monkeypatch.setenv(INTERVAL_ENV, "0")
    frame = generate_utterances(1, 0)
    convs = intent_examples(frame["text"].to_list()[:32], frame["intent"].to_list()[:32])
    spec = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    settings = SFTSettings(max_steps=4, batch_size=8, warmup_steps=1, logging_steps=1, max_length=64)
    train_sft(build_model(spec, tok, seed=0), tok, convs, settings, tmp_path / "intent", seed=0)
    shown = lines()
    assert counts(shown, "SFT intent") == [(1, 4), (2, 4), (3, 4), (4, 4), (4, 4)]  # each step, then the close
    assert "ETA" in shown[0] and all("loss" in line for line in shown[1:])  # logged from the first step's end
    assert re.search(r", done in \d+s$", shown[-1])


def test_scoring_a_pool_counts_its_utterances(lines, tok, monkeypatch):
    from sparring.data.synthetic import generate_utterances
    from sparring.lm.models import build_model
    from sparring.settings import ModelSpec
    from sparring.train.peer_expectation import routing_prompts, score_intents

    monkeypatch.setenv(INTERVAL_ENV, "0")
    texts = generate_utterances(1, 0)["text"].to_list()[:10]
    spec = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    model = build_model(spec, tok, seed=0)
    prompts = routing_prompts(model, tok, texts)
    score_intents(model, tok, prompts, ["card_arrival"], batch_size=4, progress_label="teacher t")
    shown = lines()
    assert counts(shown, "teacher t") == [(4, 10), (8, 10), (10, 10), (10, 10)]  # each batch, then the close
    assert shown[-1].startswith("teacher t: 10/10 utterances, done in")


def test_grpo_shows_every_step_with_its_reward(lines, tok, heldout, monkeypatch):
    from sparring.agents.scripted import CooperativeCustomer
    from sparring.judge.rewards import Judge
    from sparring.lm.models import build_model
    from sparring.settings import GRPOSettings, ModelSpec
    from sparring.train.grpo import train_side
    from sparring.train.world_reward import ConstantStyle

    monkeypatch.setenv(INTERVAL_ENV, "0")
    spec = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    settings = GRPOSettings(
        num_generations=2, scenarios_per_step=2, max_steps=3, max_new_tokens=4, max_turns=1, max_calls_per_turn=1
    )
    model = build_model(spec, tok, seed=0)
    train_side(model, tok, "agent", CooperativeCustomer(), heldout[:4], Judge(ConstantStyle()), settings, seed=0)
    shown = [line for line in lines() if line.startswith("GRPO agent_reward:")]  # train_side's scratch: no folder
    assert counts(shown, "GRPO agent_reward") == [(1, 3), (2, 3), (3, 3), (3, 3)]
    assert all("reward" in line for line in shown[1:])  # TRL logs a step's mean reward after its first step


def test_held_out_play_counts_the_episodes_it_planned_per_agent_and_opponent(
    lines, tok, heldout, tmp_path, monkeypatch
):
    from sparring.agents.scripted import ExpertAgent
    from sparring.evaluate.heldout import evaluate_heldout
    from sparring.judge.rewards import Judge
    from sparring.lm.checkpoints import save_checkpoint
    from sparring.lm.models import build_model
    from sparring.settings import CoevolutionSettings, GRPOSettings, ModelSpec
    from sparring.train.world_reward import ConstantStyle

    monkeypatch.setenv(INTERVAL_ENV, "0")
    spec = ModelSpec(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    save_checkpoint(build_model(spec, tok), tok, tmp_path / "da0")
    save_checkpoint(build_model(spec, tok, seed=1), tok, tmp_path / "sim")
    settings = CoevolutionSettings(
        agent_grpo=GRPOSettings(max_turns=2, max_new_tokens=4), adversary_grpo=GRPOSettings(max_new_tokens=4)
    )
    report = evaluate_heldout(
        {"da0": tmp_path / "da0"}, tmp_path / "sim", [tmp_path / "sim"] * 2, heldout[:4], Judge(ConstantStyle()),
        settings, expert=ExpertAgent(refs="described"), draws=[0, 1],
    )  # fmt: skip
    shown = lines()
    seen = counts(shown, "held-out play")
    played = sum(phase.get("episodes", 0) for phase in report.phases.values())
    # Rising, and what was planned is what was played, per player: coop and coopsim once (greedy) 4 + 4, camo and
    # ref two draws 8 + 8, the pool (3 generations) 2 draws x the 2 scenarios not dealt to generation 0 (ref's).
    assert [done for done, _ in seen] == sorted(done for done, _ in seen) and seen[0][0] < seen[-1][0]
    assert {total for _, total in seen} == {played} == {2 * (4 + 4 + 8 + 8 + 4)} and seen[-1][0] == played
    assert "da0 vs coop (4)" in shown[0] and any("expert vs camo, draw 1 (4)" in line for line in shown)
    assert any("vs advpool, draw 0 (2)" in line for line in shown)


def test_lines_logged_in_worker_processes_reach_this_processs_handlers(lines):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    with (
        relay_from(queue),
        ProcessPoolExecutor(1, mp_context=context, initializer=forward_to, initargs=(queue,)) as pool,
    ):
        pool.submit(LOGGER.info, "held-out play, process 1/2: 4/8 episodes (50%)").result()
    assert lines() == ["held-out play, process 1/2: 4/8 episodes (50%)"]


# ---- the pipeline's side -----------------------------------------------------------------------------------


class DagsterLog:
    def __init__(self) -> None:
        self.infos: list[str] = []

    def info(self, message: str) -> None:
        self.infos.append(message)


def test_a_stage_shows_its_progress_on_the_terminal_in_its_log_file_and_in_dagsters_log(monkeypatch):
    terminal, log_file, dagster, level = io.StringIO(), io.StringIO(), DagsterLog(), LOGGER.level
    monkeypatch.setattr("sys.stderr", terminal)
    with stage_progress("agent_sft", dagster, echo=True, previous=600.0, heartbeat=0.2):
        monkeypatch.setattr("sys.stderr", log_file)  # as trainer_output redirects the stage's own output
        LOGGER.info("SFT demos: 1/4 steps (25%)")
        time.sleep(0.5)  # quiet: the heartbeat speaks
    shown = terminal.getvalue().splitlines()
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] stage agent_sft: SFT demos: 1/4 steps \(25%\)", shown[0])
    assert "stage agent_sft: running for 0s (its last run took 10m00s: about 10m00s left)" in shown[1]
    assert "SFT demos: 1/4 steps (25%)" in log_file.getvalue() and "stage agent_sft" not in log_file.getvalue()
    assert dagster.infos[0] == "SFT demos: 1/4 steps (25%)" and dagster.infos[1].startswith("running for")
    assert not LOGGER.handlers and LOGGER.level == level and LOGGER.propagate  # nothing left behind


def test_verbose_leaves_the_terminal_to_dagsters_console_log(monkeypatch):
    terminal, dagster = io.StringIO(), DagsterLog()
    monkeypatch.setattr("sys.stderr", terminal)
    with stage_progress("evaluate", dagster, echo=False, heartbeat=60):
        LOGGER.info("held-out play: 4/8 episodes (50%)")
    assert terminal.getvalue() == "" and dagster.infos == ["held-out play: 4/8 episodes (50%)"]


def stage(name: str, *upstream: str, priority: int = 0) -> Stage:
    return Stage(name, "", (), (), (), upstream=upstream, priority=priority)


def test_the_run_estimate_follows_the_executors_order_and_says_what_it_lacks(tmp_path):
    graph = [
        stage("ingest"),
        stage("sim", "ingest", priority=1),
        stage("agent", "ingest"),
        stage("eval", "sim", "agent"),
    ]
    seconds = {"ingest": 10, "sim": 100, "agent": 60, "eval": 30}
    assert estimate_run(graph, seconds, 1) == 200  # one at a time: the sum
    assert estimate_run(graph, seconds, 2) == 140  # sim beside agent: 10 + 100 + 30
    assert run_estimate(tmp_path, graph, "default", 2) is None  # no earlier run
    (tmp_path / "reports" / "timings").mkdir(parents=True)
    for name, wall in seconds.items():
        report = {"stage": name, "profile": "default", "wall_seconds": wall}
        (tmp_path / "reports" / "timings" / f"{name}.json").write_text(json.dumps(report))
    assert run_estimate(tmp_path, graph, "default", 2).startswith("about 2m20s")
    assert run_estimate(tmp_path, graph, "quick", 2) is None  # another profile's times say nothing
    (tmp_path / "reports" / "timings" / "eval.json").unlink()
    assert run_estimate(tmp_path, graph, "default", 2).startswith("at least 1m50s") and "yet for eval" in (
        run_estimate(tmp_path, graph, "default", 2)
    )


def test_the_critical_path_is_the_longest_chain_and_the_longer_branch_of_a_diamond_wins():
    upstream = {"ingest": (), "sim": ("ingest",), "agent": ("ingest",), "eval": ("sim", "agent"), "side": ("ingest",)}
    seconds = {"ingest": 10, "sim": 100, "agent": 60, "eval": 30, "side": 5}
    assert critical_path(upstream, seconds) == (["ingest", "sim", "eval"], 140)
    assert critical_path(upstream, {**seconds, "agent": 120}) == (["ingest", "agent", "eval"], 160)
    assert critical_path(upstream, {**seconds, "side": 200}) == (["ingest", "side"], 210)  # a dead end can set it
    # a chain of many short stages beats one long stage that waits for nothing
    chain = {"a": (), "b": ("a",), "c": ("b",), "solo": ()}
    assert critical_path(chain, {"a": 4, "b": 4, "c": 4, "solo": 10}) == (["a", "b", "c"], 12)
    without_sim = {k: v for k, v in seconds.items() if k != "sim"}  # a stage without a time is left out
    assert critical_path(upstream, without_sim) == (["ingest", "agent", "eval"], 100)
    assert critical_path(upstream, {}) == ([], 0.0)
    assert upstream_closure(upstream, "eval") == {"ingest", "sim", "agent"}
    assert upstream_closure(upstream, "ingest") == set()


def test_the_scheduled_critical_path_counts_the_wait_for_a_free_slot():
    # Two slots: sim (priority 1) and agent take them after ingest; members, ready at 10, waits until agent ends at
    # 70, then runs 100 s and sets the end (170), though its summed chain (110) is not the longest (ingest, sim,
    # eval: 140). The longest-chain rule named that one and understated the run by the wait.
    graph = [stage("ingest"), stage("sim", "ingest", priority=1), stage("agent", "ingest"), stage("members", "ingest"),
             stage("eval", "sim", "agent")]  # fmt: skip
    seconds = {"ingest": 10, "sim": 100, "agent": 60, "members": 100, "eval": 30}
    path = scheduled_path(graph, seconds, 2)
    assert path == (["ingest", "agent", "members"], ["members"], 170.0)
    assert critical_path({s.name: s.upstream for s in graph}, seconds).seconds == 140
    assert scheduled_path(graph, seconds, 5) == (["ingest", "sim", "eval"], [], 140.0)  # enough slots: no wait
    assert scheduled_path([], {}, 2) == ([], [], 0.0)


def test_the_runs_last_line_names_its_critical_path_from_the_stages_reports(tmp_path):
    graph = [stage("ingest"), stage("sim", "ingest"), stage("agent", "ingest"), stage("eval", "sim", "agent")]
    (tmp_path / "reports" / "timings").mkdir(parents=True)
    for name, wall in {"ingest": 10, "sim": 50, "agent": 60, "eval": 30}.items():
        report = {"stage": name, "profile": "default", "wall_seconds": wall}
        (tmp_path / "reports" / "timings" / f"{name}.json").write_text(json.dumps(report))
    line = critical_line(run_timing(tmp_path, graph, "default", 123.45, parallel=2))
    assert line == "sparring run: critical path ingest → agent → eval: 100.0 s of the run's 123.5 s"
    one_slot = critical_line(run_timing(tmp_path, graph, "default", 160.0, parallel=1))  # agent waited for sim's slot
    assert one_slot == (
        "sparring run: critical path ingest → sim ⇢ agent → eval: 150.0 s of the run's 160.0 s, slot waits before agent"
    )
