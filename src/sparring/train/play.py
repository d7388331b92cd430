"""Playing agents against customers, as RL-ADA's arena, gyms and cycle evaluation (:mod:`sparring.train.coevolution`)
and `evaluate` all do it: checkpoints loaded once with one vocabulary, the frozen customers built one way, the
adversary pool dealt round-robin, the judge's adversary reward parts averaged, every episode's turn limits, and the
league an agent's gym (the cycles', agent_rl's) draws its customers from.

The cooperative simulator plays held-out evaluations greedy by default (``coop_temperature``), as the agents and
the simulator's own fidelity metrics do: sampled at 1.0 the tiny simulator garbles words, and DA0's figures
against it fall with it (docs/results.md). Adversaries keep their gyms' temperature: that is the policy they
were trained as.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sparring.agents.openings import ContinuesUtterance, OpensWithUtterance
from sparring.lm.checkpoints import load_checkpoint
from sparring.lm.policies import LMPolicy, Policy
from sparring.rollout import Episode, run_episodes
from sparring.settings import CoevolutionSettings
from sparring.train.cycle_state import CycleState
from sparring.world.scenarios import Scenario

REPLAYED = "arena_replay"  # utterance_source of an agent-gym scenario whose utterance is a recorded opening


class CheckpointCache:
    """Checkpoint folders loaded once each, in eval mode, all sharing the first one's vocabulary (an episode's
    views are built with one tokenizer), on ``device`` (``"cpu"``, or ``"cuda"`` where a GPU is lent)."""

    def __init__(self, device: str = "cpu") -> None:
        self.tokenizer: Any = None
        self.device = device
        self._models: dict[str, Any] = {}

    def model(self, folder: str | Path) -> Any:
        key = str(Path(folder).resolve())
        if key not in self._models:
            model, tokenizer = load_checkpoint(Path(key))
            if self.tokenizer is None:
                self.tokenizer = tokenizer
            elif tokenizer.get_vocab() != self.tokenizer.get_vocab():
                raise ValueError(f"{folder}: tokenizer differs from the other checkpoints'")
            self._models[key] = model.to(self.device).eval()
        return self._models[key]

    def put(self, folder: str | Path, model: Any) -> None:
        """Record ``model`` (trained in this process, saved to ``folder``) so later reads skip the load."""
        self._models[str(Path(folder).resolve())] = model.eval()


class GameModels(CheckpointCache):
    """Checkpoints played as co-evolution plays them (``settings``): an agent shaped by the agent gym, customers by
    the adversary gym (message length, temperature), adversaries with their opening. Cycles and `evaluate` both
    build their policies here. ``episode_draws``: sampling customers draw per episode (common random numbers across
    the agents they meet: :class:`~sparring.lm.policies.LMPolicy`), as `evaluate` plays them."""

    def __init__(self, settings: Any, device: str = "cpu", *, episode_draws: bool = False) -> None:
        super().__init__(device)
        self.settings = settings
        self.episode_draws = episode_draws

    def agent_policy_of(self, folder: str | Path, greedy: bool) -> LMPolicy:
        a = self.settings.agent_grpo
        return LMPolicy(
            self.model(folder),
            self.tokenizer,
            "agent",
            max_new_tokens=a.max_new_tokens,
            temperature=a.temperature,
            greedy=greedy,
        )

    def customer(self, folder: str | Path, temperature: float | None = None) -> LMPolicy:
        c = self.settings.adversary_grpo
        t = c.temperature if temperature is None else temperature
        return customer_policy(self.model(folder), self.tokenizer, c.max_new_tokens, t, self.episode_draws)

    def adversary(self, folder: str | Path) -> Policy:
        return adversary_customer(self.customer(folder), self.settings.adversary_opening)


def customer_policy(
    model: Any, tokenizer: Any, max_new_tokens: int, temperature: float, episode_draws: bool = False
) -> LMPolicy:
    """An LM customer sampling at ``temperature``; 0 plays greedy. ``episode_draws``: each episode its own stream."""
    return LMPolicy(
        model,
        tokenizer,
        "customer",
        max_new_tokens=max_new_tokens,
        temperature=temperature or 1.0,
        greedy=temperature == 0,
        episode_draws=episode_draws,
    )


def cooperative_customer(simulator: LMPolicy, opening: str) -> Policy:
    """The cooperative simulator as ``_coop`` plays it: after the scenario's own utterance (``"utterance"``,
    :class:`~sparring.agents.openings.OpensWithUtterance`) or from its own first message (``"simulator"``)."""
    if opening not in ("utterance", "simulator"):
        raise ValueError(f"coop_opening must be utterance or simulator, got {opening!r}")
    return OpensWithUtterance(simulator) if opening == "utterance" else simulator


def adversary_customer(policy: LMPolicy, opening: str) -> Policy:
    """An adversary generation (the simulator as the first) as every arena, gym and evaluation plays it: going on
    from the scenario's own utterance in its first message (``"utterance"``,
    :class:`~sparring.agents.openings.ContinuesUtterance`) or writing that message whole (``"own"``)."""
    if opening not in ("utterance", "own"):
        raise ValueError(f"adversary_opening must be utterance or own, got {opening!r}")
    return ContinuesUtterance(policy) if opening == "utterance" else policy


def against_pool(
    scenarios: Sequence[Scenario], agent: Policy, adversaries: Sequence[Policy], **play: Any
) -> list[Episode]:
    """``agent`` against the adversary pool (``_advpool``): scenario i goes to ``adversaries[i % n]``, each
    generation playing its share in one batched rollout (``play``: :func:`~sparring.rollout.run_episodes`'s keyword
    arguments). Episodes come grouped by generation, oldest first."""
    episodes: list[Episode] = []
    for i, adversary in enumerate(adversaries):
        part = list(scenarios)[i :: len(adversaries)]
        if part:
            episodes += run_episodes(part, agent, adversary, **play)
    return episodes


def adversary_parts(scores: Sequence[dict[str, float]], suffix: str = "") -> dict[str, float]:
    """The judge's adversary reward parts over episodes, averaged, with ``suffix``; adv_success is its win rate."""
    n = max(1, len(scores))
    parts = {
        "adv_success": sum(x["adv_won"] for x in scores) / n,
        "adv_misroute": sum(x["adv_misroute"] for x in scores) / n,
        "adv_faithfulness": sum(x["adv_faithfulness"] for x in scores) / n,
        "adv_realism": sum(x["adv_realism"] for x in scores) / n,
        "adv_reward": sum(x["adv_reward"] for x in scores) / n,
    }
    return {f"{k}{suffix}": v for k, v in parts.items()}


