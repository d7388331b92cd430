"""TRACER (arXiv 2609.28690; ../shared/SEEDS.md): a customer simulator aligned on behaviour, not only style, in the
paper's order.

TRACER models the user's (hidden, evolving) goal, and its simulator must end sessions as real users do. Stage 1 is
supervised: the simulator learns to write the customer's turns of real dialogues, each conditioned on a hidden goal
in the system message. Stage 2 (multi-turn RL with outcome- and trajectory-level rewards) starts from that model:
stage 1 teaches it to write like a customer, not to end sessions as customers do (measured: it resolved every
replayed session while real ones end resolved, escalated or abandoned). The measuring (outcome F1, group error,
trajectory distance, perplexity) is :mod:`sparring.evaluate.fidelity`'s, over the replay code here.

Stage 1, SFT on real user dialogues (:func:`train_simulator`):

1.1. The customer's view of every training conversation (:func:`simulator_conversations`,
     :func:`~sparring.lm.chat.swap_roles`): goal as ``system``, the agent's turns as ``user``, the customer's
     own turns as ``assistant``, so the loss covers the customer's turns only. Three sources:

     (a) real / ingested dialogues: goal from the intent's description and control code, the persona's behaviour,
         the identity facts the customer gives in the dialogue, and (for a share ``outcome_hint_p``) how the
         session ends. Dropping the ending clause half the time teaches both: an outcome-steerable simulator, and,
         for goals without it (those of rollouts), the persona's own outcome tendency;
     (b) utterances as one-turn openings: goal from intent + style;
     (c) optionally, scripted episodes (``ExpertAgent`` vs ``CooperativeCustomer``): their goal is exactly
         :func:`~sparring.agents.customer_prompt.customer_goal`, the system message rollouts give an LM customer,
         and they show the simulator giving the identity its goal lists when asked: without that no agent can ever pass.
         Given the dialogues, they end as each persona's real sessions do (:mod:`sparring.train.scripted_endings`,
         issue 58): leaving or refused and handed over as often as real customers of the persona are.

     Every goal is built by :func:`~sparring.agents.customer_prompt.goal_text`, as ``customer_goal``'s is, so the
     trained simulator plays in rollouts unchanged. Goals end with the problem, a seed phrasing (in rollouts the
     scenario's own utterance, in training another customer's words for the same intent, so the simulator learns
     to reword a seed, not to copy it) and the intent's control code.
1.2. The drills a tiny model from scratch first needs: :func:`copy_drill` to use its context at all, then
     :func:`opening_drill` to write a problem from its code.
1.3. SFT on 1.1's conversations, after the drills (:func:`train_simulator`).

Stage 2, multi-turn GRPO on replayed sessions (:func:`train_simulator_rl`):

2.1. Replayed sessions. Every training dialogue becomes a scenario with its intent, persona and opening
     (:func:`replay_scenarios`, :func:`replay_sessions`); the simulator plays that session's customer, G times per
     session (GRPO's group), against the scripted expert that escalates as real agents do
     (:class:`~sparring.agents.escalation.EscalatingExpert`): the agent side fidelity is measured against. The
     recorded agent turns cannot stand in: they call no tools, so no world state would follow from them.
2.2. Two levels of reward per episode g of a session's group G, in TRACER's order:

       outcome level     r_out(g)  = 1[ending(g) = the real session's ending]   (resolved | escalated | abandoned,
                                                                                 read off the world,
                                                                                 :func:`simulated_outcome`)
       trajectory level  r_traj(g) = 1 − DTW(real customer turns, simulated customer turns)
                                     (MiniLM embeddings, cosine per step, :func:`dtw_distance`)

2.3. Hierarchical combination (``reward: hierarchical``, the default; :func:`hierarchical_rewards`): the outcome
     level first, the trajectory level only inside it. With M = {g ∈ G : r_out(g) = 1} the episodes whose ending
     matched the real one,

       m(g) = (r_traj(g) − min_M r_traj) / (max_M r_traj − min_M r_traj)   (½ when M holds one episode or one value)
       R(g) = r_out(g) · (w_out + w_traj · m(g))

     A matched episode scores in [w_out, w_out + w_traj], an unmatched one exactly 0, whatever its turns: with
     w_out > 0 the ending orders the group before the trajectory does, the trajectory orders only the episodes
     whose ending matched, and no trajectory credit crosses a mismatched ending (a customer who stays to align more
     turns gains nothing unless staying is how the real session ended). A group with no match carries no signal;
     one where every episode matched carries the trajectory alone.

     The alternative (``reward: summed``, the form before issue 44; SEEDS.md: "normalize the outcome-level and
     turn-level advantages separately, then sum them"), each term normalized in its group (z_G), then summed:

       R(g) = w_out · z_G(r_out)(g) + w_traj · z_G(r_traj)(g)

     There a group whose r_out is constant contributes its trajectory term alone, and a mismatched episode with
     close turns can outscore a matched one; measured, the dense trajectory term pulled against the sparse outcome
     one (the ending match fell while the trajectory similarity rose; docs/results.md, "TRACER stage 2").
     :class:`TracerScorer` scores a batch of replayed episodes this way.
2.4. The guard: the KL to the SFT simulator (GRPO's ``beta``, ``simulator_rl.grpo.beta``), the one that held the
     text near the SFT simulator when the step size moved it (docs/results.md, "TRACER stage 2").
     Optional terms, off by default, are added to R in either form, each normalized in its group:

       + w_faith · z_G(the judge's faithfulness)   (the goal stays recoverable)
       + w_real · z_G(the judge's realism)         (not a guard: RL won the frozen discriminator in the
                                                     reward while perplexity rose; docs/results.md)

     TRL's GRPO then computes its group advantage of R and the clipped loss unchanged (:mod:`sparring.train.grpo`).

The episode's ending may only be reached through the world: the simulator leaves (:mod:`sparring.agents.leaving`:
"abandoned"), asks for a person or refuses twice, so that the agent hands over ("escalated"), or lets the expert
resolve and close ("resolved").

Over 400 lines: TRACER's two stages in the paper's order, each numbered step above a section of the code below.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sparring.agents.customer_prompt import PERSONA_BEHAVIOUR, goal_text, intent_code
from sparring.agents.customer_view import dialogue_view
from sparring.agents.escalation import EscalatingExpert
from sparring.agents.scripted import CooperativeCustomer, expert_agent
from sparring.agents.slots import delexicalize, slot_values
from sparring.data.synthetic import OUTCOMES
from sparring.judge.rewards import JudgeBackend
from sparring.rollout import Episode, run_episodes
from sparring.settings import SFTSettings, SimulatorRLSettings, SimulatorSFTSettings
from sparring.train.grpo import GRPOResult, train_side
from sparring.train.iapo import group_normalized
from sparring.train.scripted_endings import ending_episodes
from sparring.train.sft import SFTResult, combine, train_sft
from sparring.world.scenarios import Scenario, sample_scenarios
from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import PERSONAS

Embedder = Callable[[Sequence[str]], np.ndarray]
REWARD_KEY = "sim_reward"  # the combined reward R the simulator trains on (hierarchical or summed)

# Where a training goal's seed phrasing comes from: "other": another customer's words for the same intent (the
# simulator learns to reword a seed); "own": the opening itself (to open with it verbatim); "none": no seed.
SEED_SOURCES = ("other", "own", "none")
# Share of the scripted episodes whose expert first confirms a wrong request, so the simulator learns to say no.
MISCONFIRM = 0.25
# Utterance styles that have no persona of their own.
STYLE_BEHAVIOUR: dict[str, str] = {
    "cooperative": PERSONA_BEHAVIOUR["cooperative"],
    "vague": PERSONA_BEHAVIOUR["vague"],
    "camouflaged": PERSONA_BEHAVIOUR["camouflaging"],
    "multi_part": "You mention other things on your mind besides your main problem.",
}


# Stage 1.1. The customer's view of the training conversations ---------------------------------------------------------


def utterance_view(text: str, intent: str, style: str = "", seed_phrasing: str = "") -> list[dict[str, str]]:
    """A one-turn opening: goal from intent + style (+ a seed phrasing), the utterance as the customer's first
    message."""
    return [
        {"role": "system", "content": goal_text(intent, STYLE_BEHAVIOUR.get(style, ""), seed_phrasing=seed_phrasing)},
        {"role": "assistant", "content": text.strip()},
    ]


def episode_view(episode: Episode) -> list[dict[str, str]]:
    """A rollout's customer view (its goal is ``customer_goal``), without the agent's turns after the last
    customer one: they carry no loss. The customer's own turns state their facts as placeholders, as its goal
    does (a scripted customer's say the values)."""
    values = slot_values(episode.scenario)
    view = [{"role": m["role"], "content": str(m.get("content") or "")} for m in episode.customer_messages]
    for m in view:
        if m["role"] == "assistant":
            m["content"] = delexicalize(m["content"], values)
    while view and view[-1]["role"] == "user":
        view.pop()
    return view


def scripted_episodes(
    scenarios: Sequence[Scenario], seed: int, max_turns: int = 6, dialogues: pl.DataFrame | None = None
) -> list[Episode]:
    """ExpertAgent vs CooperativeCustomer rollouts (text only): the demonstrations of (c), which show the
    customer giving its identity when asked, naming the object when asked which one, and answering a
    confirmation with yes, or with a no that restates its need when the expert states a wrong request.

    With ``dialogues`` (the training dialogues), each episode ends as its persona's real sessions do, against the
    escalating expert (:mod:`sparring.train.scripted_endings`): all resolved, the SFT simulator never left."""
    if dialogues is not None:
        expert = EscalatingExpert(refs="described", misconfirm=MISCONFIRM)
        return ending_episodes(scenarios, dialogues, expert, seed, max_turns)
    expert = expert_agent(refs="described", misconfirm=MISCONFIRM)
    return run_episodes(scenarios, expert, CooperativeCustomer(), max_turns=max_turns, seed=seed)


def simulator_conversations(
    dialogues: pl.DataFrame,
    utterances: pl.DataFrame,
    episodes: Sequence[Episode] | None = None,
    seed: int = 0,
    *,
    max_utterances: int | None = 1000,
    outcome_hint_p: float = 0.5,
    seed_from: str = "other",
) -> list[list[dict[str, str]]]:
    """SFT conversations for the simulator, in the customer's view, shuffled (deterministic in ``seed``).

    ``dialogues``: id, intent, persona, outcome, turns (the ingest schema); ``utterances``: text, intent and
    optionally style; ``max_utterances`` keeps a seeded sample of the openings (None: all). Measured with a tiny
    model at equal steps, fewer openings and more scripted episodes lowered held-out perplexity and raised
    identity-copy accuracy, and ~9k ingested openings would outweigh the dialogues and the CPU budget.
    ``outcome_hint_p``: share of dialogue goals that say how the session ends."""
    if not 0.0 <= outcome_hint_p <= 1.0:
        raise ValueError("outcome_hint_p must be in [0, 1]")
    if seed_from not in SEED_SOURCES:
        raise ValueError(f"seed_from must be one of {SEED_SOURCES}, got {seed_from!r}")
    rng = random.Random(f"simulator:{seed}")
    known = set(load_taxonomy().intents)
    rows = [r for r in utterances.iter_rows(named=True) if r["intent"] in known and str(r["text"]).strip()]
    by_intent: dict[str, list[str]] = {}
    for r in rows:
        by_intent.setdefault(r["intent"], []).append(str(r["text"]).strip())

    def seed_phrasing(intent: str, own: str) -> str:
        if seed_from == "none":
            return ""
        if seed_from == "own":
            return own.strip()
        pool = [text for text in by_intent.get(intent, []) if text != own.strip()]
        return rng.choice(pool) if pool else ""

    conversations: list[list[dict[str, str]]] = []
    for row in dialogues.iter_rows(named=True):
        if row["intent"] not in known or not any(t["role"] == "customer" for t in row["turns"]):
            continue
        with_outcome = rng.random() < outcome_hint_p
        opening = next(str(t["text"]) for t in row["turns"] if t["role"] == "customer")
        conversations.append(dialogue_view(row, with_outcome, seed_phrasing(row["intent"], opening)))
    if max_utterances is not None and len(rows) > max_utterances:
        rows = rng.sample(rows, max_utterances)
    conversations += [
        utterance_view(r["text"], r["intent"], str(r.get("style") or ""), seed_phrasing(r["intent"], r["text"]))
        for r in rows
    ]
    for episode in episodes or ():
        view = episode_view(episode)
        if any(m["role"] == "assistant" for m in view):
            conversations.append(view)
    rng.shuffle(conversations)
    return conversations


# Stage 1.2. The drills of a model from scratch ------------------------------------------------------------------------


def copy_exercises(texts: Sequence[str], n: int, seed: int) -> list[list[dict[str, str]]]:
    """``n`` conversations ``user: text`` / ``assistant: the same text``, texts drawn with replacement.

    A copy drill: a tiny model trained from scratch does not learn to copy from its context within an SFT budget
    (its goal-conditioned openings stayed at chance faithfulness). Repeating texts it has just read is the
    plainest copy task; its loss drops sharply once the model has learned to look back and copy, and the SFT that
    follows starts from a model that can (docs/results.md, simulator_sft.copy_drill).
    """
    pool = [t.strip() for t in texts if t.strip()]
    if not pool:
        raise ValueError("copy_exercises needs at least one non-empty text")
    rng = random.Random(f"copy:{seed}")
    return [
        [{"role": "user", "content": text}, {"role": "assistant", "content": text}]
        for text in (rng.choice(pool) for _ in range(n))
    ]


def copy_drill(
    model: Any, tokenizer: Any, texts: Sequence[str], settings: SFTSettings, output_dir: Path, seed: int = 0
) -> SFTResult:
    """Phase 0 of the simulator's SFT, for a model trained from scratch: ``settings.max_steps`` optimizer steps of
    :func:`copy_exercises` over ``texts``. Without it the tiny simulator's openings stayed at chance faithfulness
    (docs/results.md)."""
    if settings.max_steps < 1:
        raise ValueError("the copy drill needs max_steps >= 1 (its exercises are drawn per step)")
    exercises = copy_exercises(texts, settings.max_steps * settings.batch_size, seed)
    return train_sft(model, tokenizer, exercises, settings, output_dir, seed=seed)


def opening_exercises(utterances: pl.DataFrame) -> list[list[dict[str, str]]]:
    """One conversation per utterance of a known intent: ``system: <intent>NAME`` / ``assistant: the text``."""
    known = set(load_taxonomy().intents)
    return [
        [
            {"role": "system", "content": intent_code(r["intent"])},
            {"role": "assistant", "content": str(r["text"]).strip()},
        ]
        for r in utterances.iter_rows(named=True)
        if r["intent"] in known and str(r["text"]).strip()
    ]


def opening_drill(
    model: Any, tokenizer: Any, utterances: pl.DataFrame, settings: SFTSettings, output_dir: Path, seed: int = 0
) -> SFTResult:
    """Phase 1, after the copy drill: :func:`opening_exercises`, every ingested utterance written from its intent's
    control code alone (~25 tokens each). Goals end with the same code, right before the customer's first turn,
    so what this drills is what rollouts ask."""
    return train_sft(model, tokenizer, opening_exercises(utterances), settings, output_dir, seed=seed)


# Stage 1.3. SFT on the customer's turns -------------------------------------------------------------------------------


def train_simulator(
    model: Any,
    tokenizer: Any,
    conversations: Sequence[Sequence[dict[str, Any]]],
    utterances: pl.DataFrame,
    settings: SimulatorSFTSettings,
    output_dir: Path,
    seed: int = 0,
    drills: bool = True,
) -> SFTResult:
    """TRACER stage 1 as the pipeline runs it: the copy drill and the opening drill (``drills``: for a model from
    config; a pretrained one reads its goal already), then SFT on ``conversations`` with the loss on the
    customer's own turns. Curves carry a ``phase`` key (0, 1, 2); ``phases`` holds each phase's result."""
    phases: dict[str, SFTResult] = {}
    if drills and settings.copy_drill is not None:
        texts = utterances["text"].to_list()
        phases["copy_drill"] = copy_drill(model, tokenizer, texts, settings.copy_drill, output_dir / "copy", seed)
        model = phases["copy_drill"].model
    if drills and settings.opening_drill is not None:
        drill = settings.opening_drill
        phases["opening_drill"] = opening_drill(model, tokenizer, utterances, drill, output_dir / "openings", seed)
        model = phases["opening_drill"].model
    phases["sft"] = train_sft(model, tokenizer, conversations, settings.sft, output_dir, seed=seed)
    return combine(phases, {"copy_drill": 0, "opening_drill": 1, "sft": 2})


# Stage 2.1. Replayed sessions -----------------------------------------------------------------------------------------


def customer_turns(episode: Episode) -> list[str]:
    """The customer's messages of an episode, as the agent read them."""
    return [str(m["content"]) for m in episode.messages if m["role"] == "user" and str(m["content"]).strip()]


def replay_scenarios(dialogues: pl.DataFrame, seed: int, n_customers: int = 6) -> list[Scenario]:
    """One scenario per dialogue with its intent, persona (``cooperative`` when unknown) and opening turn."""
    scenarios = []
    for row in dialogues.iter_rows(named=True):
        opening = next((t["text"] for t in row["turns"] if t["role"] == "customer"), "")
        persona = row["persona"] if row["persona"] in PERSONAS else "cooperative"
        utterance = {"id": row["id"], "text": opening, "intent": row["intent"], "style": "", "source": "dialogue"}
        scenarios += sample_scenarios([utterance], 1, seed, {persona: 1.0}, n_customers=n_customers)
    return scenarios


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


# Stage 2.2. Two levels of reward --------------------------------------------------------------------------------------


def simulated_outcome(episode: Episode) -> str:
    """How a simulated session ended, in the dialogues' vocabulary (resolved | escalated | abandoned)."""
    if episode.outcome.clean_end:
        return "resolved"
    if episode.ended_by == "transfer_to_human":
        return "escalated"
    return "abandoned"


def dtw_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Dynamic-time-warping distance between two sequences of L2-normalized vectors: cosine distance summed
    along the best monotone alignment, divided by the alignment's length (so it stays in [0, 2])."""
    if len(a) == 0 or len(b) == 0:
        return math.nan
    cost = 1.0 - a @ b.T
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    steps = np.zeros((n + 1, m + 1))
    acc[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            prev = min((acc[i - 1, j - 1], i - 1, j - 1), (acc[i - 1, j], i - 1, j), (acc[i, j - 1], i, j - 1))
            acc[i, j] = cost[i - 1, j - 1] + prev[0]
            steps[i, j] = steps[prev[1], prev[2]] + 1
    return float(acc[n, m] / steps[n, m])


# Stage 2.3. The hierarchical combination ------------------------------------------------------------------------------


def hierarchical_rewards(
    outcome: Sequence[float], trajectory: Sequence[float], group: int, w_out: float, w_traj: float
) -> list[float]:
    """R(g) = r_out(g) · (w_out + w_traj · m(g)) over consecutive groups, m the trajectory min-max scaled among the
    group's episodes whose ending matched (r_out = 1), ½ when they hold one value (the module's step 2.3)."""
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


# Stage 2.4. GRPO of the simulator, with its guard ---------------------------------------------------------------------


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
