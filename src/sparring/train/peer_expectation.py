"""Peer reward with the whole signal (Co-RL's step 5, :mod:`sparring.train.peer_reward`, made exact): a member's
routing is one token out of the intent names, so the expectation of its reward under its own policy is a sum over
that set, not an estimate from G samples.

For an utterance x with prompt s the member's reply is two tokens; its outcome o is the intent a ∈ A it names
(``<intent>`` then a's token) or ∅ (anything else: unparseable), with
P(a) = P(``<intent>`` | s) · P(a | s, ``<intent>``) and P(∅) = 1 − Σ_a P(a) (:func:`outcome_logprobs`). With a
reward r(o), r(∅) = 0:

1. μ = Σ_o P(o) r(o) and σ² = Σ_o P(o) r(o)² − μ²: the group mean and variance GRPO estimates from G samples.
2. GRPO's gradient as G → ∞: E_o[(r(o) − μ)/σ · ∇log P(o)] = ∇μ / σ, so the exact step minimises −μ / sg(σ + ε)
   (``scale: group``; −μ with ``none``, Dr. GRPO): one forward per utterance, on-policy by construction (P comes
   from the forward that is differentiated), every utterance informative, no sampling variance. TRL's
   ``SFTTrainer`` runs it (:class:`ExpectationTrainer`: its loss through Trainer's ``compute_loss`` hook; TRL's
   data, batching, optimizer and schedule). The same gradient from TRL's ``GRPOTrainer``, enumerating A as the
   group (G = |A| completions per utterance, each weighted by |A| P(a) Â(a)), cost 1.2-1.3 s a step of 16
   utterances for a tiny member on this VM: |A| rows per utterance, where this is one.

Rewards (:func:`outcome_reward`), against a teacher T that scored the pool once and is never trained, with Q its
own outcome distribution (:meth:`IntentScores.outcomes`):

- ``teacher``: r(a) = 1[a = ŷ_T(x)] (T's greedy vote), the sampled arm's reward (``peer_rl.reward: teacher``) in
  expectation: G = 16 samples of a member at 5% accuracy mostly hold no match, here every utterance has a gradient;
- ``graded``: r(a) = Q(a), the teacher's own probability of the intent;
- ``distill``: on-policy distillation, the loss KL(P ‖ Q) = Σ_o P(o) (log P(o) − log Q(o)) over the member's own
  outcomes (reverse KL; its policy gradient is step 2's with r(o) = log Q(o) − log P(o), unscaled).

Over 400 lines: the exact step whole, from the policy over the intent set to the trainer and the cohort that run it.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from sparring.lm.chat import INTENT, known_intents
from sparring.progress import ProgressMeter
from sparring.rollout import agent_opening
from sparring.settings import PeerRewardSettings, SFTSettings
from sparring.train.demos import intent_examples
from sparring.train.peer_reward import CohortResult, CollapseGuard, Label, MemberLog, entropy
from sparring.train.sft import SFTResult, train_sft
from sparring.train.trl import FreezeWhen

ExpectedReward = Literal["teacher", "graded", "distill"]
EPS = 1e-4  # TRL's std guard


# --------------------------------------------------------------------------------- the policy over the intent set


def intent_token_ids(tokenizer: Any, intents: Sequence[str]) -> list[int]:
    """Each intent name's token id: every name must be one token of ``tokenizer`` (sparring adds them)."""
    ids = tokenizer.convert_tokens_to_ids(list(intents))
    unknown = [n for n, i in zip(intents, ids, strict=True) if i is None or i == tokenizer.unk_token_id]
    if unknown:
        raise ValueError(f"intents that are not one token of this tokenizer: {unknown[:5]}")
    return list(ids)


