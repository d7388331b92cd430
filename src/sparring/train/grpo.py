"""Multi-turn GRPO on TRL's ``GRPOTrainer``: one side trained against a frozen opponent in whole episodes. One update
reads top to bottom here, in the method's order; the trainer (config, subclasses, the update's micro-batches) is
:mod:`sparring.train.trl`'s, the forked rollout worker :mod:`sparring.train.rollout_ahead`'s.

1. Rollouts (:func:`play_groups`). TRL samples prompts (here: scenario keys) already repeated ``num_generations``
   times, consecutively. Every copy is played as a real episode with :func:`sparring.rollout.run_episodes` (the
   trained side is an :class:`~sparring.lm.policies.LMPolicy` over the trainer's current weights, sampling; the
   opponent is frozen), so a group is ONE scenario played G times with different sampling seeds: the group baseline
   compares like with like. When the agent trains, its group also shares the customer's messages until the agent's
   samples differ (:class:`~sparring.train.opponents.SharedReplies`): a sampling opponent would otherwise open every
   episode differently, and the agent's replies to different openings would be ranked against each other. With
   ``completion="first_turn"`` (the agent only) an episode stops after the agent's first message: RL-ADA's per-turn
   window on the routing decision, rewarded by the judge's ``agent_first_turn_reward``.
2. Rewards (:func:`score_episodes`) come from the judge (``sparring.judge.rewards``, RL-ADA in ../shared/SEEDS.md):
   the agent's r_DA = Σ w·outcome parts, the adversary's r_CA = won·faithfulness·realism + w_faith·faithfulness −
   w_name·named. ``dynamic_sampling`` > 0 is DAPO's dynamic sampling (Yu et al. 2025, arXiv 2503.14476;
   :func:`refill_groups`): a group whose episodes all scored alike has Â = 0 on every token and only dilutes the
   step (``dapo`` normalises by all tokens of the batch), so up to that many rounds of fresh groups are played and
   each replaces one such group if its own rewards spread.
3. Advantages: TRL applies GRPO unchanged (SEEDS.md, "GRPO: one group-normalized advantage for every token"):

       Â_g = (R_g − mean(R_group)) / (std(R_group) + ε)      for every token of completion g with env_mask = 1

   The credit rule (:func:`step_credit`): ``credit`` other than ``grpo`` replaces the one Â per completion by
   per-token advantages (:mod:`sparring.train.iapo`: IAPO's influence-graph weights Â·wᵢ, or MT-GRPO's turn +
   outcome advantages): the rollout returns them per completion and
   :func:`sparring.hf_door.token_advantage_trainer` hands TRL's loss a (B, T) advantages tensor.
4. The batch (:func:`play_batch`): each episode becomes ONE completion in the trained side's own view
   (:func:`side_sample`):

       prompt_ids     = the view up to the side's first generated token (system prompt, opening turns)
       completion_ids = the rest of the episode in that view (own turns, the opponent's turns, tool results)
       env_mask       = 1 exactly on the tokens the side generated, 0 on everything the opponent or a tool wrote
       logprobs       = the sampler's log-softmax(logits / T) at each token (0 off the side's tokens)

5. The update (:func:`train_side`), TRL's loss on that batch:

       L = − Σ_tokens min(ρ·Â, clip(ρ, 1 − ε_clip, 1 + ε_clip)·Â) / (normaliser of ``loss_type``) + β·KL(π‖π_ref)

   with ρ = π_θ/π_old per token; the loss, clipping, KL and normalisation are TRL's (``loss_type``, ``epsilon``,
   ``beta``, ``scale_rewards``); env_mask is TRL's ``tool_mask``: masked tokens carry no loss and no KL.
   ``rollout_ahead`` > 0 (:mod:`sparring.train.rollout_ahead`): that many of each step's groups are played by a
   forked worker during the step before, one update behind, and the ratio reads the sampler's log-probabilities as
   π_old (:func:`~sparring.hf_door.behaviour_logprobs_trainer`), so a gym alone on the machine keeps both cores busy.

Over 400 lines: one update read top to bottom in the method's order, with the gym it plays and the record it keeps.
"""

from __future__ import annotations

