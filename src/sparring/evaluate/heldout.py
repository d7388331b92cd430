"""Held-out evaluation of agent checkpoints (DA0, every cycle's agent, the final one) for reports/metrics.json.

Every agent plays greedy, as deployed, the same held-out scenarios against each opponent:

- ``_coop``: the cooperative simulator (an LMPolicy over the simulator checkpoint, every persona cooperative,
  greedy unless ``coop_temperature`` says otherwise) continuing the scenario's own held-out utterance
  (``coop_opening``), and ``_coopsim``: the same simulator writing its opening too, where its slips (a problem
  of another intent) count against the agent,
- ``_camo``: the scripted camouflaging customer (its phrasing drawn per episode),
- ``_ref``: the frozen reference opponent, adversary generation 0 (the SFT simulator as every adversary starts,
  sampled, each scenario its own persona): no compared agent trained against it,
- ``_advpool``: the pool of every adversary generation, generation 0 included (../shared/METRICS.md), scenario i
  dealt to generation i mod G, with the judge's adversary reward parts (``adv_success_advpool``, ...) and each
  generation's own figure (``strict_pass_advpool_by_generation``); generation 0's share is ``_ref``'s episodes.

**Draws.** A sampled opponent plays each scenario once per draw in ``draws`` (indices into :data:`DRAW_SET`);
draw j's rollout seed is the same for every agent, and the customers draw per episode
(:class:`~sparring.lm.policies.LMPolicy`'s ``episode_draws``), so agent A's and agent B's draw j of a scenario meet
the same random numbers (common random numbers) and paired differences are over (scenario, draw)
(:mod:`sparring.evaluate.intervals`). A greedy opponent plays draw ``draws[0]`` only. pass^k (τ-bench: the agent
greedy, the customer sampled) comes from the draws against ``_ref`` and the pool.

Beside the figures: the goal-knowing expert's as the ceiling with each agent's share of it and its failure kinds;
cross-play (every agent against each generation's share of the pool, with intervals over scenarios and draws);
and each agent's per-episode outcomes (:func:`episode_record`) for paired comparisons. Nothing is played twice: an
agent folder under several names plays once. Names follow ../shared/METRICS.md.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

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
from sparring.metrics import episode_metrics, routed_correctly
from sparring.progress import ProgressMeter
from sparring.rollout import Episode, run_episodes
from sparring.seeds import DRAW_SET, derive_seed
from sparring.settings import CoevolutionSettings, Opponent
from sparring.timing import Phases
from sparring.train.play import GameModels, adversary_parts, cooperative_customer
from sparring.world.scenarios import Scenario, as_cooperative

EXPERT = "expert"  # the ceiling's row in cross-play
OPPONENTS: tuple[str, ...] = get_args(Opponent)  # in play order: the pool reuses ref's episodes
Tally = Callable[[str, int], None]  # (opponent, episodes just played): feeds the progress meter


def episode_record(episodes: Sequence[Episode], draws: Sequence[int]) -> dict[str, list]:
    """Episodes' outcomes in play order: ``scenario_id``, ``draw`` and, per
    :data:`~sparring.evaluate.episodes.OUTCOMES`, 0 or 1 (``routed``: the resolving tool was called)."""
    return {
        "scenario_id": [ep.scenario.scenario_id for ep in episodes],
        "draw": list(draws),
        "strict_pass": [int(bool(ep.outcome.strict_pass)) for ep in episodes],
        "routed": [int(routed_correctly(ep)) for ep in episodes],
    }


def heldout_seed(seed: int) -> int:
    """The rollout seed of draw 0 of every held-out evaluation under the run's ``seed``."""
    return derive_seed(seed, "heldout")


def draw_seed(seed: int, draw: int) -> int:
    """Draw ``draw``'s rollout seed: the same for every agent (draw 0 is :func:`heldout_seed`, as before draws)."""
    return heldout_seed(seed) if draw == 0 else derive_seed(seed, "heldout", draw)


def check_draws(draws: Sequence[int]) -> list[int]:
    """``draws`` as a list, refused unless distinct indices of :data:`DRAW_SET`."""
    draws = list(draws)
    if not draws or len(set(draws)) != len(draws) or not all(0 <= d < DRAW_SET for d in draws):
        raise ValueError(f"draws must be distinct indices in 0..{DRAW_SET - 1}, got {draws}")
    return draws