def turn_limits(settings: CoevolutionSettings) -> dict[str, int]:
    """Every arena and evaluation episode's shape: the agent gym's turn limits."""
    return {"max_turns": settings.agent_grpo.max_turns, "max_calls_per_turn": settings.agent_grpo.max_calls_per_turn}


def agent_opponents(
    state: CycleState,
    mix: dict[str, float],
    customer: Callable[[str], LMPolicy],
    coop_opening: str,
    adversary_opening: str,
) -> Callable[[Scenario, int], Policy]:
    """Per group (a league): the current adversary, an earlier trained generation ("pool", uniformly; the current
    one before any is earlier), generation 0 ("ref": the simulator as every adversary starts, `_ref`) or the
    cooperative simulator ("coop"), which opens as ``_coop`` does (``coop_opening``); adversaries open as
    ``adversary_opening`` says. A replayed scenario (:data:`REPLAYED`) opens with its recorded message whoever plays
    the later turns."""
    lms = {d: customer(d) for d in {state.simulator_dir, *state.adversary_dirs}}
    policies = {d: adversary_customer(p, adversary_opening) for d, p in lms.items()}  # the simulator: 1st adversary
    coop = cooperative_customer(lms[state.simulator_dir], coop_opening)
    replays = {d: OpensWithUtterance(p) for d, p in lms.items()}  # one per LM, so a rollout batches its groups
    earlier = state.adversary_dirs[:-1]
    names = sorted(n for n, w in mix.items() if w > 0)
    unknown = set(names) - {"adversary", "pool", "ref", "coop"}
    if unknown or not names:
        raise ValueError(f"agent_mix: keys must be adversary/pool/ref/coop with a positive weight, got {mix}")

    def choose(scenario: Scenario, seed: int) -> Policy:
        rng = random.Random(seed)
        name = rng.choices(names, [mix[n] for n in names])[0]
        if name == "pool" and earlier:
            folder = rng.choice(earlier)
        else:
            folder = state.simulator_dir if name in ("coop", "ref") else state.adversary_dir
        if scenario.utterance_source == REPLAYED:
            return replays[folder]  # the recorded opening, then this opponent's turns
        return coop if name == "coop" else policies[folder]

    return choose