import contextlib
import functools
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparring.judge import Scorer
from sparring.lm.chat import agent_system_prompt
from sparring.lm.policies import LMPolicy, Policy
from sparring.progress import LOGGER
from sparring.rollout import Episode, run_episodes
from sparring.seeds import derive_seed
from sparring.settings import GRPOSettings
from sparring.train.iapo import InfluenceGraph, credit_batch, credit_summary, influence_graph
from sparring.train.opponents import PerEpisodeOpponent, SharedReplies
from sparring.train.rollout_ahead import Batch, BatchFunc, KeepAhead, RolloutAhead
from sparring.train.trl import (
    SCRATCH_PREFIX,
    build_trainer,
    first_rollout_call,
    on_cuda,
    prompt_indices,
    rollout_output,
    tile_to_step,
    trained_model,
    unwrapped,
)
from sparring.world.scenarios import Scenario

SIDES = ("agent", "customer")
REWARD_KEYS = {"agent": "agent_reward", "customer": "adv_reward"}  # the judge's reward of each side
FIRST_TURN_REWARD = "agent_first_turn_reward"  # the judge's reward of the agent's first turn alone
SILENT_RETRIES = 3  # rounds of fresh groups for groups the trained side never spoke in
OpponentChooser = Callable[[Scenario, int], Policy]  # (scenario, draw seed) -> the frozen opponent of one group


@dataclass
class GRPOResult:
    model: Any
    curves: list[dict[str, Any]] = field(default_factory=list)  # TRL's log history: loss, reward, grad_norm, ...
    steps: list[dict[str, float]] = field(default_factory=list)  # per rollout: reward mean/std, spread, outcomes
    seconds: float = 0.0  # whole train()
    setup_seconds: float = 0.0  # building the trainer (and its reference model's folder)
    rollout_seconds: float = 0.0  # episodes + judge, inside rollout_func
    update_tokens: int = 0  # non-pad prompt+completion tokens the updates ran forward/backward over
    trained_tokens: int = 0  # tokens with env_mask 1 (the side's own)

    @property
    def update_seconds(self) -> float:
        return max(self.seconds - self.rollout_seconds, 1e-9)

    @property
    def rollout_episodes(self) -> int:
        return int(sum(s["episodes"] for s in self.steps))

    @property
    def update_tokens_per_s(self) -> float:
        return self.update_tokens / self.update_seconds if self.update_tokens else 0.0

    def reward_stats(self) -> dict[str, float]:
        """Mean reward of the first and last rollout and over all of them; share of groups with no spread (as
        trained, and as first sampled); the sampling entropy per token at the first and the last rollout."""
        if not self.steps:
            return {}
        means = [s["reward_mean"] for s in self.steps]
        out = {
            "reward_first": means[0],
            "reward_last": means[-1],
            "reward_mean": sum(means) / len(means),
            "frac_zero_std_groups": sum(s["frac_zero_std_groups"] for s in self.steps) / len(self.steps),
        }
        if all("frac_zero_std_groups_sampled" in s for s in self.steps):
            out["frac_zero_std_groups_sampled"] = statistics.fmean(
                s["frac_zero_std_groups_sampled"] for s in self.steps
            )
        if all("sampled_entropy" in s for s in self.steps):
            out.update(
                sampled_entropy_first=self.steps[0]["sampled_entropy"],
                sampled_entropy_last=self.steps[-1]["sampled_entropy"],
            )
        return out


@dataclass(frozen=True)
class Gym:
    """One side's gym: what every rollout of it plays, against whom, and how it is scored."""

    side: str  # the trained chat role: "agent" or "customer"
    tokenizer: Any
    opponent: Policy | OpponentChooser  # a frozen policy, or one drawn per group
    scenarios: Sequence[Scenario]  # the pool DAPO's refills draw from
    judge: Scorer
    settings: GRPOSettings
    reward_key: str  # the judge's reward the side trains on
    wrap: Callable[[LMPolicy], Policy] | None  # wraps the trained policy (tests script some of its turns)
    seed: int  # every rollout's draws derive from it

    @property
    def group(self) -> int:
        return self.settings.num_generations


# 1. Rollouts: each group one scenario played G times against one frozen opponent ---------------------------------


