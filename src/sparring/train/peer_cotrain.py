"""Co-training in exact expectation (Co-RL's cohort form, ../shared/SEEDS.md; Blum & Mitchell 1998): routers of
similar accuracy whose errors differ label the unlabeled pool together, and each learns from that label.

For an utterance x every member k scores the intents once (:func:`~sparring.train.peer_expectation.score_intents`),
Q_k(a | x) over A (its unparseable outcome dropped, renormalised). Each round:

1. The cohort's joint vote over the members ``views`` holds (every member, or the others only):
   J(a | x) ∝ Π_k Q_k(a | x) (the product of experts: a label the members' different errors do not share wins), the
   label ŷ(x) = argmax_a J(a | x), its confidence c(x) = max_a J(a | x).
2. The confidence filter: only the ``keep`` share of the pool with the highest c(x) is labelled; the rest is skipped
   (its joint label is the least often right: measured on Banking77, the top half of DA0's own is 0.81, the whole 0.57).
3. Each learner maximises E_{a ~ P}[1[a = ŷ(x)]] in exact expectation for ``refresh_steps`` steps
   (:func:`~sparring.train.peer_expectation.train_expected`, the ``teacher`` reward: the step −μ/sg(σ)).
4. The labels are recomputed from the members' current weights (co-training's refresh) until ``max_steps``.

The pool's own labels, where it has any, are monitored only: they never reach a trainer. A member whose last votes
collapse (:class:`~sparring.train.peer_reward.CollapseGuard`) is frozen from then on and reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from sparring.lm.chat import known_intents
from sparring.settings import PeerRewardSettings
from sparring.train.peer_expectation import routing_prompts, score_intents, train_expected
from sparring.train.peer_reward import CohortResult, CollapseGuard, Label, MemberLog


def joint_votes(
    logprobs: Sequence[torch.Tensor], intents: Sequence[str], keep: float
) -> tuple[list[Label], torch.Tensor]:
    """Step 1-2: the product of the members' intent distributions (``logprobs``, each (n, |A|) log Q_k), its label
    per utterance (None outside the ``keep`` share most confident) and its confidence (n,)."""
    if not logprobs:
        raise ValueError("a joint vote needs at least one member's view")
    joint = torch.log_softmax(torch.stack(list(logprobs)).sum(0), dim=-1)
    confidence, best = joint.exp().max(-1)
    kept = confidence.argsort(descending=True, stable=True)[: round(keep * len(confidence))]
    votes: list[Label] = [None] * len(confidence)
    for i in kept.tolist():
        votes[i] = intents[best[i]]
    return votes, confidence


def intent_logprobs(
    model: Any, tokenizer: Any, pool: Sequence[str], intents: Sequence[str], label: str
) -> torch.Tensor:
    """log Q_k(a | x) over the intents for every pool utterance, from one scoring forward each."""
    scores = score_intents(model, tokenizer, routing_prompts(model, tokenizer, pool), intents, progress_label=label)
    return torch.log_softmax(scores.name_logprobs + scores.first_logprob[:, None], dim=-1)


def train_cotrain(
    models: dict[str, Any],
    tokenizers: dict[str, Any],
    pool: Sequence[str],
    settings: PeerRewardSettings,
    output_dir: Path,
    *,
    gold: Sequence[Label] | None = None,
    seed: int = 0,
    say: Callable[[str], None] = print,
) -> CohortResult:
    """Train ``settings.learners`` (every member when None) on ``pool`` by the cohort's joint votes (steps 1-4),
    ``settings.exact`` each learner's trainer; ``gold``: the pool's withheld labels, monitored only."""
    cfg, intents = settings.cotrain, sorted(known_intents())
    learners = [k for k in models if cfg.learners is None or k in cfg.learners]
    total = settings.exact.max_steps
    per_round = cfg.refresh_steps or total
    logs = {name: MemberLog() for name in models}
    bounds = (settings.collapse_window, settings.collapse_entropy, settings.collapse_share)
    guards = {name: CollapseGuard(*bounds) for name in models}
    start = time.perf_counter()
    for r, done in enumerate(range(0, total, per_round)):
        live = [k for k in learners if logs[k].collapsed is None]
        if not live:
            break
        views = {
            k: intent_logprobs(models[k], tokenizers[k], pool, intents, f"peer_rl round {r + 1}: {k} scoring the pool")
            for k in models
        }
        for name in live:
            seen = [v for k, v in views.items() if cfg.views == "all" or k != name]
            votes, _ = joint_votes(seen, intents, cfg.keep)
            if gold is not None:  # the withheld labels measure the joint vote, nothing more
                right = [v == g for v, g in zip(votes, gold, strict=True) if v is not None]
                share = sum(right) / max(len(right), 1)
                say(f"peer_rl round {r + 1}: {name} learns {len(right)} joint labels, {share:.3f} of them right")
            steps = min(per_round, total - done)
            result = train_expected(
                models[name],
                tokenizers[name],
                pool,
                intents,
                "teacher",
                settings.exact.replace(max_steps=steps),
                output_dir / name / f"round_{r + 1}",
                scale=settings.grpo.scale_rewards,
                teacher_votes=votes,
                gold=gold,
                guard=guards[name],
                seed=seed + r,
            )
            models[name] = result.model
            logs[name].steps += [{**row, "step": row["step"] + done} for row in result.log.steps]
            if result.log.collapsed is not None:
                at = result.log.collapsed_step + done
                logs[name].collapsed, logs[name].collapsed_step = result.log.collapsed, at
                say(f"peer_rl: member {name} collapsed at step {at} ({result.log.collapsed}): frozen")
    for model in models.values():
        model.eval()
    return CohortResult(models=dict(models), logs=logs, seconds=time.perf_counter() - start)
