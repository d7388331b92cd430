"""The customer simulator, stage 2 of TRACER (arXiv 2609.28690; ../shared/SEEDS.md): multi-turn GRPO on replayed
sessions with an outcome-level and a trajectory-level reward.

Stage 1 (:mod:`sparring.train.simulator`) teaches the simulator to write like a customer; it does not teach it to
end sessions as customers do (measured: it resolved every replayed session while real ones end resolved,
escalated or abandoned). Stage 2, in the paper's order:

1. Replayed sessions. Every training dialogue becomes a scenario with its intent, persona and opening
   (:func:`~sparring.evaluate.fidelity.replay_scenarios`); the simulator plays that session's customer, G times
   per session (GRPO's group), against the scripted expert that escalates as real agents do
   (:class:`~sparring.agents.escalation.EscalatingExpert`): the agent side fidelity is measured against. The
   recorded agent turns cannot stand in: they call no tools, so no world state would follow from them.
2. Two levels of reward per episode g of a session's group G, in TRACER's order:

       outcome level     r_out(g)  = 1[ending(g) = the real session's ending]   (resolved | escalated | abandoned,
                                                                                 read off the world)
       trajectory level  r_traj(g) = 1 − DTW(real customer turns, simulated customer turns)
                                     (MiniLM embeddings, cosine per step)

3. Hierarchical combination (``reward: hierarchical``, the default; :func:`hierarchical_rewards`): the outcome
   level first, the trajectory level only inside it. With M = {g ∈ G : r_out(g) = 1} the episodes whose ending
   matched the real one,

       m(g) = (r_traj(g) − min_M r_traj) / (max_M r_traj − min_M r_traj)   (½ when M holds one episode or one value)
       R(g) = r_out(g) · (w_out + w_traj · m(g))

   A matched episode scores in [w_out, w_out + w_traj], an unmatched one exactly 0, whatever its turns: with
   w_out > 0 the ending orders the group before the trajectory does, the trajectory orders only the episodes whose
   ending matched, and no trajectory credit crosses a mismatched ending (a customer who stays to align more turns
   gains nothing unless staying is how the real session ended). A group with no match carries no signal; one
   where every episode matched carries the trajectory alone.

   The alternative (``reward: summed``, the form before issue 44; SEEDS.md: "normalize the outcome-level and
   turn-level advantages separately, then sum them"), each term normalized in its group (z_G), then summed:

       R(g) = w_out · z_G(r_out)(g) + w_traj · z_G(r_traj)(g)

   There a group whose r_out is constant contributes its trajectory term alone, and a mismatched episode with
   close turns can outscore a matched one; measured, the dense trajectory term pulled against the sparse outcome
   one (the ending match fell while the trajectory similarity rose; docs/results.md, "TRACER stage 2").

4. The guard: the KL to the SFT simulator (GRPO's ``beta``, ``simulator_rl.grpo.beta``), the one that held the
   text near the SFT simulator when the step size moved it (docs/results.md, "TRACER stage 2").
   Optional terms, off by default, are added to R in either form, each normalized in its group:

       + w_faith · z_G(the judge's faithfulness)   (the goal stays recoverable)
       + w_real · z_G(the judge's realism)         (not a guard: RL won the frozen discriminator in the
                                                     reward while perplexity rose; docs/results.md)

   TRL's GRPO then computes its group advantage of R and the clipped loss unchanged (:mod:`sparring.train.grpo`).

The episode's ending may only be reached through the world: the simulator leaves (:mod:`sparring.agents.leaving`:
"abandoned"), asks for a person or refuses twice, so that the agent hands over ("escalated"), or lets the expert
resolve and close ("resolved").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from sparring.agents.escalation import EscalatingExpert
from sparring.data.synthetic import OUTCOMES
from sparring.evaluate.fidelity import customer_turns, dtw_distance, replay_scenarios, simulated_outcome
from sparring.judge.rewards import JudgeBackend
from sparring.rollout import Episode
from sparring.settings import SimulatorRLSettings
from sparring.train.grpo import GRPOResult, train_side
from sparring.train.iapo import group_normalized
from sparring.world.scenarios import Scenario

Embedder = Callable[[Sequence[str]], np.ndarray]
REWARD_KEY = "sim_reward"  # the combined reward R the simulator trains on (hierarchical or summed)


@dataclass(frozen=True)
class RealSession:
    """What a replayed session is compared with: how the real one ended and what its customer said."""

    outcome: str
    turns: tuple[str, ...]


def replay_sessions(
    dialogues: pl.DataFrame, seed: int, n: int | None = None
) -> tuple[list[Scenario], dict[str, RealSession]]:
    """``n`` dialogues (a seeded sample; None: all) as replay scenarios, and each scenario's real session."""
    rows = dialogues.filter(pl.col("outcome").is_in(OUTCOMES))
    if n is not None and rows.height > n:
        rows = rows.sample(n, seed=seed, shuffle=True)
    scenarios = replay_scenarios(rows, seed)
    sessions: dict[str, RealSession] = {}
    for scenario, row in zip(scenarios, rows.iter_rows(named=True), strict=True):
        turns = tuple(str(t["text"]) for t in row["turns"] if t["role"] == "customer" and str(t["text"]).strip())
        if scenario.scenario_id in sessions:
            raise ValueError(f"two dialogues replay as one scenario id {scenario.scenario_id!r}")
        sessions[scenario.scenario_id] = RealSession(outcome=str(row["outcome"]), turns=turns)
    return scenarios, sessions