def routing_prompts(model: Any, tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Each text's prompt ids: the agent reading it as the customer's opening, as the sampled arm prompts it."""
    system = getattr(model.config, "agent_system_prompt", "")
    return [
        list(tokenizer.apply_chat_template(agent_opening(t, system), add_generation_prompt=True, return_dict=False))
        for t in texts
    ]


@dataclass
class IntentScores:
    """A model's first reply to each prompt, scored over the intent set in one forward per prompt."""

    first_logprob: torch.Tensor  # (n,) log P(<intent> | prompt)
    name_logprobs: torch.Tensor  # (n, |A|) log P(a | prompt, <intent>) over the whole vocabulary
    votes: list[Label]  # the greedy reply's intent: <intent> then a name, both argmax, else None

    @property
    def outcomes(self) -> torch.Tensor:
        """P(o) over A ∪ {∅}, (n, |A| + 1)."""
        return outcome_logprobs(self.first_logprob, self.name_logprobs).exp()


@torch.no_grad()
def score_intents(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[list[int]],
    intents: Sequence[str],
    batch_size: int = 64,
    progress_label: str = "scoring intents",
) -> IntentScores:
    """:class:`IntentScores` of ``prompts``: one forward of prompt + ``<intent>`` each, in right-padded batches of
    similar length (random lengths would pad every batch to its longest); progress lines say ``progress_label``."""
    marker = tokenizer.convert_tokens_to_ids(INTENT)
    names = torch.tensor(intent_token_ids(tokenizer, intents))
    lookup = {int(t): n for t, n in zip(names, intents, strict=True)}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    first, scores = torch.zeros(len(prompts)), torch.zeros(len(prompts), len(intents))
    votes: list[Label] = [None] * len(prompts)
    was_training = model.training
    model.eval()
    meter = ProgressMeter(progress_label, len(prompts), "utterances")  # a pretrained teacher on a whole pool: minutes
    try:
        for at in range(0, len(order), batch_size):
            picked = order[at : at + batch_size]
            rows = [list(prompts[i]) + [marker] for i in picked]
            width = max(map(len, rows))
            ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
            last, batch = torch.tensor([len(r) - 1 for r in rows]), torch.arange(len(rows))
            at_marker = torch.log_softmax(logits[batch, last - 1], dim=-1)  # predicts <intent>
            after = torch.log_softmax(logits[batch, last], dim=-1)  # predicts the name
            first[picked], scores[picked] = at_marker[:, marker], after[:, names]
            for i, a, b in zip(picked, at_marker.argmax(-1).tolist(), after.argmax(-1).tolist(), strict=True):
                votes[i] = lookup.get(b) if a == marker else None
            meter.advance(len(picked))
        meter.finish()
    finally:
        model.train(was_training)
    return IntentScores(first, scores, votes)


# ------------------------------------------------------------------------------------------ rewards and the loss


def outcome_logprobs(first: torch.Tensor, names: torch.Tensor) -> torch.Tensor:
    """log P(o) over A ∪ {∅}, (n, |A| + 1): ``first`` log P(<intent>) (n,), ``names`` log P(a | <intent>) (n, |A|)
    over the whole vocabulary."""
    named = first.unsqueeze(-1) + names
    rest = torch.log1p(-named.exp().sum(-1).clamp(max=1 - 1e-6))
    return torch.cat([named, rest.unsqueeze(-1)], dim=-1)


def outcome_reward(
    kind: ExpectedReward,
    intents: Sequence[str],
    teacher_votes: Sequence[Label] | None = None,
    teacher_outcomes: torch.Tensor | None = None,
) -> torch.Tensor:
    """r(x, o) for every utterance x (rows) and outcome o ∈ A ∪ {∅} (columns; r(∅) = 0)."""
    if kind == "teacher":
        if teacher_votes is None:
            raise ValueError("reward 'teacher' needs the teacher's votes")
        column = {a: j for j, a in enumerate(intents)}
        r = torch.zeros(len(teacher_votes), len(intents) + 1)
        for i, v in enumerate(teacher_votes):
            if v is not None:  # no label: every answer earns 0, no gradient
                r[i, column[v]] = 1.0
        return r
    if teacher_outcomes is None:
        raise ValueError(f"reward {kind!r} needs the teacher's outcome distribution")
    if kind == "graded":
        return torch.cat([teacher_outcomes[:, :-1], torch.zeros(len(teacher_outcomes), 1)], dim=-1)
    raise ValueError(f"reward must be teacher or graded (distill has its own loss), got {kind!r}")


def expected_loss(logp: torch.Tensor, kind: ExpectedReward, scale: str, target: torch.Tensor) -> torch.Tensor:
    """Per utterance, step 2's loss −μ/sg(σ + ε) (or −μ), or distill's KL(P ‖ Q); ``logp``: log P(o), ``target``:
    r(x, o) or, for distill, Q(o)."""
    if kind == "distill":
        return (logp.exp() * (logp - torch.log(target.clamp_min(1e-12)))).sum(-1)
    p = logp.exp()
    mu = (p * target).sum(-1)
    if scale == "none":
        return -mu
    if scale != "group":
        raise ValueError(f"the exact expectation scales per utterance (group) or not at all (none), not {scale!r}")
    sigma = ((p * target**2).sum(-1) - mu**2).clamp_min(0).sqrt()
    return -mu / (sigma.detach() + EPS)


# ------------------------------------------------------------------------------------------------------ the trainer


@dataclass
class Expectation:
    """What :class:`ExpectationTrainer`'s loss reads: per pool utterance (its prompt ids as the key) the teacher's
    votes or outcome distribution, and the member's log it writes each step."""

    kind: ExpectedReward
    scale: str
    intents: list[str]
    marker: int  # the <intent> token
    name_ids: torch.Tensor  # the intents' token ids, in ``intents``' order
    rows: dict[tuple[int, ...], int]  # prompt ids -> pool row
    teacher_votes: Sequence[Label] | None
    teacher_outcomes: torch.Tensor | None
    gold: Sequence[Label] | None
    log: MemberLog = field(default_factory=MemberLog)
    guard: CollapseGuard = field(default_factory=lambda: CollapseGuard(64, 0.0, 1.0))

    def loss(self, model: Any, inputs: dict[str, torch.Tensor], step: int) -> torch.Tensor:
        """Step 2's loss (or distill's), averaged over the batch's utterances."""
        labels, ids = inputs["labels"], inputs["input_ids"]
        at_name = torch.isin(labels, self.name_ids)
        batch, pos = at_name.nonzero(as_tuple=True)
        if len(batch) != len(ids) or bool((ids[batch, pos - 1] != self.marker).any()):
            raise ValueError("every example must end its prompt with <intent> and one labelled intent name")
        keys = [tuple(ids[b, : p - 1].tolist()) for b, p in zip(batch.tolist(), pos.tolist(), strict=True)]
        if any(k not in self.rows for k in keys):
            raise KeyError("a prompt of this batch is not in the pool the loss was built for")
        rows = [self.rows[k] for k in keys]
        logits = model(input_ids=ids, attention_mask=inputs.get("attention_mask")).logits
        first = torch.log_softmax(logits[batch, pos - 2].float(), -1)[:, self.marker]
        names = torch.log_softmax(logits[batch, pos - 1].float(), -1)[:, self.name_ids]
        logp = outcome_logprobs(first, names)
        votes = [self.teacher_votes[r] for r in rows] if self.teacher_votes is not None else None
        if self.kind == "distill":
            target = self.teacher_outcomes[rows]  # type: ignore[index]  (checked in train_expected)
            reward = outcome_reward("graded", self.intents, None, target)
        else:
            outcomes = self.teacher_outcomes[rows] if self.teacher_outcomes is not None else None
            target = reward = outcome_reward(self.kind, self.intents, votes, outcomes)
        self._monitor(step, rows, logp.detach(), reward, votes)
        return expected_loss(logp, self.kind, self.scale, target).mean()

    def _monitor(self, step: int, rows: list[int], logp: torch.Tensor, reward: torch.Tensor, votes: Any) -> None:
        """The step's μ (the teacher's probability of the member's answer, for distill), votes and collapse."""
        p = logp.exp()
        mine = [self.intents[j] for j in p[:, :-1].argmax(-1).tolist()]
        row: dict[str, float] = {"step": step, "reward": float((p * reward).sum(-1).mean()), "entropy": entropy(mine)}
        row["unparseable"] = float(p[:, -1].mean())
        if votes is not None:
            row["agree_teacher"] = sum(a == b for a, b in zip(mine, votes, strict=True)) / len(rows)
        if self.gold is not None:
            row["vote_acc"] = sum(a == self.gold[r] for a, r in zip(mine, rows, strict=True)) / len(rows)
            if votes is not None:  # the teacher's labels against the withheld ones: measured, never rewarded
                row["target_acc"] = sum(v == self.gold[r] for v, r in zip(votes, rows, strict=True)) / len(rows)
        self.log.steps.append(row)
        reason = None if self.log.collapsed is not None else self.guard.update(mine)
        if reason is not None:
            self.log.collapsed, self.log.collapsed_step = reason, step


@functools.cache
def expectation_trainer() -> type:
    """TRL's ``SFTTrainer`` whose loss (Trainer's ``compute_loss`` hook) is :meth:`Expectation.loss`; built on first
    use (importing TRL is slow)."""
    from trl import SFTTrainer

    class ExpectationTrainer(SFTTrainer):
        def __init__(self, *args: Any, expectation: Expectation, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.expectation, self.logged_steps = expectation, 0

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if return_outputs:
                raise NotImplementedError("the expected-reward loss has no outputs to return")
            return self.expectation.loss(model, inputs, self.state.global_step + 1)

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            # −μ/sg(σ) runs to −6,500 as σ → 0 (2026-12-06): the mean reward μ since the last log is what reads
            steps = self.expectation.log.steps
            if "loss" in logs and len(steps) > self.logged_steps:
                logs["reward"] = statistics.fmean(row["reward"] for row in steps[self.logged_steps :])
                self.logged_steps = len(steps)
            super().log(logs, start_time)

    return ExpectationTrainer


@dataclass
class ExpectedResult:
    model: Any
    log: MemberLog
    sft: SFTResult


def train_expected(
    model: Any,
    tokenizer: Any,
    pool: Sequence[str],
    intents: Sequence[str],
    kind: ExpectedReward,
    settings: SFTSettings,
    output_dir: Path,
    *,
    scale: str = "group",
    teacher_votes: Sequence[Label] | None = None,
    teacher_outcomes: torch.Tensor | None = None,
    gold: Sequence[Label] | None = None,
    guard: CollapseGuard | None = None,
    seed: int = 0,
) -> ExpectedResult:
    """Train ``model`` on the unlabeled ``pool`` under ``kind``'s reward in exact expectation (step 2): ``settings``
    give the steps, batch (utterances per step), lr and schedule. The teacher's ``teacher_votes`` and
    ``teacher_outcomes`` (n, |A| + 1: :meth:`IntentScores.outcomes`) are per pool utterance; where its greedy reply
    named no intent (vote None) the utterance is skipped. ``gold``: withheld labels, monitored only. A collapse
    (``guard``) freezes the model from the next step. Trained in place."""
    _check_teacher(pool, intents, kind, teacher_votes, teacher_outcomes)
    # The labelled name only marks where the reply's intent is read; any name would do, the teacher's is at hand.
    if teacher_votes is not None:
        marks = list(teacher_votes)
    else:
        marks = [intents[j] for j in teacher_outcomes[:, :-1].argmax(-1).tolist()]  # type: ignore[index]
    system = getattr(model.config, "agent_system_prompt", "")
    keep, prompts = _trained_rows(model, tokenizer, pool, marks, settings.max_length)
    if not keep:
        raise ValueError(f"no pool utterance has a teacher's intent and a prompt within {settings.max_length} tokens")
    expectation = Expectation(
        kind=kind,
        scale=scale,
        intents=list(intents),
        marker=tokenizer.convert_tokens_to_ids(INTENT),
        name_ids=torch.tensor(intent_token_ids(tokenizer, intents)),
        rows={tuple(p): i for p, i in zip(prompts, keep, strict=True)},
        teacher_votes=teacher_votes,
        teacher_outcomes=teacher_outcomes,
        gold=gold,
        guard=guard or CollapseGuard(64, 0.0, 1.0),
    )
    examples = intent_examples([pool[i] for i in keep], [marks[i] for i in keep], system or None)
    result = train_sft(
        model,
        tokenizer,
        examples,
        settings,
        output_dir,
        seed=seed,
        callbacks=[FreezeWhen(lambda: expectation.log.collapsed is not None)],
        trainer_class=functools.partial(expectation_trainer(), expectation=expectation),
        progress_label=f"peer {Path(output_dir).name} ({kind} reward in expectation)",
    )
    result.model.eval()
    return ExpectedResult(result.model, expectation.log, result)


def _check_teacher(
    pool: Sequence[str],
    intents: Sequence[str],
    kind: ExpectedReward,
    teacher_votes: Sequence[Label] | None,
    teacher_outcomes: torch.Tensor | None,
) -> None:
    """Refuse an empty pool, and teacher inputs that do not cover it and the intent set or that ``kind`` lacks."""
    if not pool:
        raise ValueError("the unlabeled pool is empty")
    for name, given in (("teacher_votes", teacher_votes), ("teacher_outcomes", teacher_outcomes)):
        if given is not None and len(given) != len(pool):
            raise ValueError(f"{len(given)} {name} for a pool of {len(pool)} utterances")
    if teacher_outcomes is not None and teacher_outcomes.shape[-1] != len(intents) + 1:
        raise ValueError(f"teacher_outcomes has {teacher_outcomes.shape[-1]} columns, not |A| + 1 = {len(intents) + 1}")
    outcome_reward("graded" if kind == "distill" else kind, intents, teacher_votes, teacher_outcomes)  # the inputs


def _trained_rows(
    model: Any, tokenizer: Any, pool: Sequence[str], marks: Sequence[Label], max_length: int
) -> tuple[list[int], list[list[int]]]:
    """The pool rows a member trains on, with their prompts: a marked intent, a text, and a prompt that leaves room
    for ``<intent> NAME <|end|>`` within ``max_length`` (truncated, it would lose its name)."""
    keep = [i for i, m in enumerate(marks) if m is not None and pool[i].strip()]
    prompts = routing_prompts(model, tokenizer, [pool[i] for i in keep])
    fits = [len(p) + 3 <= max_length for p in prompts]
    return [i for i, f in zip(keep, fits, strict=True) if f], [p for p, f in zip(prompts, fits, strict=True) if f]


def train_cohort_exact(
    models: dict[str, Any],
    tokenizer: Any,
    pool: Sequence[str],
    settings: PeerRewardSettings,
    output_dir: Path,
    *,
    gold: Sequence[Label] | None = None,
    seed: int = 0,
    say: Callable[[str], None] = print,
) -> CohortResult:
    """:func:`~sparring.train.peer_reward.train_cohort`'s counterpart under ``estimate: exact``: the teacher
    (``settings.teacher``) scores the pool once and comes back untrained; every other member trains alone on its
    scores (:func:`train_expected`, ``settings.exact``; Â scaled as ``settings.grpo.scale_rewards``).
    ``tokenizer``: the cohort's, or one per member name."""
    teacher = settings.teacher
    if teacher not in models:
        raise ValueError(f"peer_rl.teacher {teacher!r} is not a member of the cohort {list(models)}")
    tokenizers = tokenizer if isinstance(tokenizer, dict) else dict.fromkeys(models, tokenizer)
    intents = sorted(known_intents())
    start = time.perf_counter()
    t_model, t_tok = models[teacher], tokenizers[teacher]
    prompts = routing_prompts(t_model, t_tok, pool)
    scores = score_intents(t_model, t_tok, prompts, intents, progress_label=f"teacher {teacher} scoring the pool")
    named = sum(v is not None for v in scores.votes)
    say(f"peer_rl: teacher {teacher} named an intent on {named} of {len(pool)} pool utterances")
    logs = {name: MemberLog() for name in models}
    for name, model in models.items():
        if name == teacher:
            continue
        if not named:  # nothing to learn from: the learners keep their weights (an empty log), the run goes on
            say(f"peer_rl: member {name} not trained: its teacher {teacher} labelled no pool utterance")
            continue
        guard = CollapseGuard(settings.collapse_window, settings.collapse_entropy, settings.collapse_share)
        result = train_expected(
            model,
            tokenizers[name],
            pool,
            intents,
            settings.reward,  # type: ignore[arg-type]  (a teacher's reward: checked by the settings)
            settings.exact,
            output_dir / name,
            scale=settings.grpo.scale_rewards,
            teacher_votes=scores.votes,
            teacher_outcomes=scores.outcomes,
            gold=gold,
            guard=guard,
            seed=seed,
        )
        models[name], logs[name] = result.model, result.log
        if result.log.collapsed is not None:
            say(f"peer_rl: member {name} collapsed at step {result.log.collapsed_step} ({result.log.collapsed})")
    for model in models.values():
        model.eval()
    return CohortResult(models=dict(models), logs=logs, seconds=time.perf_counter() - start)
