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

Names follow ../shared/METRICS.md. An agent folder that appears under several names (a cycle in which the
adversary trained keeps the previous agent) is played once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sparring.agents.policies import LMPolicy, Policy
from sparring.agents.scripted import CamouflagingCustomer
from sparring.evaluate.play import (
    CheckpointCache,
    adversary_customer,
    adversary_parts,
    against_pool,
    cooperative_customer,
    customer_policy,
)
from sparring.judge import Scorer
from sparring.rollout import episode_metrics, run_episodes
from sparring.seeds import derive_seed
from sparring.settings import CoevolutionSettings
from sparring.world.scenarios import Scenario, as_cooperative


def heldout_seed(seed: int) -> int:
    """The rollout seed of every held-out evaluation under the run's ``seed``: agents compared on one draw."""
    return derive_seed(seed, "heldout")


def evaluate_agents(
    agents: Mapping[str, str | Path],
    simulator_dir: str | Path,
    adversary_dirs: Sequence[str | Path],
    scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: CoevolutionSettings,
    *,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """``{name: metrics}`` for each agent checkpoint in ``agents`` against coop (``coop_opening``), coopsim (the
    simulator's own opening), camo and the adversary pool, every episode shaped as co-evolution's (``settings``:
    the agent gym's turn limits and message length, the adversary gym's for customers); the simulator plays
    ``_coop`` and ``_coopsim`` at ``coop_temperature`` (0: greedy), adversaries at their gym's temperature."""
    if not scenarios:
        raise ValueError("no held-out scenarios to evaluate on")
    models, a, c = CheckpointCache(), settings.agent_grpo, settings.adversary_grpo

    def customer(folder: str | Path, temperature: float = c.temperature) -> LMPolicy:
        return customer_policy(models.model(folder), models.tokenizer, c.max_new_tokens, temperature)

    def adversary(folder: str | Path) -> Policy:
        return adversary_customer(customer(folder), settings.adversary_opening)

    turns = {"max_turns": a.max_turns, "max_calls_per_turn": a.max_calls_per_turn, "seed": heldout_seed(seed)}
    pool = list(adversary_dirs) or [simulator_dir]
    camo = CamouflagingCustomer(seed=seed)
    simulator = customer(simulator_dir, settings.coop_temperature)
    coops = {"_coop": cooperative_customer(simulator, settings.coop_opening), "_coopsim": simulator}
    done: dict[str, dict[str, float]] = {}
    results: dict[str, dict[str, float]] = {}
    for name, folder in agents.items():
        key = str(Path(folder).resolve())
        if key not in done:
            model = models.model(folder)
            agent = LMPolicy(model, models.tokenizer, "agent", max_new_tokens=a.max_new_tokens, greedy=True)
            done[key] = _play(agent, adversary, coops, camo, pool, scenarios, judge, turns)
        results[name] = dict(done[key])
    return results


def _play(
    agent: Policy,
    adversary: Callable[[str | Path], Policy],
    coops: Mapping[str, Policy],
    camo: Policy,
    pool: Sequence[str | Path],
    scenarios: Sequence[Scenario],
    judge: Scorer,
    turns: dict[str, int],
) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for suffix, coop in coops.items():
        metrics.update(episode_metrics(run_episodes(as_cooperative(scenarios), agent, coop, **turns), suffix))
    metrics.update(episode_metrics(run_episodes(scenarios, agent, camo, **turns), "_camo"))
    pooled = against_pool(list(scenarios), agent, [adversary(folder) for folder in pool], **turns)
    metrics.update(episode_metrics(pooled, "_advpool"))
    metrics.update(adversary_parts(judge.score(pooled), "_advpool"))
    return metrics