def hierarchical_rewards(
    outcome: Sequence[float], trajectory: Sequence[float], group: int, w_out: float, w_traj: float
) -> list[float]:
    """R(g) = r_out(g) · (w_out + w_traj · m(g)) over consecutive groups, m the trajectory min-max scaled among the
    group's episodes whose ending matched (r_out = 1), ½ when they hold one value (the module's step 3)."""
    if group < 1 or len(outcome) % group or len(outcome) != len(trajectory):
        raise ValueError(f"{len(outcome)} outcomes and {len(trajectory)} trajectories do not form groups of {group}")
    out: list[float] = []
    for k in range(0, len(outcome), group):
        matched = [t for o, t in zip(outcome[k : k + group], trajectory[k : k + group], strict=True) if o == 1.0]
        lo, hi = (min(matched), max(matched)) if matched else (0.0, 0.0)
        for o, t in zip(outcome[k : k + group], trajectory[k : k + group], strict=True):
            scaled = (t - lo) / (hi - lo) if hi > lo else 0.5
            out.append(float(o == 1.0) * (w_out + w_traj * scaled))
    return out


class TracerScorer:
    """The stage-2 reward of a batch of replayed episodes (a :class:`~sparring.judge.Scorer`): batches arrive as
    TRL's groups, ``group_size`` consecutive episodes of one session."""

    def __init__(
        self,
        sessions: dict[str, RealSession],
        group_size: int,
        settings: SimulatorRLSettings,
        embedder: Embedder,
        judge: JudgeBackend | None = None,
    ) -> None:
        if (settings.faithfulness_weight or settings.realism_weight) and judge is None:
            raise ValueError("faithfulness_weight and realism_weight need a judge backend")
        self.sessions, self.group_size, self.settings, self.embed, self.judge = (
            sessions, group_size, settings, embedder, judge
        )  # fmt: skip
        self._real: dict[str, np.ndarray] = {}
        self.history: list[dict[str, float]] = []  # per scored batch (one GRPO step): the raw reward parts' means

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        v = np.asarray(self.embed(list(texts)), dtype=np.float64).reshape(len(texts), -1)
        return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)

    def trajectory_similarity(
        self, episodes: Sequence[Episode], simulated: Sequence[Sequence[str]] | None = None
    ) -> list[float]:
        """1 − DTW distance between each episode's customer turns (``simulated``, read off the episodes when not
        given) and its real session's (0 with no turns)."""
        missing = sorted({e.scenario.scenario_id for e in episodes} - self._real.keys())
        for sid in missing:
            self._real[sid] = self._vectors(self.sessions[sid].turns) if self.sessions[sid].turns else np.zeros((0, 1))
        simulated = [customer_turns(e) for e in episodes] if simulated is None else simulated
        flat = [t for turns in simulated for t in turns]
        vectors = self._vectors(flat) if flat else np.zeros((0, 1))
        out, start = [], 0
        for e, turns in zip(episodes, simulated, strict=True):
            mine, start = vectors[start : start + len(turns)], start + len(turns)
            d = dtw_distance(self._real[e.scenario.scenario_id], mine)
            out.append(0.0 if math.isnan(d) else 1.0 - d)
        return out

    def score(self, episodes: Sequence[Episode]) -> list[dict[str, float]]:
        unknown = [e.scenario.scenario_id for e in episodes if e.scenario.scenario_id not in self.sessions]
        if unknown:
            raise KeyError(f"episodes of scenarios with no real session: {unknown[:3]}")
        s, g = self.settings, self.group_size
        ends = [simulated_outcome(e) for e in episodes]
        real = [self.sessions[e.scenario.scenario_id].outcome for e in episodes]
        outcome = [float(end == r) for end, r in zip(ends, real, strict=True)]
        turns = [customer_turns(e) for e in episodes]  # read once: the trajectory and both judge guards use them
        trajectory = self.trajectory_similarity(episodes, turns)
        if s.reward == "hierarchical":
            reward = np.asarray(hierarchical_rewards(outcome, trajectory, g, s.outcome_weight, s.trajectory_weight))
        else:
            reward = s.outcome_weight * np.asarray(group_normalized(outcome, g))
            reward += s.trajectory_weight * np.asarray(group_normalized(trajectory, g))
        faithful, realism = [0.0] * len(episodes), [0.0] * len(episodes)
        if s.faithfulness_weight:
            faithful = [float(f) for f in self.judge.faithfulness(turns, [e.scenario.intent for e in episodes])]
            reward += s.faithfulness_weight * np.asarray(group_normalized(faithful, g))
        if s.realism_weight:
            realism = [float(r) for r in self.judge.realism(turns)]
            reward += s.realism_weight * np.asarray(group_normalized(realism, g))
        self.history.append(
            {
                "step": len(self.history) + 1,
                "outcome_match": float(np.mean(outcome)),
                "trajectory_similarity": float(np.mean(trajectory)),
                **({"realism": float(np.mean(realism))} if s.realism_weight else {}),
                **{f"ended_{k}": ends.count(k) / len(ends) for k in OUTCOMES},
            }
        )
        return [
            {
                REWARD_KEY: float(r),
                "sim_outcome_match": o,
                "sim_trajectory_similarity": t,
                "sim_faithfulness": f,
                "sim_realism": q,
                **{f"sim_ended_{k}": float(end == k) for k in OUTCOMES},
            }
            for end, r, o, t, f, q in zip(ends, reward, outcome, trajectory, faithful, realism, strict=True)
        ]


def train_simulator_rl(
    model: Any,
    tokenizer: Any,
    dialogues: pl.DataFrame,
    settings: SimulatorRLSettings,
    *,
    embedder: Embedder,
    judge: JudgeBackend | None = None,
    seed: int = 0,
    callbacks: Sequence[Any] = (),
) -> tuple[GRPOResult, list[dict[str, float]]]:
    """TRACER stage 2: GRPO of the simulator (``model``, the customer side) on ``settings.sessions`` replayed
    training ``dialogues`` against the escalating scripted expert, rewarded by :class:`TracerScorer`. Returns the
    GRPO result and the reward parts' means per step (outcome match, trajectory similarity, ending shares)."""
    scenarios, sessions = replay_sessions(dialogues, seed, settings.sessions)
    if not scenarios:
        raise ValueError("no dialogues with a known outcome (resolved | escalated | abandoned) to replay")
    scorer = TracerScorer(sessions, settings.grpo.num_generations, settings, embedder, judge)
    result = train_side(
        model,
        tokenizer,
        "customer",
        EscalatingExpert(),
        scenarios,
        scorer,
        settings.grpo,
        seed=seed,
        reward_key=REWARD_KEY,
        callbacks=callbacks,
    )
    return result, scorer.history
