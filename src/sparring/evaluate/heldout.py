"""Held-out evaluation of agent checkpoints (DA0, every cycle's agent, the final one) for reports/metrics.json.

Every agent plays greedy, as deployed, the same held-out scenarios with the same seed against each opponent:

- ``_coop``: the cooperative simulator (an LMPolicy over the simulator checkpoint, every persona cooperative,
  greedy unless ``coop_temperature`` says otherwise) continuing the scenario's own held-out utterance
  (``coop_opening``), and ``_coopsim``: the same simulator writing its opening too, where its slips (a problem
  of another intent) count against the agent,
- ``_camo``: the scripted camouflaging customer,
- ``_advpool``: the pool of adversary generations, scenarios dealt round-robin to the generations (the
  simulator stands in when no adversary has trained yet), with the judge's adversary reward parts
  (``adv_success_advpool``, ``adv_misroute_advpool``, ``adv_faithfulness_advpool``, ``adv_realism_advpool``,
  ``adv_reward_advpool``).

:func:`evaluate_heldout` adds what the report reads (:mod:`sparring.evaluate.crossplay`): the goal-knowing
expert's figures as the ceiling, each agent's share of it and its failure kinds; cross-play of every agent
against each adversary generation on its own (``adv_<g>``), beside ``coop`` and ``camo``, on the first
``cross_play_scenarios`` scenarios; and pass^k over ``pass_k`` sampled runs. Nothing is played twice: a
cross-play cell reuses the pool's episodes of its generation and plays only the rest. Names follow
../shared/METRICS.md. An agent folder that appears under several names (a cycle in which the adversary trained
keeps the previous agent) is played once. Beside the figures, each agent's (and the expert's) per-episode outcomes
against the four opponents (:func:`episode_record`; :mod:`sparring.evaluate.episodes` keeps them in evaluate's
report), for paired comparisons of agents on the same scenarios (benchmarks/coevolution_acceptance.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sparring.agents.scripted import CamouflagingCustomer
from sparring.evaluate.crossplay import (
    cross_play_cell,
    cross_play_matrix,
    failure_rates,
    pass_hat_metrics,
    share_of_ceiling,
)
from sparring.judge import Scorer
from sparring.lm.policies import Policy
from sparring.progress import ProgressMeter
from sparring.rollout import Episode, episode_metrics, routed_correctly, run_episodes
from sparring.seeds import derive_seed
from sparring.settings import CoevolutionSettings
from sparring.timing import Phases
from sparring.train.play import GameModels, adversary_parts, against_pool, cooperative_customer
from sparring.world.scenarios import Scenario, as_cooperative

EXPERT = "expert"  # the ceiling's row in cross-play
MAIN_OPPONENTS = 4  # coop, coopsim, camo and the pool: every player meets them on every scenario
Tally = Callable[[str, int], None]  # (opponent, episodes just played): feeds the progress meter


def episode_record(episodes: Sequence[Episode]) -> dict[str, list]:
    """Episodes' outcomes in play order: ``scenario_id`` and, per :data:`~sparring.evaluate.episodes.OUTCOMES`, 0
    or 1 (``routed``: the resolving tool was called, as ``routing_acc`` counts)."""
    return {
        "scenario_id": [ep.scenario.scenario_id for ep in episodes],
        "strict_pass": [int(bool(ep.outcome.strict_pass)) for ep in episodes],
        "routed": [int(routed_correctly(ep)) for ep in episodes],
    }


def heldout_seed(seed: int) -> int:
    """The rollout seed of every held-out evaluation under the run's ``seed``: agents compared on one draw."""
    return derive_seed(seed, "heldout")


@dataclass
class HeldoutReport:
    """Everything `evaluate` measured: per-agent metrics, the expert's (``ceiling``), cross-play, and the
    adversaries' held-out episodes per generation (1-based), for strategy discovery."""

    agents: dict[str, dict[str, float]]
    ceiling: dict[str, float] = field(default_factory=dict)
    cross_play: dict[str, list] = field(default_factory=dict)
    adversary_episodes: dict[int, list[Episode]] = field(default_factory=dict)
    phases: dict[str, dict[str, float]] = field(default_factory=dict)  # where the time went (sparring.timing)
    episodes: dict[str, dict[str, dict[str, list]]] = field(default_factory=dict)  # agent -> opponent -> outcomes
    worker_phases: list[dict[str, dict[str, float]]] = field(default_factory=list)  # each process's, when split


@dataclass
class _Opponents:
    """The frozen customers every agent meets, built once."""

    coops: dict[str, Policy]
    camo: Policy
    pool: list[Policy]
    generations: int  # adversary generations in the pool (0: the simulator stands in)


