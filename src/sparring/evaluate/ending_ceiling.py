"""The ceiling of ending fidelity: the best outcome F1 and group outcome-rate error any simulator can reach.

A simulator knows only what its goal says (intent, persona, opening; not how the session ended), so the best it can
do is to end as often as each persona does in the training dialogues. :func:`ending_ceiling` samples exactly that
(the persona-rate sampler, seeded draws) and two bounds beside it: ``no_escalation`` (escalations turned into
resolutions, what a simulator reaches against an agent that never hands over) and ``always_resolved`` (one that
never leaves). :func:`played_ceiling` plays the sampler's draws through the world, as the fidelity replays do: a
scripted customer steered to each drawn ending (:class:`~sparring.agents.escalation.EndingCustomer`) against the
plain expert and against the escalating one the replays use, with the endings read off the world.
:func:`simulator_ceiling` is the flat block the simulator_rl stage reports beside both simulators.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from sparring.data.synthetic import OUTCOMES
from sparring.evaluate.fidelity import group_outcome_rate_error, outcome_f1
from sparring.train.tracer import replay_scenarios, simulated_outcome


def persona_draws(train: pl.DataFrame, test: pl.DataFrame, draws: int, seed: int = 0) -> list[list[str]]:
    """``draws`` samples of endings for ``test``'s sessions, each drawn from its persona's ending rates in
    ``train`` (all endings alike for a persona ``train`` lacks)."""
    rates = {}
    for persona in set(test["persona"].to_list()):
        ends = train.filter(pl.col("persona") == persona)["outcome"].to_list() or list(OUTCOMES)
        rates[persona] = [ends.count(o) / len(ends) for o in OUTCOMES]
    rng = np.random.default_rng(seed)
    return [[str(rng.choice(OUTCOMES, p=rates[p])) for p in test["persona"].to_list()] for _ in range(draws)]


def ending_ceiling(train: pl.DataFrame, test: pl.DataFrame, draws: int = 500) -> dict[str, dict[str, float]]:
    """Mean outcome F1 and group outcome-rate error of the persona-rate sampler and its two bounds on ``test``."""
    real, personas = test["outcome"].to_list(), test["persona"].to_list()
    sampled = persona_draws(train, test, draws)

    def score(simulated: list[str]) -> tuple[float, float]:
        return outcome_f1(real, simulated), group_outcome_rate_error(real, simulated, personas)

    kinds = {
        "persona_rates": [score(s) for s in sampled],
        "no_escalation": [score(["resolved" if o == "escalated" else o for o in s]) for s in sampled],
        "always_resolved": [score(["resolved"] * len(real))],
    }
    return {
        name: {
            "outcome_f1": float(np.mean([f for f, _ in got])),
            "group_outcome_rate_error": float(np.mean([e for _, e in got])),
        }
        for name, got in kinds.items()
    }


def played_ceiling(
    train: pl.DataFrame, test: pl.DataFrame, draws: int = 20, seed: int = 0, plain: bool = True
) -> dict[str, dict[str, float]]:
    """The persona-rate sampler's draws played through the world against the escalating expert
    (``played_escalating``) and, with ``plain``, the plain one (``played_expert``): mean outcome F1, group
    outcome-rate error, escalated share, and the share of sessions that reached their drawn ending."""
    from sparring.agents.escalation import EndingCustomer, EscalatingExpert
    from sparring.agents.scripted import expert_agent
    from sparring.rollout import run_episodes

    real, personas = test["outcome"].to_list(), test["persona"].to_list()
    sampled = persona_draws(train, test, draws)
    scenarios = replay_scenarios(test, seed)
    out = {}
    agents = {"played_expert": expert_agent()} if plain else {}
    for name, agent in {**agents, "played_escalating": EscalatingExpert()}.items():
        got = []
        for drawn in sampled:
            customer = EndingCustomer({s.scenario_id: o for s, o in zip(scenarios, drawn, strict=True)})
            ends = [simulated_outcome(ep) for ep in run_episodes(scenarios, agent, customer, seed=seed)]
            got.append((outcome_f1(real, ends), group_outcome_rate_error(real, ends, personas), ends, drawn))
        out[name] = {
            "outcome_f1": float(np.mean([f for f, _, _, _ in got])),
            "group_outcome_rate_error": float(np.mean([e for _, e, _, _ in got])),
            "sim_rate_escalated": float(np.mean([ends.count("escalated") / len(ends) for _, _, ends, _ in got])),
            "drawn_ending_reached": float(np.mean([np.mean([a == b for a, b in zip(ends, d, strict=True)])
                                                   for _, _, ends, d in got])),
        }  # fmt: skip
    return out


def simulator_ceiling(train: pl.DataFrame, test: pl.DataFrame, draws: int = 20, seed: int = 0) -> dict[str, Any]:
    """The ceiling as metrics.json's ``simulator.ceiling``: the persona-rate sampler played against the escalating
    expert (the agent both simulators are measured against), with the unplayed sampler's figures beside it."""
    played = played_ceiling(train, test, draws, seed, plain=False)["played_escalating"]
    unplayed = ending_ceiling(train, test)["persona_rates"]
    return {
        **{k: v for k, v in played.items() if k != "drawn_ending_reached"},
        "outcome_f1_unplayed": unplayed["outcome_f1"],
        "group_outcome_rate_error_unplayed": unplayed["group_outcome_rate_error"],
        "draws": draws,
    }