def play_groups(gym: Gym, picked: list[Scenario], draw: int, trained: LMPolicy, model: Any) -> list[Episode]:
    """``picked``'s groups played by ``trained`` (``model``'s sampling policy, in eval mode meanwhile), each group
    against one opponent drawn from ``draw``."""
    policy: Policy = gym.wrap(trained) if gym.wrap is not None else trained
    other = group_opponents(gym, picked, draw)
    agent, customer = (policy, other) if gym.side == "agent" else (other, policy)
    first_turn = gym.settings.completion == "first_turn"
    max_turns, max_calls = (1, 1) if first_turn else (gym.settings.max_turns, gym.settings.max_calls_per_turn)
    was_training = model.training
    model.eval()
    try:
        return run_episodes(
            picked,
            agent,
            customer,
            max_turns=max_turns,
            max_calls_per_turn=max_calls,
            seed=draw,
            tokenizer=gym.tokenizer,
            agent_system=agent_system_prompt(trained if gym.side == "agent" else agent),  # a wrapper's too
        )
    finally:
        model.train(was_training)


def group_opponents(gym: Gym, picked: list[Scenario], draw: int) -> Policy:
    """The frozen opponent of ``picked``'s episodes: the gym's policy, or one drawn per group from its scenario and
    ``draw``; an agent's group shares the customer's messages until the agent's samples differ."""
    g = gym.group
    if hasattr(gym.opponent, "act"):
        other: Policy = gym.opponent  # type: ignore[assignment]
    else:  # one opponent per group, drawn from the group's scenario and seed
        chosen = [gym.opponent(picked[i], derive_seed(draw, i // g)) for i in range(len(picked))]
        other = PerEpisodeOpponent(chosen, gym.tokenizer)
    return SharedReplies(other, g) if gym.side == "agent" else other


# 2. Rewards: the judge's, and DAPO's fresh groups in place of those that cannot teach ------------------------------


def side_reward_key(side: str, settings: GRPOSettings) -> str:
    """The judge's reward a side trains on: its episode reward, or the agent's first-turn reward."""
    return FIRST_TURN_REWARD if settings.completion == "first_turn" else REWARD_KEYS[side]


def score_episodes(gym: Gym, episodes: list[Episode]) -> list[dict]:
    """The judge's rewards of ``episodes``, also kept on each episode."""
    scores = gym.judge.score(episodes)
    for ep, s in zip(episodes, scores, strict=True):
        ep.rewards = s
    return scores


def refill_groups(
    gym: Gym, episodes: list[Episode], scores: list[dict], draw: int, trained: LMPolicy, model: Any
) -> int:
    """DAPO: fresh groups played in place (in ``episodes`` and ``scores``) of those without spread, for
    ``dynamic_sampling`` rounds; always, for up to ``SILENT_RETRIES`` rounds, of groups the side never spoke in.
    Returns the episodes it played."""
    g, played = gym.group, 0
    for round_no in range(max(gym.settings.dynamic_sampling, SILENT_RETRIES)):
        refilling = round_no < gym.settings.dynamic_sampling
        dead = unusable_groups(episodes, [float(s[gym.reward_key]) for s in scores], gym.side, g, refilling)
        if not dead:
            break
        refill = derive_seed(draw, "refill", round_no)
        rng = random.Random(refill)
        fresh = [rng.choice(gym.scenarios) for _ in dead]
        more = play_groups(gym, [sc for sc in fresh for _ in range(g)], refill, trained, model)
        more_scores = score_episodes(gym, more)
        played += len(more)
        bad = set(unusable_groups(more, [float(s[gym.reward_key]) for s in more_scores], gym.side, g, refilling))
        for j in sorted(set(range(len(dead))) - bad):
            at, new = slice(dead[j] * g, (dead[j] + 1) * g), slice(j * g, (j + 1) * g)
            episodes[at], scores[at] = more[new], more_scores[new]
    return played


def unusable_groups(
    episodes: Sequence[Episode], rewards: Sequence[float], side: str, g: int, spread: bool
) -> list[int]:
    """Groups to play again: those in which ``side`` generated no token in some episode (a customer who left before
    the agent spoke), and with ``spread`` those whose rewards all agree."""
    own = "agent_mask" if side == "agent" else "customer_self_mask"
    silent = {i // g for i, ep in enumerate(episodes) if 1 not in getattr(ep, own)}
    return sorted(silent | (set(zero_spread_groups(rewards, g)) if spread else set()))


def zero_spread_groups(rewards: Sequence[float], g: int) -> list[int]:
    """The indices of the consecutive groups of ``g`` rewards that all scored alike: GRPO's advantage is 0 there."""
    return [
        i
        for i in range(len(rewards) // g)
        if max(rewards[i * g : (i + 1) * g]) - min(rewards[i * g : (i + 1) * g]) < 1e-9
    ]


# 3. Advantages: GRPO's group baseline (TRL's), and the credit rule that spreads Â over the tokens -----------------


def mean_abs_advantage(rewards: Sequence[float], g: int, scale: str) -> float:
    """Mean |Â| over a step's episodes as TRL computes Â: R − mean(R_group), divided by the group's std
    (``scale="group"``), the batch's (``"batch"``) or nothing (``"none"``), with TRL's ε = 1e-4."""
    import numpy as np

    r = np.asarray(rewards, dtype=float).reshape(-1, g)
    centred = r - r.mean(axis=1, keepdims=True)
    if scale == "group":
        centred /= r.std(axis=1, ddof=1, keepdims=True) + 1e-4
    elif scale == "batch":
        centred /= r.std(ddof=1) + 1e-4
    return float(np.abs(centred).mean())


def step_credit(
    gym: Gym, episodes: list[Episode], scores: list[dict], samples: list[dict]
) -> tuple[list[Any] | None, list[InfluenceGraph] | None]:
    """Per completion, what the credit rule turns TRL's Â into token advantages with (None under ``grpo``: Â on
    every token), returned as ``token_credit``; and IAPO's influence graphs (None under the other rules)."""
    settings = gym.settings
    if settings.credit == "grpo":
        return None, None
    turn = [float(s.get(FIRST_TURN_REWARD, 0.0)) for s in scores] if settings.credit == "mt_grpo" else []
    own = [s["env_mask"] for s in samples]
    graphs = None
    if settings.credit == "iapo":  # built once: the credit and the step's record read the same graphs
        graphs = [influence_graph(ep, gym.side, o) for ep, o in zip(episodes, own, strict=True)]
    return credit_batch(episodes, own, gym.side, settings, turn, gym.group, graphs=graphs), graphs


# 4. The batch: rollout, rewards and credit of one step, each episode one completion in TRL's format --------------


def side_sample(episode: Episode, side: str) -> dict[str, list]:
    """One completion in ``side``'s view: prompt up to its first generated token, the rest as completion."""
    if side == "agent":
        ids, own, logp = episode.token_ids, episode.agent_mask, episode.agent_logprobs
    elif side == "customer":
        ids, own, logp = episode.customer_token_ids, episode.customer_self_mask, episode.customer_logprobs
    else:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if 1 not in own:
        raise ValueError(f"the {side} generated no token in episode {episode.scenario.scenario_id}")
    start = own.index(1)
    return {
        "prompt_ids": list(ids[:start]),
        "completion_ids": list(ids[start:]),
        "env_mask": list(own[start:]),
        "logprobs": [float(x) for x in logp[start:]],
    }


def play_batch(gym: Gym, picked: list[Scenario], call: int, model: Any, part: str = "") -> Batch:
    """Rollout number ``call`` of the gym (its draws derive from the gym's seed, ``call`` and a named ``part`` of
    the call): ``picked``'s groups played by ``model``'s sampling policy, scored and credited, in TRL's
    ``rollout_func`` answer, with its stats row."""
    t0 = time.perf_counter()
    draw = derive_seed(gym.seed, gym.side, call, part) if part else derive_seed(gym.seed, gym.side, call)
    settings = gym.settings
    trained = LMPolicy(
        model, gym.tokenizer, gym.side, max_new_tokens=settings.max_new_tokens, temperature=settings.temperature
    )
    episodes = play_groups(gym, picked, draw, trained, model)
    scores = score_episodes(gym, episodes)
    sampled_zero = len(zero_spread_groups([float(s[gym.reward_key]) for s in scores], gym.group))
    played = len(episodes) + refill_groups(gym, episodes, scores, draw, trained, model)
    samples = [side_sample(ep, gym.side) for ep in episodes]
    rewards = [float(s[gym.reward_key]) for s in scores]
    credit, graphs = step_credit(gym, episodes, scores, samples)
    row = step_stats(episodes, scores, rewards, samples, gym.group, time.perf_counter() - t0)
    row.update(episodes_played=played, frac_zero_std_groups_sampled=sampled_zero / (len(episodes) // gym.group))
    if graphs and gym.side == "agent":  # what the graph held: is there anything to route?
        held = credit_summary(graphs, settings.iapo_beta_plus, settings.iapo_clip)
        row.update({f"iapo_{k}": v for k, v in held.items() if k != "episodes"})
    row["adv_abs_mean"] = mean_abs_advantage(rewards, gym.group, settings.scale_rewards)
    columns = {key: [s[key] for s in samples] for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask")}
    return rollout_output(**columns, rewards=rewards, credit=credit), row


def step_stats(
    episodes: list[Episode], scores: list[dict], rewards: list[float], samples: list[dict], g: int, seconds: float
) -> dict[str, float]:
    """A step's stats row: its rewards and their spread per group, outcomes, tokens, entropy and play time."""
    groups = [rewards[i : i + g] for i in range(0, len(rewards), g)]
    n = len(episodes)
    return {
        "episodes": n,
        "reward_mean": statistics.fmean(rewards),
        "reward_std": statistics.pstdev(rewards),
        "frac_zero_std_groups": sum(max(gr) - min(gr) < 1e-9 for gr in groups) / len(groups),
        "strict_pass": sum(ep.outcome.strict_pass for ep in episodes) / n,
        "adv_misroute": sum(s.get("adv_misroute", 0.0) for s in scores) / n,
        "update_tokens": sum(len(s["prompt_ids"]) + len(s["completion_ids"]) for s in samples),
        "trained_tokens": sum(sum(s["env_mask"]) for s in samples),
        "sampled_entropy": sampled_entropy(samples),
        "play_s": seconds,  # the batch's own play; rollout_s: what the step waited for it
    }


def sampled_entropy(samples: Sequence[dict[str, list]]) -> float:
    """The sampling policy's entropy per token (nats), estimated as the mean −log p of the tokens it sampled over
    the side's own tokens (``env_mask`` 1): E_{x~p}[−log p(x)] = H(p), with p the tempered distribution it drew
    from. Falling steps thin GRPO's signal (issue 75)."""
    nll = [-lp for s in samples for lp, own in zip(s["logprobs"], s["env_mask"], strict=True) if own]
    return statistics.fmean(nll) if nll else 0.0


def make_batch_func(
    side: str,
    tokenizer: Any,
    opponent: Policy | OpponentChooser,
    scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: GRPOSettings,
    *,
    reward_key: str | None = None,
    wrap: Callable[[LMPolicy], Policy] | None = None,
    seed: int = 0,
) -> BatchFunc:
    """``batch(picked, call, model, part="")``: :func:`play_batch` of ``side``'s gym. ``scenarios`` are the pool
    DAPO's refills draw from."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if settings.completion == "first_turn" and side != "agent":
        raise ValueError("completion first_turn trains the agent's routing turn; the customer trains on episodes")
    key = reward_key or side_reward_key(side, settings)
    return functools.partial(play_batch, Gym(side, tokenizer, opponent, scenarios, judge, settings, key, wrap, seed))


def make_rollout_func(
    side: str,
    tokenizer: Any,
    opponent: Policy | OpponentChooser,
    scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: GRPOSettings,
    *,
    reward_key: str | None = None,
    record: list[dict[str, float]] | None = None,
    wrap: Callable[[LMPolicy], Policy] | None = None,
    seed: int = 0,
) -> Callable[[list[Any], Any], dict[str, list]]:
    """TRL's ``rollout_func(prompts, trainer)`` for ``side``. Prompts are ``"<index>|<scenario_id>"`` keys into
    ``scenarios``, in groups of ``num_generations`` equal keys. ``record`` collects one stats row per call;
    ``wrap`` wraps the trained policy (tests script some of its turns)."""
    batch = make_batch_func(side, tokenizer, opponent, scenarios, judge, settings, reward_key=reward_key, wrap=wrap,
                            seed=seed)  # fmt: skip
    calls = [0]

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list]:
        t0 = time.perf_counter()
        picked = [scenarios[i] for i in prompt_indices(prompts, settings.num_generations)]
        if calls[0] == 0:  # a resumed trainer: its rollouts' draws go on from the step it resumed at
            calls[0] = first_rollout_call(trainer, settings.num_iterations)
        output, row = batch(picked, calls[0], unwrapped(trainer))
        calls[0] += 1
        if record is not None:
            record.append({**row, "rollout_s": time.perf_counter() - t0})
        return output

    return rollout


# 5. The update: TRL's GRPOTrainer on each step's batch ------------------------------------------------------------


def train_side(
    model: Any,
    tokenizer: Any,
    side: str,
    opponent: Policy | OpponentChooser,
    scenarios: Sequence[Scenario],
    judge: Scorer,
    settings: GRPOSettings,
    output_dir: Path | None = None,
    *,
    seed: int = 0,
    reward_key: str | None = None,
    wrap: Callable[[LMPolicy], Policy] | None = None,
    report_to: Sequence[str] = (),
    callbacks: Sequence[Any] = (),
    save_every: int = 0,
    resume_from: Path | None = None,
) -> GRPOResult:
    """Train ``side`` (the chat role: "agent" or "customer") of ``model`` with GRPO against a frozen ``opponent``: a
    policy, or ``(scenario, seed) -> policy`` drawn once per group. Each step plays ``scenarios_per_step`` of
    ``scenarios`` (shuffled with ``seed``) x ``num_generations`` episodes, rewarded by the judge's ``reward_key``
    (default: the side's). ``output_dir``: the trainer's scratch (a temporary folder when None; the caller saves
    the model). ``wrap`` wraps the trained policy in every rollout. Deterministic in ``seed`` on CPU. With
    ``save_every`` the trainer checkpoints into ``output_dir`` every that many steps; ``resume_from`` (one of those
    checkpoints) goes on from it to the weights an uninterrupted run reaches."""
    if not scenarios:
        raise ValueError("no scenarios to train on")
    pool = tile_to_step(scenarios, settings.scenarios_per_step)
    random.Random(seed).shuffle(pool)
    record: list[dict[str, float]] = []
    if settings.rollout_ahead and on_cuda():
        LOGGER.warning("rollout_ahead forks a CPU worker and CUDA does not survive a fork: every group plays here")
        settings = settings.replace(rollout_ahead=0)
    gym = (side, tokenizer, opponent, pool, judge, settings)
    ahead = None
    if settings.rollout_ahead:  # part of the next step's groups played by a forked worker while this step runs
        batch = make_batch_func(*gym, reward_key=reward_key, wrap=wrap, seed=seed)
        ahead = RolloutAhead(batch, model, pool, settings.scenarios_per_step, settings.num_generations,
                             settings.rollout_ahead, settings.num_iterations, seed, record)  # fmt: skip
        callbacks = [*callbacks, KeepAhead(ahead)]
    rollout = ahead or make_rollout_func(*gym, reward_key=reward_key, record=record, wrap=wrap, seed=seed)
    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX) as scratch, ahead or contextlib.nullcontext():
        out = Path(output_dir) if output_dir is not None else Path(scratch)
        setup = time.perf_counter()
        trainer = build_trainer(model, tokenizer, rollout, len(pool), settings, out,
                                reward_name=reward_key or side_reward_key(side, settings), report_to=report_to,
                                callbacks=callbacks, seed=seed, save_every=save_every)  # fmt: skip
        if ahead is not None and resume_from and not ahead.resume_from(resume_from):
            LOGGER.warning(f"{resume_from} kept no batch played ahead: its first step plays one on-policy")
        start = time.perf_counter()
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
        seconds = time.perf_counter() - start
    return side_result(trainer, record, resume_from, seconds, start - setup)


def side_result(
    trainer: Any, record: list[dict[str, float]], resume_from: Path | None, seconds: float, setup_seconds: float
) -> GRPOResult:
    """What a finished trainer trained and logged, its rollouts' rows numbered by step (after ``resume_from``'s)."""
    trained = trained_model(trainer)
    resumed = int(Path(resume_from).name.rsplit("-", 1)[-1]) if resume_from else 0  # checkpoint-<step>
    for i, row in enumerate(record):
        row["step"] = resumed + i + 1
    return GRPOResult(
        model=trained,
        curves=list(trainer.state.log_history),
        steps=record,
        seconds=seconds,
        setup_seconds=setup_seconds,
        rollout_seconds=sum(r["rollout_s"] for r in record),
        update_tokens=int(sum(r["update_tokens"] for r in record)),
        trained_tokens=int(sum(r["trained_tokens"] for r in record)),
    )