def evaluate_heldout(
    agents: Mapping[str, str | Path],
    simulator_dir: str | Path,
    adversary_dirs: Sequence[str | Path],
    scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: CoevolutionSettings,
    *,
    seed: int = 0,
    expert: Policy | None = None,
    cross_play_scenarios: int = 0,
    pass_k: int = 0,
    pass_k_scenarios: int = 0,
    main_only: Collection[str] = (),
    progress_label: str = "held-out play",
) -> HeldoutReport:
    """``agents`` (name -> checkpoint) against coop (``coop_opening``), coopsim (the simulator's own opening), camo
    and the adversary pool, every episode shaped as co-evolution's (``settings``: the agent gym's turn limits and
    message length, the adversary gym's for customers); the simulator plays ``_coop`` and ``_coopsim`` at
    ``coop_temperature`` (0: greedy), adversaries at their gym's temperature. Plus (each when asked) the
    ``expert``'s figures as the ceiling with every agent's
    share of it, cross-play on the first ``cross_play_scenarios`` scenarios, and pass^1..pass^k over ``pass_k``
    runs sampled at the agent gym's temperature on the first ``pass_k_scenarios``, against coop and the pool.
    Agents named in ``main_only`` play the four opponents alone (no cross-play, no pass^k): a checkpoint that
    another agent name also points to plays everything once, and the ``main_only`` name reports the four
    opponents' figures of it. Progress (episodes played of those planned, per agent
    and opponent) goes to :mod:`sparring.progress` as ``progress_label``."""
    if not scenarios:
        raise ValueError("no held-out scenarios to evaluate on")
    models, a, phases = GameModels(settings), settings.agent_grpo, Phases()
    turns = {"max_turns": a.max_turns, "max_calls_per_turn": a.max_calls_per_turn, "seed": heldout_seed(seed)}
    with phases.time("load_opponents"):
        simulator = models.customer(simulator_dir, settings.coop_temperature)
        opponents = _Opponents(
            coops={"_coop": cooperative_customer(simulator, settings.coop_opening), "_coopsim": simulator},
            camo=CamouflagingCustomer(seed=seed),
            pool=[models.adversary(d) for d in adversary_dirs or [simulator_dir]],
            generations=len(adversary_dirs),
        )
    scenarios, k_cross = list(scenarios), min(cross_play_scenarios, len(scenarios))
    players, names = _players(agents, models, expert)
    extras = {key for name, key in names.items() if name not in main_only} | {EXPERT}  # cross-play, pass^k
    done: dict[str, dict[str, float]] = {}
    main: dict[str, dict[str, float]] = {}  # the four opponents' figures alone, for a main_only name
    records: dict[str, dict[str, dict[str, list]]] = {}
    cells: dict[str, dict[str, dict[str, float]]] = {}
    report = HeldoutReport(agents={})
    n_pass_k = _pass_k_episodes(pass_k, min(pass_k_scenarios, len(scenarios)))
    per_extra = _fresh_cross_play(k_cross, opponents.generations) + n_pass_k
    planned = len(players) * MAIN_OPPONENTS * len(scenarios) + per_extra * len(extras & set(players))
    meter = ProgressMeter(progress_label, planned, "episodes")
    for key, player in players.items():
        tally = _tally(meter, next((name for name, k in names.items() if k == key), key))
        with phases.time("episodes") as counts:  # coop, coopsim, camo, the pool; the agent's load the first time
            metrics, played = _play(player(True), opponents, scenarios, judge, turns, tally)
            counts["episodes"] = sum(len(eps) for eps in played.values())
        records[key] = {suffix.lstrip("_"): episode_record(eps) for suffix, eps in played.items()}
        main[key] = dict(metrics)
        if k_cross and key in extras:
            with phases.time("cross_play") as counts:
                agent, prefix = player(True), scenarios[:k_cross]
                cells[key] = _cross_play(agent, opponents, prefix, played, turns, report, key, counts)
                tally("each adversary generation alone", counts.get("episodes", 0))
        if pass_k >= 2 and pass_k_scenarios and key in extras:
            with phases.time("pass_k") as counts:
                picked = scenarios[:pass_k_scenarios]
                metrics.update(_pass_hat(player(False), opponents, picked, pass_k, turns, seed))
                counts["episodes"] = 2 * pass_k * len(picked)  # each run: coop and the pool, every scenario
                tally(f"coop and the pool, pass^{pass_k}", counts["episodes"])
        done[key] = metrics
    meter.finish()
    report.phases = phases.as_dict()
    report.ceiling = done.get(EXPERT, {})
    for name, key in names.items():
        figures = main[key] if name in main_only else done[key]
        report.agents[name] = {**figures, **share_of_ceiling(figures, report.ceiling)}
        report.episodes[name] = records[key]
    if EXPERT in records:
        report.episodes[EXPERT] = records[EXPERT]
    if cells:
        rows = {name: cells[key] for name, key in names.items() if key in cells and name not in main_only}
        if EXPERT in cells:
            rows[EXPERT] = cells[EXPERT]
        report.cross_play = cross_play_matrix(rows)
    return report


def _players(
    agents: Mapping[str, str | Path], models: GameModels, expert: Policy | None
) -> tuple[dict[str, Callable[[bool], Policy]], dict[str, str]]:
    """Each agent folder once (key: its resolved path; the expert as :data:`EXPERT`) as ``(greedy?) -> policy``,
    and every agent name's key."""
    players: dict[str, Callable[[bool], Policy]] = {}
    names: dict[str, str] = {}
    for name, folder in agents.items():
        key = str(Path(folder).resolve())
        names[name] = key
        if key not in players:
            players[key] = lambda greedy, f=folder: models.agent_policy_of(f, greedy)
    if expert is not None:
        players[EXPERT] = lambda greedy: expert
    return players, names