@dataclass
class HeldoutReport:
    """Everything `evaluate` measured: per-agent metrics, the expert's (``ceiling``), cross-play, and the trained
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

    coops: dict[str, Policy]  # coop, coopsim
    coop_sampled: bool  # coop_temperature > 0: they play every draw too
    camo: Policy
    pool: list[Policy]  # generation 0 (the simulator as adversaries start) first, then each trained one

    def draws_of(self, opponent: str, draws: list[int]) -> list[int]:
        return draws if opponent not in self.coops or self.coop_sampled else draws[:1]


def evaluate_heldout(
    agents: Mapping[str, str | Path],
    simulator_dir: str | Path,
    adversary_dirs: Sequence[str | Path],
    scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: CoevolutionSettings,
    *,
    seed: int = 0,
    draws: Sequence[int] = (0,),
    expert: Policy | None = None,
    opponents: Collection[str] = OPPONENTS,
    expert_draws: int | None = None,
    episode_draws: bool = True,
    progress_label: str = "held-out play",
) -> HeldoutReport:
    """``agents`` (name -> checkpoint) against ``opponents`` (module docstring) under ``draws``, every episode shaped
    as co-evolution's (``settings``: the agent gym's turn limits and message length, the adversary gym's for
    customers); plus, with an ``expert``, its figures as the ceiling (over the first ``expert_draws`` of ``draws``;
    None: all) and every agent's share of it. Progress
    (episodes played of those planned, per agent and opponent) goes to :mod:`sparring.progress`.
    ``episode_draws=False`` lets the customers share one random stream per batch, as before draws were per episode
    (benchmarks/yardstick.py measures what common random numbers per episode save).

    Over 60 lines: each player's play, then the report built from them, top to bottom; a third is its signature."""
    if not scenarios:
        raise ValueError("no held-out scenarios to evaluate on")
    if unknown := set(opponents) - set(OPPONENTS):
        raise ValueError(f"unknown opponents {sorted(unknown)}; known: {OPPONENTS}")
    draws = check_draws(draws)
    models, a = GameModels(settings, episode_draws=episode_draws), settings.agent_grpo
    turns = {"max_turns": a.max_turns, "max_calls_per_turn": a.max_calls_per_turn}
    phases = Phases()
    with phases.time("load_opponents"):
        simulator = models.customer(simulator_dir, settings.coop_temperature)
        opp = _Opponents(
            coops={"coop": cooperative_customer(simulator, settings.coop_opening), "coopsim": simulator},
            coop_sampled=settings.coop_temperature > 0,
            camo=CamouflagingCustomer(seed=seed),
            pool=[models.adversary(d) for d in [simulator_dir, *adversary_dirs]],
        )
    scenarios, wanted = list(scenarios), [o for o in OPPONENTS if o in opponents]
    players, names = _players(agents, models, expert)
    draws_of = {key: draws[:expert_draws] if key == EXPERT and expert_draws else draws for key in players}
    fresh = {key: sum(_fresh(o, len(scenarios), opp, ds, wanted) for o in wanted) for key, ds in draws_of.items()}
    meter = ProgressMeter(progress_label, sum(fresh.values()), "episodes")
    report, done, records, cells = HeldoutReport(agents={}), {}, {}, {}
    for key, player in players.items():
        tally = _tally(meter, next((name for name, k in names.items() if k == key), key))
        with phases.time("episodes") as counts:
            played = _play(player(), opp, scenarios, draws_of[key], wanted, seed, turns, tally)
            counts["episodes"] = fresh[key]
        split = _by_generation(played["advpool"][0], len(opp.pool), len(scenarios)) if "advpool" in played else {}
        done[key] = _figures(played, split, judge, len(scenarios))
        records[key] = {o: episode_record(eps, ds) for o, (eps, ds) in played.items()}
        cells[key] = _cross_play_row(played, split, seed)
        for g, eps in split.items() if key != EXPERT else ():
            if g:  # trained generations only: strategy discovery reads what adversaries learnt
                report.adversary_episodes.setdefault(g, []).extend(eps)
    meter.finish()
    report.phases = phases.as_dict()
    report.ceiling = done.get(EXPERT, {})
    for name, key in names.items():
        report.agents[name] = {**done[key], **share_of_ceiling(done[key], report.ceiling)}
        report.episodes[name] = records[key]
    if EXPERT in records:
        report.episodes[EXPERT] = records[EXPERT]
    rows = {name: cells[key] for name, key in names.items() if cells[key]}
    if cells.get(EXPERT):
        rows[EXPERT] = cells[EXPERT]
    if rows:
        report.cross_play = cross_play_matrix(rows)
    return report


def _players(
    agents: Mapping[str, str | Path], models: GameModels, expert: Policy | None
) -> tuple[dict[str, Callable[[], Policy]], dict[str, str]]:
    """Each agent folder once (key: its resolved path; the expert as :data:`EXPERT`) as a greedy policy maker,
    and every agent name's key."""
    players: dict[str, Callable[[], Policy]] = {}
    names: dict[str, str] = {}
    for name, folder in agents.items():
        key = str(Path(folder).resolve())
        names[name] = key
        if key not in players:
            players[key] = lambda f=folder: models.agent_policy_of(f, True)
    if expert is not None:
        players[EXPERT] = lambda: expert
    return players, names


def _tally(meter: ProgressMeter, player: str) -> Tally:
    return lambda opponent, n: meter.advance(n, f"{player} vs {opponent} ({n})") if n else None


