"""Held-out evaluation split across worker processes: the same figures as :func:`evaluate_heldout`, sooner.

`evaluate` runs alone at the end of the pipeline, so in one process it leaves every other core idle. The agents
are independent players (each seeds its own episodes with the run's held-out seed), so they can be dealt to
``workers`` spawned processes, each loading the opponents and the judge itself and playing its share with
:func:`evaluate_heldout`; the parts are merged into one :class:`HeldoutReport` equal to the single-process one
(tests/test_evaluate_parallel.py). Players are dealt in contiguous runs of the agents' order, so the adversaries'
episodes come back in the order strategy discovery would have read them. Each worker's progress lines reach this
process's ``sparring.progress`` logger through a queue.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from sparring.evaluate.crossplay import cross_play_matrix, share_of_ceiling
from sparring.evaluate.heldout import EXPERT, OPPONENTS, HeldoutReport, evaluate_heldout
from sparring.judge import Scorer
from sparring.lm.policies import Policy
from sparring.progress import forward_to, relay_from
from sparring.settings import CoevolutionSettings
from sparring.world.scenarios import Scenario


def evaluate_heldout_parallel(
    agents: Mapping[str, str | Path],
    simulator_dir: str | Path,
    adversary_dirs: Sequence[str | Path],
    scenarios: Sequence[Scenario],
    judge_factory: Callable[[], Scorer],
    settings: CoevolutionSettings,
    *,
    workers: int = 2,
    torch_threads: int = 1,
    seed: int = 0,
    draws: Sequence[int] = (0,),
    expert: Policy | None = None,
    opponents: Collection[str] = OPPONENTS,
    expert_draws: int | None = None,
    episode_draws: bool = True,
) -> HeldoutReport:
    """:func:`evaluate_heldout` with the players dealt to ``workers`` processes (the expert to the last);
    ``judge_factory`` (picklable, e.g. a ``functools.partial`` of ``load_judge``) builds each worker's judge.
    ``workers`` ≤ 1, or one player, plays in this process. Phases: the pool's wall time as ``play_<n>_processes``
    (episodes: all the workers played); each worker's own, which overlap in time, in ``worker_phases``."""
    common = {
        "simulator_dir": simulator_dir,
        "adversary_dirs": list(adversary_dirs),
        "scenarios": list(scenarios),
        "settings": settings,
        "seed": seed,
        "draws": list(draws),
        "opponents": list(opponents),
        "expert_draws": expert_draws,
        "episode_draws": episode_draws,
    }
    groups = deal(agents, expert is not None, workers)
    if len(groups) <= 1:
        return evaluate_heldout(agents, judge=judge_factory(), expert=expert, **common)
    jobs = [
        {
            **common,
            "agents": group,
            "expert": expert if i == len(groups) - 1 else None,
            "progress_label": f"held-out play, process {i + 1}/{len(groups)}",
        }
        for i, group in enumerate(groups)
    ]
    start = time.perf_counter()
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no forked torch or tokenizer threads
    progress = context.Queue()  # the workers' progress lines, logged here as this process's own
    with (
        relay_from(progress),
        ProcessPoolExecutor(len(jobs), mp_context=context, initializer=forward_to, initargs=(progress,)) as pool,
    ):
        parts = list(pool.map(_play_part, jobs, [judge_factory] * len(jobs), [torch_threads] * len(jobs)))
    return merge(parts, list(agents), time.perf_counter() - start)


def deal(agents: Mapping[str, str | Path], with_expert: bool, workers: int) -> list[dict[str, str | Path]]:
    """``agents`` cut into at most ``workers`` contiguous groups of near-equal size (an agent folder under several
    names counts once and stays in one group); the expert, when playing, counts as one more on the last group."""
    folders: dict[str, list[str]] = {}
    for name, folder in agents.items():
        folders.setdefault(str(Path(folder).resolve()), []).append(name)
    units = list(folders.values())
    total = len(units) + (1 if with_expert else 0)
    n = max(1, min(workers, total))
    groups: list[list[str]] = [[]]
    for spent, names in enumerate(units):
        # start the next group once this one holds its share (the last group keeps the rest and the expert)
        if groups[-1] and len(groups) < n and spent + 0.5 > total * len(groups) / n:
            groups.append([])
        groups[-1].extend(names)
    while len(groups) < n and with_expert:  # the expert alone is worth a process of its own
        groups.append([])
    return [{name: agents[name] for name in group} for group in groups]


def merge(parts: Sequence[HeldoutReport], order: Sequence[str], seconds: float) -> HeldoutReport:
    """One report from the workers' parts: agents in ``order`` with their share of the (one) ceiling and their
    per-episode outcomes (then the expert's), cross-play rows in ``order`` then the expert's, adversary episodes
    per generation in the workers' order."""
    ceiling = next((p.ceiling for p in parts if p.ceiling), {})
    played = {name: metrics for p in parts for name, metrics in p.agents.items()}
    report = HeldoutReport(agents={}, ceiling=ceiling)
    outcomes = {name: record for p in parts for name, record in p.episodes.items()}
    for name in order:
        report.agents[name] = {**played[name], **share_of_ceiling(played[name], ceiling)}
        report.episodes[name] = outcomes[name]
    if EXPERT in outcomes:
        report.episodes[EXPERT] = outcomes[EXPERT]
    cells = {}
    for part in parts:
        matrix = part.cross_play
        for i, agent in enumerate(matrix.get("agents", [])):
            cells[agent] = {
                opponent: {key: matrix[key][i][j] for key in ("strict_pass", "ci_low", "ci_high", "n")}
                for j, opponent in enumerate(matrix["opponents"])
                if matrix["n"][i][j] is not None
            }
    if cells:
        rows = [name for name in order if name in cells] + ([EXPERT] if EXPERT in cells else [])
        report.cross_play = cross_play_matrix({name: cells[name] for name in rows})
    for part in parts:
        for generation, episodes in part.adversary_episodes.items():
            report.adversary_episodes.setdefault(generation, []).extend(episodes)
    episodes = sum(phase.get("episodes", 0) for p in parts for phase in p.phases.values())
    report.phases = {f"play_{len(parts)}_processes": {"seconds": seconds, "episodes": episodes}}
    report.worker_phases = [part.phases for part in parts]
    return report


def _play_part(job: dict[str, Any], judge_factory: Callable[[], Scorer], torch_threads: int) -> HeldoutReport:
    """One worker's share: its agents (and maybe the expert) against every opponent, judged by its own judge."""
    from sparring.runtime import apply_torch_threads

    apply_torch_threads(torch_threads)
    return evaluate_heldout(judge=judge_factory(), **job)