def _tally(meter: ProgressMeter, player: str) -> Tally:
    return lambda opponent, n: meter.advance(n, f"{player} vs {opponent} ({n})") if n else None


def _pass_k_episodes(pass_k: int, pass_k_scenarios: int) -> int:
    """Episodes one player's pass^k plays: each run against coop and the pool on every picked scenario."""
    return 2 * pass_k * pass_k_scenarios if pass_k >= 2 else 0


def _fresh_cross_play(k_cross: int, generations: int) -> int:
    """Episodes one player's cross-play plays afresh: each generation's prefix scenarios outside its pool share
    (the pool deals scenario i to generation i mod n)."""
    if not generations:
        return 0
    return sum(1 for g in range(generations) for i in range(k_cross) if i % generations != g)


def _play(
    agent: Policy,
    opponents: _Opponents,
    scenarios: Sequence[Scenario],
    judge: Scorer,
    turns: dict[str, int],
    tally: Tally | None = None,
) -> tuple[dict[str, float], dict[str, list[Episode]]]:
    metrics: dict[str, float] = {}
    played: dict[str, list[Episode]] = {}
    tally = tally or (lambda opponent, n: None)
    for suffix, coop in opponents.coops.items():
        played[suffix] = run_episodes(as_cooperative(scenarios), agent, coop, **turns)
        tally(suffix.lstrip("_"), len(played[suffix]))
    played["_camo"] = run_episodes(scenarios, agent, opponents.camo, **turns)
    tally("camo", len(played["_camo"]))
    played["_advpool"] = against_pool(list(scenarios), agent, opponents.pool, **turns)
    tally("advpool", len(played["_advpool"]))
    for suffix, episodes in played.items():
        metrics.update(episode_metrics(episodes, suffix))
        metrics.update(failure_rates(episodes, suffix))
    scores = judge.score(played["_advpool"])
    for episode, score in zip(played["_advpool"], scores, strict=True):
        episode.rewards = score  # strategy discovery reads who won
    metrics.update(adversary_parts(scores, "_advpool"))
    return metrics, played


def _cross_play(
    agent: Policy,
    opponents: _Opponents,
    scenarios: Sequence[Scenario],
    played: dict[str, list[Episode]],
    turns: dict[str, int],
    report: HeldoutReport,
    key: str,
    counts: dict[str, int] | None = None,
) -> dict[str, dict[str, float]]:
    """One agent's cross-play row on ``scenarios`` (a prefix of the held-out list): coop and camo from the episodes
    already played; each adversary generation from its share of the pool plus the rest of ``scenarios``.
    ``counts["episodes"]``: how many it played afresh."""
    k = len(scenarios)
    row = {"coop": cross_play_cell(played["_coop"][:k]), "camo": cross_play_cell(played["_camo"][:k])}
    if not opponents.generations:
        return row
    n = len(opponents.pool)
    # against_pool returns generation g's scenarios (indices g, g+n, ...) as one block, oldest generation first
    offsets = [0]
    for g in range(n):
        offsets.append(offsets[-1] + len(range(g, len(played["_coop"]), n)))
    for g, adversary in enumerate(opponents.pool):
        dealt = played["_advpool"][offsets[g] : offsets[g + 1]]
        have = {ep.scenario.scenario_id: ep for ep in dealt}
        rest = [s for s in scenarios if s.scenario_id not in have]
        fresh = dict(zip([s.scenario_id for s in rest], run_episodes(rest, agent, adversary, **turns), strict=True))
        if counts is not None:
            counts["episodes"] = counts.get("episodes", 0) + len(rest)
        episodes = [have.get(s.scenario_id) or fresh[s.scenario_id] for s in scenarios]
        row[f"adv_{g + 1}"] = cross_play_cell(episodes)
        if key != EXPERT:
            report.adversary_episodes.setdefault(g + 1, []).extend(episodes)
    return row


def _pass_hat(
    agent: Policy,
    opponents: _Opponents,
    scenarios: Sequence[Scenario],
    runs: int,
    turns: dict[str, int],
    seed: int,
) -> dict[str, float]:
    """pass^1..pass^runs of the sampling ``agent`` against coop and the pool, each run its own draw."""
    coop, pooled = [], []
    for r in range(runs):
        draw = {**turns, "seed": derive_seed(seed, "pass_k", r)}
        coop.append(run_episodes(as_cooperative(scenarios), agent, opponents.coops["_coop"], **draw))
        by_id = {ep.scenario.scenario_id: ep for ep in against_pool(list(scenarios), agent, opponents.pool, **draw)}
        pooled.append([by_id[s.scenario_id] for s in scenarios])
    return {**pass_hat_metrics(coop, "_coop"), **pass_hat_metrics(pooled, "_advpool")}