def _fresh(opponent: str, n: int, opp: _Opponents, draws: list[int], wanted: list[str]) -> int:
    """Episodes one player plays afresh against ``opponent`` (the pool's generation-0 share is ``_ref``'s)."""
    k = len(opp.draws_of(opponent, draws))
    if opponent == "advpool" and "ref" in wanted:
        return k * sum(1 for i in range(n) if i % len(opp.pool))
    return k * n


def _play(
    agent: Policy,
    opp: _Opponents,
    scenarios: list[Scenario],
    draws: list[int],
    wanted: list[str],
    seed: int,
    turns: dict[str, int],
    tally: Tally,
) -> dict[str, tuple[list[Episode], list[int]]]:
    """{opponent: (episodes, their draws)}, draw by draw, each draw the scenarios in order."""
    played: dict[str, tuple[list[Episode], list[int]]] = {}
    for opponent in wanted:
        episodes, drawn = [], []
        mine = opp.draws_of(opponent, draws)
        for d in mine:
            play = {**turns, "seed": draw_seed(seed, d)}
            if opponent in opp.coops:
                eps = run_episodes(as_cooperative(scenarios), agent, opp.coops[opponent], **play)
            elif opponent == "camo":
                eps = run_episodes(scenarios, agent, opp.camo, **play)
            elif opponent == "ref":
                eps = run_episodes(scenarios, agent, opp.pool[0], **play)
            else:
                ref = played["ref"][0][len(episodes) : len(episodes) + len(scenarios)] if "ref" in played else None
                eps = _against_pool(scenarios, agent, opp.pool, play, ref)
            fresh = _fresh(opponent, len(scenarios), opp, [d], wanted)  # the pool's gen-0 share is ref's: not played
            tally(opponent if len(mine) == 1 else f"{opponent}, draw {d}", fresh)
            episodes += eps
            drawn += [d] * len(eps)
        played[opponent] = (episodes, drawn)
    return played


def _against_pool(
    scenarios: list[Scenario], agent: Policy, pool: list[Policy], play: dict, ref: list[Episode] | None
) -> list[Episode]:
    """One draw against the pool, in scenario order: scenario i dealt to generation i mod G; generation 0's share
    taken from ``ref`` (the same draw against it on every scenario) when given."""
    out: list[Episode | None] = [None] * len(scenarios)
    for g, adversary in enumerate(pool):
        index = list(range(g, len(scenarios), len(pool)))
        if g == 0 and ref is not None:
            eps = [ref[i] for i in index]
        else:
            eps = run_episodes([scenarios[i] for i in index], agent, adversary, **play) if index else []
        for i, ep in zip(index, eps, strict=True):
            out[i] = ep
    return out  # type: ignore[return-value]


def _by_generation(episodes: list[Episode], generations: int, n: int) -> dict[int, list[Episode]]:
    """The pool's episodes (draw-major, ``n`` scenarios a draw) by the generation each was dealt to."""
    out: dict[int, list[Episode]] = {g: [] for g in range(generations)}
    for j, ep in enumerate(episodes):
        out[(j % n) % generations].append(ep)
    return out


def _figures(
    played: dict[str, tuple[list[Episode], list[int]]], split: dict[int, list[Episode]], judge: Scorer, n: int
) -> dict[str, float]:
    """One player's metrics: METRICS.md's per opponent over every (scenario, draw), failure kinds, pass^k over the
    draws against the sampled LM opponents, and the pool's parts per generation and the judge's adversary parts."""
    metrics: dict[str, float] = {}
    for opponent, (episodes, drawn) in played.items():
        suffix = f"_{opponent}"
        metrics.update(episode_metrics(episodes, suffix))
        metrics.update(failure_rates(episodes, suffix))
        k = metrics[f"draws{suffix}"] = len(set(drawn))
        if opponent in ("ref", "advpool") and k >= 2:  # τ-bench's pass^k: the agent greedy, the customer drawn
            metrics.update(pass_hat_metrics([episodes[d * n : (d + 1) * n] for d in range(k)], suffix))
    if "advpool" in played:
        pool = played["advpool"][0]
        metrics["strict_pass_advpool_by_generation"] = [  # type: ignore[assignment]
            sum(ep.outcome.strict_pass for ep in eps) / max(1, len(eps)) for eps in split.values()
        ]
        scores = judge.score(pool)
        for episode, score in zip(pool, scores, strict=True):
            episode.rewards = score  # strategy discovery reads who won
        metrics.update(adversary_parts(scores, "_advpool"))
    return metrics


def _cross_play_row(
    played: dict[str, tuple[list[Episode], list[int]]], split: dict[int, list[Episode]], seed: int
) -> dict[str, dict[str, float]]:
    """One player's cross-play cells: coop, camo and each adversary generation's share of the pool (``adv_<g>``),
    strict PASS with its 95% interval over scenarios, each scenario's draws kept together."""
    groups: dict[str, list[Episode]] = {o: played[o][0] for o in ("coop", "camo") if o in played}
    groups.update({f"adv_{g}": eps for g, eps in split.items()})
    return {name: cross_play_cell(eps, seed) for name, eps in groups.items() if eps}
