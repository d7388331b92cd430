"""Multi-turn GRPO on TRL's ``GRPOTrainer``: one side trained against a frozen opponent in whole episodes.

TRL samples prompts (here: scenario keys) already repeated ``num_generations`` times, consecutively. Our
``rollout_func`` plays every copy as a real episode with :func:`sparring.rollout.run_episodes` (the trained side
is an :class:`~sparring.lm.policies.LMPolicy` over the trainer's current weights, sampling; the opponent is
frozen), so a group is ONE scenario played G times with different sampling seeds: the group baseline compares like
with like. When the agent trains, its group also shares the customer's messages until the agent's samples differ
(:class:`~sparring.train.opponents.SharedReplies`): a sampling opponent would otherwise open every episode
differently, and the agent's replies to different openings would be ranked against each other. Each episode
becomes ONE completion in the trained side's own view:

    prompt_ids     = the view up to the side's first generated token (system prompt, opening turns)
    completion_ids = the rest of the episode in that view (own turns, the opponent's turns, tool results)
    env_mask       = 1 exactly on the tokens the side generated, 0 on everything the opponent or a tool wrote
    logprobs       = the sampler's log-softmax(logits / T) at each token (0 off the side's tokens)

With ``completion="first_turn"`` (the agent only) an episode stops after the agent's first message: RL-ADA's
per-turn window on the routing decision, rewarded by the judge's ``agent_first_turn_reward``.

Rewards come from the judge (``sparring.judge.rewards``, RL-ADA in ../shared/SEEDS.md): the agent's
r_DA = Σ w·outcome parts, the adversary's r_CA = won·faithfulness·realism + w_faith·faithfulness − w_name·named.
TRL then applies GRPO unchanged (SEEDS.md, "GRPO: one group-normalized advantage for every token"):

    Â_g = (R_g − mean(R_group)) / (std(R_group) + ε)      for every token of completion g with env_mask = 1
    L   = − Σ_tokens min(ρ·Â, clip(ρ, 1 − ε_clip, 1 + ε_clip)·Â) / (normaliser of ``loss_type``) + β·KL(π‖π_ref)

with ρ = π_θ/π_old per token; the loss, clipping, KL and normalisation are TRL's (``loss_type``, ``epsilon``,
``beta``, ``scale_rewards``); env_mask is TRL's ``tool_mask``: masked tokens carry no loss and no KL.
``credit`` other than ``grpo`` replaces the one Â per completion by per-token advantages (:mod:`sparring.train.iapo`:
IAPO's influence-graph weights Â·wᵢ, or MT-GRPO's turn + outcome advantages): the rollout returns them per
completion and :func:`sparring.hf_door.token_advantage_trainer` hands TRL's loss a (B, T) advantages tensor; the
loss stays TRL's. The pieces every TRL gym shares (tiling, unwrapping, the rollout's answer) are
:mod:`sparring.train.trl`'s; TRL's private names are touched in :mod:`sparring.hf_door` only.
``dynamic_sampling`` > 0 is DAPO's dynamic sampling (Yu et al. 2025, arXiv 2503.14476): a group whose episodes all
scored alike has Â = 0 on every token and only dilutes the step (``dapo`` normalises by all tokens of the batch),
so up to that many rounds of fresh groups are played and each replaces one such group if its own rewards spread.
CPU settings as DESIGN.md measured: ``use_cpu=True, bf16=False, activation_checkpointing=False, report_to=[]``.
The update (:func:`make_update_trainer`) runs TRL's loss on the step's episodes sorted by length into micro-batches
without their all-padding columns, and on CPU the LM head on the loss's tokens only: the same loss and gradients
(tests/test_grpo_update.py), at more tokens/s than TRL's one padded batch (benchmarks/grpo_throughput.py;
docs/results.md, "GRPO updates at SFT's throughput").
``rollout_ahead`` > 0 (:mod:`sparring.train.rollout_ahead`): that many of each step's groups are played by a forked
worker during the step before, one update behind, and the ratio reads the sampler's log-probabilities as π_old
(:func:`~sparring.hf_door.behaviour_logprobs_trainer`), so a gym alone on the machine keeps both cores busy.
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparring.hf_door import behaviour_logprobs_trainer, model_folder, point_reference_at
from sparring.judge import Scorer
from sparring.lm.chat import agent_system_prompt
from sparring.lm.models import is_peft
from sparring.lm.policies import LMPolicy, Policy
from sparring.progress import LOGGER
from sparring.rollout import Episode, run_episodes
from sparring.seeds import derive_seed
from sparring.settings import GRPOSettings
from sparring.train.iapo import credit_batch, credit_summary, influence_graph, make_credit_trainer
from sparring.train.lm_head import LossTokensHead, plain_head
from sparring.train.opponents import PerEpisodeOpponent, SharedReplies
from sparring.train.rollout_ahead import BatchFunc, KeepAhead, RolloutAhead
from sparring.train.trl import (
    first_rollout_call,
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
SCRATCH_PREFIX = "sparring-grpo-"  # train_side's temporary trainer folder
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


def side_reward_key(side: str, settings: GRPOSettings) -> str:
    """The judge's reward a side trains on: its episode reward, or the agent's first-turn reward."""
    return FIRST_TURN_REWARD if settings.completion == "first_turn" else REWARD_KEYS[side]


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


# Over 60 lines: one closure over the episode settings; its body reads as one step's batch.
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
    """``batch(picked, call, model, part="")``: rollout number ``call`` of ``side``'s gym (its draws derive from
    ``seed``, ``call`` and a named ``part`` of the call), ``picked``'s groups of ``num_generations`` played by
    ``model``'s sampling policy and scored, in TRL's ``rollout_func`` answer, with its stats row. ``scenarios``
    are the pool DAPO's refills draw from."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    first_turn = settings.completion == "first_turn"
    if first_turn and side != "agent":
        raise ValueError("completion first_turn trains the agent's routing turn; the customer trains on episodes")
    key = reward_key or side_reward_key(side, settings)
    turns = (1, 1) if first_turn else (settings.max_turns, settings.max_calls_per_turn)
    g = settings.num_generations

    def play(picked: list[Scenario], draw: int, trained: LMPolicy, model: Any) -> tuple[list[Episode], list[dict]]:
        """``picked``'s groups played and scored, each group against one opponent drawn from ``draw``."""
        policy: Policy = wrap(trained) if wrap is not None else trained
        if hasattr(opponent, "act"):
            other: Policy = opponent  # type: ignore[assignment]
        else:  # one opponent per group, drawn from the group's scenario and seed
            chosen = [opponent(picked[i], derive_seed(draw, i // g)) for i in range(len(picked))]
            other = PerEpisodeOpponent(chosen, tokenizer)
        if side == "agent":
            other = SharedReplies(other, g)
        agent, customer = (policy, other) if side == "agent" else (other, policy)
        was_training = model.training
        model.eval()
        try:
            episodes = run_episodes(
                picked,
                agent,
                customer,
                max_turns=turns[0],
                max_calls_per_turn=turns[1],
                seed=draw,
                tokenizer=tokenizer,
                agent_system=agent_system_prompt(trained if side == "agent" else agent),  # a wrapper's too
            )
        finally:
            model.train(was_training)
        scores = judge.score(episodes)
        for ep, s in zip(episodes, scores, strict=True):
            ep.rewards = s
        return episodes, scores

    def batch(
        picked: list[Scenario], call: int, model: Any, part: str = ""
    ) -> tuple[dict[str, list], dict[str, float]]:
        t0 = time.perf_counter()
        draw = derive_seed(seed, side, call, part) if part else derive_seed(seed, side, call)  # a part: its own draws
        trained = LMPolicy(
            model, tokenizer, side, max_new_tokens=settings.max_new_tokens, temperature=settings.temperature
        )
        episodes, scores = play(picked, draw, trained, model)
        sampled_zero = len(zero_spread_groups([float(s[key]) for s in scores], g))
        played = len(episodes)
        # DAPO: fresh groups in place of those without spread; always in place of groups the side never spoke in
        for round_no in range(max(settings.dynamic_sampling, SILENT_RETRIES)):
            refilling = round_no < settings.dynamic_sampling
            dead = unusable_groups(episodes, [float(s[key]) for s in scores], side, g, refilling)
            if not dead:
                break
            refill = derive_seed(draw, "refill", round_no)
            rng = random.Random(refill)
            fresh = [rng.choice(scenarios) for _ in dead]
            more, more_scores = play([sc for sc in fresh for _ in range(g)], refill, trained, model)
            played += len(more)
            bad = set(unusable_groups(more, [float(s[key]) for s in more_scores], side, g, refilling))
            for j in sorted(set(range(len(dead))) - bad):
                at, new = slice(dead[j] * g, (dead[j] + 1) * g), slice(j * g, (j + 1) * g)
                episodes[at], scores[at] = more[new], more_scores[new]
        samples = [side_sample(ep, side) for ep in episodes]
        rewards = [float(s[key]) for s in scores]
        credit = graphs = None
        if settings.credit != "grpo":  # per-token weights, returned as token_credit (iapo.make_credit_trainer)
            turn = [float(s.get(FIRST_TURN_REWARD, 0.0)) for s in scores] if settings.credit == "mt_grpo" else []
            own = [s["env_mask"] for s in samples]
            if settings.credit == "iapo":  # built once: the credit and the step's record read the same graphs
                graphs = [influence_graph(ep, side, o) for ep, o in zip(episodes, own, strict=True)]
            credit = credit_batch(episodes, own, side, settings, turn, g, graphs=graphs)
        stats = _stats(episodes, scores, rewards, samples, g, time.perf_counter() - t0)
        extra = {"episodes_played": played, "frac_zero_std_groups_sampled": sampled_zero / (len(episodes) // g)}
        if graphs and side == "agent":  # what the graph held: is there anything to route?
            held = credit_summary(graphs, settings.iapo_beta_plus, settings.iapo_clip)
            extra.update({f"iapo_{k}": v for k, v in held.items() if k != "episodes"})
        row = {**stats, **extra, "adv_abs_mean": mean_abs_advantage(rewards, g, settings.scale_rewards)}
        return rollout_output(
            [s["prompt_ids"] for s in samples],
            [s["completion_ids"] for s in samples],
            [s["logprobs"] for s in samples],
            [s["env_mask"] for s in samples],
            rewards,
            credit,
        ), row

    return batch


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


def _stats(
    episodes: list[Episode], scores: list[dict], rewards: list[float], samples: list[dict], g: int, seconds: float
) -> dict[str, float]:
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


def _reward_func(name: str) -> Callable[..., list[float]]:
    def reward(prompts: list[Any], completions: list[Any], side_reward: list[float], **_: Any) -> list[float]:
        return [float(r) for r in side_reward]

    reward.__name__ = name  # TRL logs rewards/<name>/mean
    return reward


def grpo_config(
    settings: GRPOSettings, output_dir: Path, report_to: Sequence[str] = (), seed: int = 0, save_every: int = 0
) -> Any:
    """The ``GRPOConfig`` of ``settings``: one generation batch (= G x scenarios_per_step episodes) per step;
    ``save_every`` > 0 checkpoints the trainer (weights, optimizer, scheduler, RNG) every that many steps."""
    from trl import GRPOConfig

    cuda = _cuda()
    batch = settings.num_generations * settings.scenarios_per_step
    return GRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=batch // settings.gradient_accumulation_steps,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        num_generations=settings.num_generations,
        max_steps=settings.max_steps,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_steps,
        lr_scheduler_type=settings.lr_scheduler,
        max_grad_norm=settings.max_grad_norm,
        adam_beta2=settings.adam_beta2,
        beta=settings.beta,
        epsilon=settings.epsilon,
        epsilon_high=settings.epsilon_high,
        num_iterations=settings.num_iterations,
        loss_type=settings.loss_type,
        scale_rewards=settings.scale_rewards,
        temperature=settings.temperature,
        # dr_grpo's normaliser: the most tokens a side can generate in one episode.
        max_completion_length=settings.max_turns * settings.max_calls_per_turn * settings.max_new_tokens,
        logging_steps=settings.logging_steps,
        seed=seed,
        data_seed=seed,
        use_cpu=not cuda,
        bf16=cuda,
        activation_checkpointing=False,
        save_strategy="steps" if save_every else "no",
        save_steps=save_every or 500,
        save_total_limit=2 if save_every else None,  # the last two: a kill mid-save leaves the one before whole
        report_to=list(report_to),
        dataloader_num_workers=0,
        disable_tqdm=True,
        log_completions=False,
    )


# The update: TRL's loss on length-bucketed micro-batches, the LM head on the loss's tokens only -------------------

BUCKET_OVERHEAD = 64  # positions one more micro-batch costs (its fixed per-call work), in length_buckets' sum
MOST_BUCKETS = 8
ROW_MEAN_LOSSES = ("grpo", "sapo", "luspo", "dr_grpo")  # TRL averages these over the batch's rows
TOKEN_MEAN_LOSSES = ("bnpo",)  # over the batch's loss tokens
GLOBAL_LOSSES = ("dapo", "cispo", "vespo")  # over num_items_in_batch (the generation batch's): a part adds as it is
PROMPT_KEYS = ("prompt_ids", "prompt_mask")  # left-padded; every other (B, T) tensor is the right-padded completion
UPDATE_KEYS = frozenset(
    (*PROMPT_KEYS, "completion_ids", "completion_mask", "tool_mask", "advantages", "num_items_in_batch")
    + ("old_per_token_logps", "sampling_per_token_logps", "ref_per_token_logps", "importance_sampling_ratio")
)


def length_buckets(
    prompt_lengths: Sequence[int],
    completion_lengths: Sequence[int],
    most: int = MOST_BUCKETS,
    overhead: int = BUCKET_OVERHEAD,
) -> list[list[int]]:
    """The batch's rows sorted by length and cut into the number (1..``most``) of contiguous, near-equal groups
    that runs the fewest positions: a group pads to its longest prompt plus its longest completion (TRL's
    layout), and each group costs ``overhead`` positions more."""
    n = len(prompt_lengths)
    order = sorted(range(n), key=lambda i: (prompt_lengths[i] + completion_lengths[i], prompt_lengths[i]))
    best: tuple[int, list[list[int]]] | None = None
    for k in range(1, min(most, n) + 1):
        groups = [order[j * n // k : (j + 1) * n // k] for j in range(k)]
        cost = overhead * k + sum(
            len(g) * (max(prompt_lengths[i] for i in g) + max(completion_lengths[i] for i in g)) for g in groups
        )
        if best is None or cost < best[0]:
            best = (cost, groups)
    return best[1] if best else []


def bucket_inputs(inputs: dict[str, Any], rows: Sequence[int]) -> dict[str, Any]:
    """``rows`` of a GRPO batch (as TRL's trainer scored it for its loss), without the columns that are
    padding in every one of them: the prompt's left and the completion's right."""
    import torch

    batch, width = inputs["prompt_ids"].size(0), inputs["completion_ids"].size(1)
    index = torch.tensor(list(rows), device=inputs["prompt_ids"].device)
    prompt = int(inputs["prompt_mask"][index].sum(1).max())
    completion = int(inputs["completion_mask"][index].sum(1).max())
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        if torch.is_tensor(value) and value.dim() >= 1 and value.size(0) == batch:
            value = value[index]
            if key in PROMPT_KEYS:
                value = value[:, value.size(1) - prompt :]
            elif value.dim() == 2 and value.size(1) == width:
                value = value[:, :completion]
        out[key] = value
    return out


def bucket_weight(loss_type: str, inputs: dict[str, Any], rows: Sequence[int]) -> Any:
    """What a part's loss is worth in the whole batch's: TRL's row means weigh it by its rows, its token mean by
    its loss tokens; the losses over the generation batch's token count add as they are."""
    if loss_type in ROW_MEAN_LOSSES:
        return len(rows) / inputs["prompt_ids"].size(0)
    if loss_type in TOKEN_MEAN_LOSSES:
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        return mask[list(rows)].sum() / mask.sum().clamp(min=1.0)
    return 1.0


def make_update_trainer(base: type) -> type:
    """``base`` (TRL's ``GRPOTrainer`` or a subclass) whose update runs TRL's loss, clipping and normalisation
    unchanged on less padding and fewer LM-head positions, through ``compute_loss`` (Trainer's public hook):

    - the batch's episodes sorted by length into micro-batches (:func:`length_buckets`), each trimmed of the
      columns that are padding in all of its rows, their losses weighted back into the batch's
      (:func:`bucket_weight`; one backward, so gradients are the batch's too). TRL pads a step's episodes to the
      longest prompt plus the longest completion, so short episodes paid for the longest one's positions;
    - on CPU (TRL then scores every position of the LM head), the head only on the loss's tokens
      (:class:`LossTokensHead`), for a plain model (a peft one keeps TRL's head).

    Whatever it does not cover (several processes; an entropy bonus or quantile mask, which read the whole batch;
    MoE aux loss; multimodal inputs; loss types it does not know) goes to TRL's path as before."""

    class UpdateTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            import torch

            if return_outputs or not self._buckets_exact(inputs):
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            groups = length_buckets(inputs["prompt_mask"].sum(1).tolist(), inputs["completion_mask"].sum(1).tolist())
            total = None
            for rows in groups:
                part = bucket_inputs(inputs, rows)
                runner = model
                if self._head_on_loss_tokens(model):
                    mask = part["completion_mask"] * part.get("tool_mask", 1)
                    keep = torch.cat([torch.zeros_like(part["prompt_mask"]), mask.to(part["prompt_mask"].dtype)], 1)
                    runner = LossTokensHead(model, keep, self.args.temperature)
                loss = super().compute_loss(runner, part, num_items_in_batch=num_items_in_batch)
                loss = loss * bucket_weight(self.args.loss_type, inputs, rows)
                total = loss if total is None else total + loss
            return total

        def _buckets_exact(self, inputs: dict[str, Any]) -> bool:
            args = self.args
            return (
                self.accelerator.num_processes == 1  # DDP and DeepSpeed expect one forward per backward
                and set(inputs) <= UPDATE_KEYS
                and args.loss_type in (*ROW_MEAN_LOSSES, *TOKEN_MEAN_LOSSES, *GLOBAL_LOSSES)
                and args.top_entropy_quantile >= 1.0
                and not args.entropy_coef
                and not args.use_adaptive_entropy
                and not getattr(self, "aux_loss_enabled", False)
            )

        def _head_on_loss_tokens(self, model: Any) -> bool:
            device = next(model.parameters()).device
            return (
                device.type == "cpu"
                and not is_peft(model)
                and not self.args.cast_lm_head_to_fp32
                and plain_head(model.config)
            )

    return UpdateTrainer


def build_trainer(
    model: Any,
    tokenizer: Any,
    rollout_func: Callable[[list[Any], Any], dict[str, list]],
    n_prompts: int,
    settings: GRPOSettings,
    output_dir: Path,
    *,
    reward_name: str = "reward",
    report_to: Sequence[str] = (),
    callbacks: Sequence[Any] = (),
    seed: int = 0,
    save_every: int = 0,
) -> Any:
    """A ``GRPOTrainer`` over ``n_prompts`` prompt keys ``"<i>|"``-prefixed; rewards reach it as ``side_reward``."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from sparring.lm.added_rows import base_rows_callbacks
    from sparring.progress import trainer_progress

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental" in TRL 1.16
    if settings.beta and not is_peft(model) and not _loadable(model):
        # TRL builds the KL reference from the model's folder: give a from-config model one (its start weights).
        # A peft model needs none: TRL keeps its start adapter as a frozen "ref" adapter (dropped after training).
        ref = Path(output_dir) / "reference"
        model.save_pretrained(ref, safe_serialization=True)
        point_reference_at(model, str(ref))
    dataset = Dataset.from_list([{"prompt": f"{i}|"} for i in range(n_prompts)])
    # One trainer class: per-token advantages when the rollout returns token_credit, TRL's Â otherwise.
    base = behaviour_logprobs_trainer(GRPOTrainer) if settings.rollout_ahead else GRPOTrainer
    trainer_class = make_update_trainer(make_credit_trainer(base))
    args = grpo_config(settings, output_dir, report_to, seed, save_every)
    return trainer_class(
        model=model,
        reward_funcs=[_reward_func(reward_name)],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout_func,
        callbacks=[
            *callbacks,
            *base_rows_callbacks(model, args.weight_decay),
            trainer_progress(_label(reward_name, output_dir)),
        ],
    )


def _label(reward_name: str, output_dir: Path) -> str:
    """What a GRPO trainer's progress lines are called: its reward, and its folder unless that is train_side's
    temporary scratch (a peer member's folder is its name)."""
    folder = Path(output_dir).name
    return f"GRPO {reward_name}" if folder.startswith(SCRATCH_PREFIX) else f"GRPO {reward_name} {folder}"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _loadable(model: Any) -> bool:
    name = model_folder(model)
    return bool(name) and Path(name).is_dir()


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
    if settings.rollout_ahead and _cuda():
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
        trainer = build_trainer(
            model,
            tokenizer,
            rollout,
            len(pool),
            settings,
            out,
            reward_name=reward_key or side_reward_key(side, settings),
            report_to=report_to,
            callbacks=callbacks,
            seed=seed,
            save_every=save_every,
        )
        if ahead is not None and resume_from and not ahead.resume_from(resume_from):
            LOGGER.warning(f"{resume_from} kept no batch played ahead: its first step plays one on-policy")
        start = time.perf_counter()
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
        seconds = time.perf_counter() - start
    trained = trained_model(trainer)
    resumed = int(Path(resume_from).name.rsplit("-", 1)[-1]) if resume_from else 0  # checkpoint-<step>
    for i, row in enumerate(record):
        row["step"] = resumed + i + 1
    return GRPOResult(
        model=trained,
        curves=list(trainer.state.log_history),
        steps=record,
        seconds=seconds,
        setup_seconds=start - setup,
        rollout_seconds=sum(r["rollout_s"] for r in record),
        update_tokens=int(sum(r["update_tokens"] for r in record)),
        trained_tokens=int(sum(r["trained_tokens"] for r in record)),
    )
