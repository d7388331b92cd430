"""Co-training by the cohort's joint vote (Co-RL's cohort form, ../shared/SEEDS.md; Blum & Mitchell 1998): routers
of similar accuracy whose errors differ label the unlabeled pool together, and each learns from that label.

For an utterance x every member k scores the intents once (:func:`~sparring.train.peer_expectation.score_intents`),
Q_k(a | x) over A (its unparseable outcome dropped, renormalised). Each round:

1. The cohort's joint vote over the members ``views`` holds (every member, or the others only):
   J(a | x) ∝ Π_k Q_k(a | x) (the product of experts: a label the members' different errors do not share wins), the
   label ŷ(x) = argmax_a J(a | x), its confidence c(x) = max_a J(a | x).
2. The confidence filter: only the ``keep`` share of the pool with the highest c(x) is labelled; the rest is skipped
   (its joint label is the least often right: measured on Banking77, the top half of DA0's own is 0.81, the whole 0.57).
3. Each learner learns its labels: ``loss: sft`` (the default) by cross-entropy, each labelled utterance answered as
   the agent answers an opening, shuffled among the expert's demonstrations, which keep its conversations; ``exact``
   maximises E_{a ~ P}[1[a = ŷ(x)]] in exact expectation (:func:`~sparring.train.peer_expectation.train_expected`,
   the ``teacher`` reward: the step −μ/sg(σ)) on the routing alone, which on Banking77 moved routing further (+5.5
   points against sft's +4.6) but broke the agent's play (strict PASS −0.52 against the reference opponent, sft's
   −0.004; docs/results.md "The agent adapts to Banking77 without labels").
4. The labels are recomputed from the members' current weights (co-training's refresh), ``rounds`` times in all.

The pool's own labels, where it has any, are monitored only: they never reach a trainer. A member whose last votes
collapse (:class:`~sparring.train.peer_reward.CollapseGuard`) is frozen from then on and reported.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from sparring.lm.chat import known_intents
from sparring.settings import PeerRewardSettings
from sparring.train.demos import intent_examples, rehearsal
from sparring.train.peer_expectation import routing_prompts, score_intents, train_expected
from sparring.train.peer_reward import CohortResult, CollapseGuard, Label, MemberLog, entropy
from sparring.train.sft import train_sft


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
    demos: Sequence[Sequence[dict[str, Any]]] = (),
    gold: Sequence[Label] | None = None,
    seed: int = 0,
    say: Callable[[str], None] = print,
) -> CohortResult:
    """Train ``settings.cotrain.learners`` (every member when None) on ``pool`` by the cohort's joint votes (steps
    1-4); ``demos``: the expert's conversations mixed in under ``loss: sft``; ``gold``: the pool's withheld labels,
    monitored only."""
    cfg, intents = settings.cotrain, sorted(known_intents())
    if cfg.loss == "sft" and not demos:
        raise ValueError("peer_rl.cotrain.loss sft needs the expert's demonstrations (cotrain.demos > 0)")
    learners = [k for k in models if cfg.learners is None or k in cfg.learners]
    logs = {name: MemberLog() for name in models}
    bounds = (settings.collapse_window, settings.collapse_entropy, settings.collapse_share)
    guards = {name: CollapseGuard(*bounds) for name in models}
    start = time.perf_counter()
    views: dict[str, torch.Tensor] = {}
    stale = list(models)  # members whose weights changed since they last scored the pool
    scored = 0  # utterances scored over the intent set, every member's together: the phase's count of routings
    for r in range(cfg.rounds):
        live = [k for k in learners if logs[k].collapsed is None]
        if not live:
            break
        label = f"peer_rl round {r + 1} of {cfg.rounds}"
        views.update({k: intent_logprobs(models[k], tokenizers[k], pool, intents, f"{label}: {k} scoring the pool")
                      for k in stale})  # fmt: skip
        scored += len(pool) * len(stale)
        stale = live
        for name in live:
            votes, _ = joint_votes([v for k, v in views.items() if cfg.views == "all" or k != name], intents, cfg.keep)
            if gold is not None:  # the withheld labels measure the joint vote, nothing more
                right = [v == g for v, g in zip(votes, gold, strict=True) if v is not None]
                say(f"{label}: {name} learns {len(right)} joint labels, {sum(right) / max(len(right), 1):.3f} right")
            folder = output_dir / name / f"round_{r + 1}"
            if cfg.loss == "exact":
                models[name] = _learn_exact(models[name], tokenizers[name], pool, votes, settings, folder,
                                            logs[name], guards[name], r, gold, seed)  # fmt: skip
            else:
                models[name] = _learn_sft(models[name], tokenizers[name], pool, votes, demos, cfg, folder, seed + r)
                _monitor(models[name], tokenizers[name], pool, votes, intents, logs[name], guards[name], r, gold)
            if logs[name].collapsed is not None:
                say(f"peer_rl: member {name} collapsed at step {logs[name].collapsed_step} ({logs[name].collapsed}): "
                    "frozen")  # fmt: skip
    for model in models.values():
        model.eval()
    return CohortResult(models=dict(models), logs=logs, seconds=time.perf_counter() - start, routings=scored)


def _learn_sft(
    model: Any,
    tokenizer: Any,
    pool: Sequence[str],
    votes: Sequence[Label],
    demos: Sequence,
    cfg: Any,
    out: Path,
    seed: int,
) -> Any:
    """Step 3 under ``sft``: cross-entropy on the labelled utterances, each answered as the demos answer an opening
    (a bare ``<intent>NAME`` taught the agent to stop there in episodes), shuffled among the expert's demos (which
    keep its conversations: the routing step alone broke them, docs/results.md)."""
    system = getattr(model.config, "agent_system_prompt", "") or None
    kept = [i for i, v in enumerate(votes) if v is not None]
    labelled = intent_examples([pool[i] for i in kept], [votes[i] for i in kept], system)  # type: ignore[misc]
    conversations = rehearsal(labelled, demos, len(labelled), seed) + [list(d) for d in demos]
    random.Random(seed).shuffle(conversations)
    return train_sft(
        model, tokenizer, conversations, cfg.sft, out, seed=seed, progress_label=f"peer {out.parent.name}"
    ).model


def _monitor(
    model: Any, tokenizer: Any, pool: Sequence[str], votes: Sequence[Label], intents: Sequence[str],
    log: MemberLog, guard: CollapseGuard, r: int, gold: Sequence[Label] | None,
) -> None:  # fmt: skip
    """One log row per round under ``sft``: the learner's agreement with its labels after the round (its reward),
    its votes' entropy, their accuracy on the withheld labels, and the collapse guard on those votes."""
    kept = [i for i, v in enumerate(votes) if v is not None]
    mine = [intents[j] for j in intent_logprobs(model, tokenizer, [pool[i] for i in kept], intents, "after").argmax(-1)]
    row = {"step": r + 1, "reward": sum(m == votes[i] for m, i in zip(mine, kept, strict=True)) / len(kept)}
    row.update(entropy=entropy(mine), agree_teacher=row["reward"])
    if gold is not None:
        row["vote_acc"] = sum(m == gold[i] for m, i in zip(mine, kept, strict=True)) / len(kept)
        row["target_acc"] = sum(votes[i] == gold[i] for i in kept) / len(kept)
    log.steps.append(row)
    reason = guard.update(mine)  # it reads the last `collapse_window` of them
    if reason is not None and log.collapsed is None:
        log.collapsed, log.collapsed_step = reason, r + 1


def _learn_exact(
    model: Any, tokenizer: Any, pool: Sequence[str], votes: Sequence[Label], settings: PeerRewardSettings,
    out: Path, log: MemberLog, guard: CollapseGuard, r: int, gold: Sequence[Label] | None, seed: int,
) -> Any:  # fmt: skip
    """Step 3 under ``exact``: the expected agreement, ``exact.max_steps / rounds`` steps of it this round."""
    steps = max(settings.exact.max_steps // settings.cotrain.rounds, 1)
    result = train_expected(
        model, tokenizer, pool, sorted(known_intents()), "teacher", settings.exact.replace(max_steps=steps), out,
        scale=settings.grpo.scale_rewards, teacher_votes=votes, gold=gold, guard=guard, seed=seed + r,
    )  # fmt: skip
    log.steps += [{**row, "step": row["step"] + r * steps} for row in result.log.steps]
    if result.log.collapsed is not None and log.collapsed is None:
        log.collapsed, log.collapsed_step = result.log.collapsed, result.log.collapsed_step + r * steps
    return result.model
