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
from typing import Any

from sparring.agents.policies import LMPolicy, Policy
from sparring.agents.scripted import CamouflagingCustomer
from sparring.rollout import episode_metrics, run_episodes
from sparring.train.checkpoints import load_checkpoint
from sparring.train.coevolution import adversary_parts
from sparring.train.grpo import Scorer, derive_seed
from sparring.train.opponents import adversary_customer, against_pool, cooperative_customer, customer_policy
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
    *,
    seed: int = 0,
    max_turns: int = 6,
    max_calls_per_turn: int = 3,
    agent_max_new_tokens: int = 96,
    customer_max_new_tokens: int = 64,
    customer_temperature: float = 1.0,
    coop_temperature: float = 0.0,
    coop_opening: str = "utterance",
    adversary_opening: str = "utterance",
) -> dict[str, dict[str, float]]:
    """``{name: metrics}`` for each agent checkpoint in ``agents`` against coop (``coop_opening``), coopsim (the
    simulator's own opening), camo and the adversary pool; the simulator plays ``_coop`` and ``_coopsim`` at
    ``coop_temperature`` (0: greedy), adversaries at ``customer_temperature``, opening as ``adversary_opening``."""
    if not scenarios:
        raise ValueError("no held-out scenarios to evaluate on")
    cache: dict[str, Any] = {}
    tokenizer: Any = None

    def model(folder: str | Path) -> Any:
        nonlocal tokenizer
        key = str(Path(folder).resolve())
        if key not in cache:
            loaded, tok = load_checkpoint(Path(key))
            if tokenizer is None:
                tokenizer = tok
            elif tok.get_vocab() != tokenizer.get_vocab():
                raise ValueError(f"{folder}: tokenizer differs from the other checkpoints'")
            cache[key] = loaded.eval()
        return cache[key]

    def customer(folder: str | Path, temperature: float = customer_temperature) -> LMPolicy:
        return customer_policy(model(folder), tokenizer, customer_max_new_tokens, temperature)

    def adversary(folder: str | Path) -> Policy:
        return adversary_customer(customer(folder), adversary_opening)

    turns = {"max_turns": max_turns, "max_calls_per_turn": max_calls_per_turn, "seed": heldout_seed(seed)}
    pool = list(adversary_dirs) or [simulator_dir]
    camo = CamouflagingCustomer(seed=seed)
    simulator = customer(simulator_dir, coop_temperature)
    coops = {"_coop": cooperative_customer(simulator, coop_opening), "_coopsim": simulator}
    done: dict[str, dict[str, float]] = {}
    results: dict[str, dict[str, float]] = {}
    for name, folder in agents.items():
        key = str(Path(folder).resolve())
        if key not in done:
            agent = LMPolicy(model(folder), tokenizer, "agent", max_new_tokens=agent_max_new_tokens, greedy=True)
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
