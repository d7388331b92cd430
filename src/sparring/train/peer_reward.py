"""Peer-reward RL (Co-RL, ../shared/SEEDS.md, arXiv 2608.17253): a cohort of decoupled agents adapts its routing to
unlabeled utterances by rewarding each other's answers. In the paper's order:

1. The cohort: N >= 2 members, each its own model (built from a spec and warm-started as DA0 is,
   :func:`warm_start_member`; a pretrained one reads its own vocabulary), its own TRL ``GRPOTrainer`` and optimizer;
   no shared parameters or gradients; the same prompt order (every trainer gets the same prompt keys and sampler
   seed, checked per step).
2. The diversity probe, before training, on a small labelled probe set (:func:`diversity`): per pair of members,
   Cohen's κ of their right/wrong patterns, c = share where exactly one is right, w = share where both are wrong
   with the same answer.
3. Per unlabeled utterance x each member k samples G routings a_{k,1..G} (its first message, ``max_new_tokens``
   tokens: ``<intent>`` NAME); its plurality vote is its pseudo-label ŷ_k(x) (:func:`plurality`; unparseable
   answers never vote).
4. Label-free rewards (:func:`targets`, :func:`rewards`): r_{k,g} = 1[a_{k,g} = y*_k(x)], 0 when a_{k,g} is
   unparseable, where y*_k is the peer's pseudo-label ŷ_{peer(k)} (``ring``: A←B←C←A, :func:`ring_peers`), the
   plurality of the other members' pooled samples (``majority``), ŷ_k itself (``self``: TTRL, the baseline), or
   the teacher's vote ŷ_T(x) (``teacher``; ours, not the paper's). Why ``teacher``: under a reward that pays for
   agreeing with labels y*, member k can at most learn y*, so its gain is bounded by max(0, acc(y*_k) − acc(ŷ_k)).
   The ring's bound is ≤ 0 wherever the peer is the weaker model (docs/results.md, the bound tables), and no
   order of a ring avoids that for the member whose peer is last. ``teacher`` gives every member the labels of
   T = argmax_k acc_probe(k), the member most accurate on the labelled probe of step 2 (:func:`best_on_probe`),
   so each member's bound is acc(ŷ_T) − acc(ŷ_k) ≥ 0 on the probe; T itself is not trained (its only labels
   would be its own: TTRL) and labels each utterance once with its greedy vote, its weights never changing.
5. GRPO with group normalization (TRL's): Â_{k,g} = (r_{k,g} − mean_g r_{k,·}) / (std_g r_{k,·} + ε) on the member's
   generated tokens. Under a teacher's reward its expectation over every intent can replace the G samples
   (``peer_rl.estimate: exact``, :mod:`sparring.train.peer_expectation`).
6. Monitoring, per member and step: the entropy of its votes, its agreement with each peer, the accuracy of the
   labels it was rewarded with against withheld labels (measured, never used), and a collapse guard
   (:class:`CollapseGuard`) that freezes a member whose votes collapse (entropy below a floor, or one intent above
   a share: lr 0 from its next step, :class:`~sparring.train.trl.FreezeWhen`); a frozen member still votes, but no
   member takes its labels while a live one is left.

How members see each other's samples (:class:`Lockstep`): each member's ``trainer.train()`` runs in its own thread,
but only one thread runs at a time, passing a turn around the ring. At step t member k, in its ``rollout_func``,
samples its G routings per utterance of the step with its current weights and posts them; the last member to post
computes every member's rewards for step t; each member's ``rollout_func`` then returns its own completions with
those rewards, and its trainer takes its optimizer step. So every reward of step t reads the peers' samples of step
t, each from weights after t−1 updates, and the run is deterministic (the shared torch RNG is drawn in ring order).

Over 400 lines: Co-RL's six steps in the paper's order, each a section below, with the lockstep that runs them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from sparring.lm.added_rows import rows_from_name_words
from sparring.lm.chat import AGENT_SYSTEM_PROMPT, parse_agent_message
from sparring.lm.models import build_model
from sparring.lm.policies import LMPolicy, TurnRequest
from sparring.lm.pretrained import resolve_model_path
from sparring.lm.tokenizer import stage_tokenizer
from sparring.rollout import agent_opening, route_utterances
from sparring.settings import AgentSFTSettings, PeerMember, PeerRewardSettings
from sparring.timing import Phases, sft_phases
from sparring.train.demos import intent_examples, warm_start
from sparring.train.sft import combine, train_sft
from sparring.train.trl import (
    FreezeWhen,
    build_trainer,
    prompt_indices,
    rollout_output,
    tile_to_step,
    trained_model,
    unwrapped,
)

Label = str | None  # an intent name, or None for an unparseable answer


# ---------------------------------------------------------------------------------------------------- 1. the cohort


def member_tokenizer(member: PeerMember, shared: Any, intents: Sequence[str]) -> Any:
    """The tokenizer ``member`` reads: a pretrained model's own vocabulary with sparring's tokens (``intents`` among
    them, :func:`~sparring.lm.tokenizer.stage_tokenizer`), else the cohort's ``shared`` one."""
    if member.model is None or member.model.name_or_path is None:
        return shared
    return stage_tokenizer(member.model.name_or_path, [], 0, intents)


def warm_start_member(
    member: PeerMember,
    tokenizer: Any,
    texts: Sequence[str],
    intents: Sequence[str],
    demos: Sequence[Sequence[dict[str, Any]]],
    default: AgentSFTSettings,
    output_dir: Path,
    seed: int = 0,
    phases: Phases | None = None,
) -> Any:
    """A member from its model spec (``tokenizer``: :func:`member_tokenizer`'s), warm-started as DA0 is
    (:func:`warm_start`, ``member.warm_start`` or ``default``); with ``member.demos`` false, its intent phase alone
    (utterance -> ``<intent>NAME``). ``phases`` records its SFT phases (:func:`~sparring.timing.sft_phases`), named
    ``<output_dir's name>.<phase>``."""
    if member.model is None:
        raise ValueError("the final agent is loaded from its cycle, not built")
    cfg = member.warm_start or default
    model = build_model(member.model, tokenizer, seed=seed)
    if member.model.name_or_path is not None and member.name_rows == "words":
        rows_from_name_words(
            model, tokenizer, AutoTokenizer.from_pretrained(resolve_model_path(member.model.name_or_path))
        )
    system = AGENT_SYSTEM_PROMPT if cfg.system_prompt else ""
    model.config.agent_system_prompt = system  # as DA0: whoever loads it prompts it as it was trained
    if member.demos:
        result = warm_start(model, tokenizer, demos, texts, intents, cfg, output_dir, seed=seed)
    else:
        if cfg.intent is None:
            raise ValueError("a member without demos needs its warm start's intent phase (warm_start.intent is null)")
        examples = intent_examples(texts, intents, system or None)
        intent = train_sft(model, tokenizer, examples, cfg.intent, output_dir / "intent", seed=seed)
        result = combine({"intent": intent}, {"intent": 1})
    if phases is not None:
        sft_phases(phases, result, prefix=f"{output_dir.name}.")
    return result.model


# ----------------------------------------------------------------------------------------------- 2. diversity probe


def route_intents(model: Any, tokenizer: Any, texts: Sequence[str], max_new_tokens: int = 2) -> list[Label]:
    """The intent each text's greedy first reply names (None: none), as ``sparring route`` reads it."""
    policy = LMPolicy(model, tokenizer, "agent", max_new_tokens=max_new_tokens, greedy=True)
    return [r["intent"] for r in route_utterances(policy, texts)]


def accuracy(predicted: Sequence[Label], gold: Sequence[str]) -> float:
    """Share of predictions equal to the gold intent."""
    return sum(p == g for p, g in zip(predicted, gold, strict=True)) / len(gold) if gold else 0.0


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's κ of two right/wrong patterns: (p_o − p_e) / (1 − p_e); 1.0 when they agree everywhere."""
    if len(a) != len(b) or not a:
        raise ValueError(f"need two equally long, non-empty patterns, got {len(a)} and {len(b)}")
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if p_e >= 1 else (p_o - p_e) / (1 - p_e)


def diversity(predictions: dict[str, Sequence[Label]], gold: Sequence[str]) -> dict[str, Any]:
    """Co-RL's probe: κ, c (exactly one right) and w (both wrong, same answer) per pair, and their means."""
    names = list(predictions)
    right = {k: [p == g for p, g in zip(predictions[k], gold, strict=True)] for k in names}
    pairs: dict[str, dict[str, float]] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            n = len(gold)
            both_wrong = [
                not ra and not rb and pa == pb
                for ra, rb, pa, pb in zip(right[a], right[b], predictions[a], predictions[b], strict=True)
            ]
            pairs[f"{a}~{b}"] = {
                "kappa": cohen_kappa(right[a], right[b]),
                "c": sum(ra != rb for ra, rb in zip(right[a], right[b], strict=True)) / n,
                "w": sum(both_wrong) / n,
            }
    mean = {m: sum(p[m] for p in pairs.values()) / len(pairs) if pairs else 0.0 for m in ("kappa", "c", "w")}
    accuracy = {k: sum(right[k]) / len(gold) if gold else 0.0 for k in names}
    return {**mean, "pairs": pairs, "accuracy": accuracy}


def best_on_probe(probe: dict[str, Any]) -> str:
    """T for ``teacher``: the member most accurate on the probe (:func:`diversity`'s result); a tie goes to the
    member named first."""
    accuracy = probe["accuracy"]
    return max(accuracy, key=lambda k: (accuracy[k], -list(accuracy).index(k)))


# --------------------------------------------------------------------------------------------------------- 3. votes


def sample_routings(
    model: Any, tokenizer: Any, texts: Sequence[str], settings: PeerRewardSettings
) -> tuple[list[list[int]], list[Any]]:
    """Each text's prompt ids (the agent reading it as the customer's opening) and one sampled first message."""
    g = settings.grpo
    policy = LMPolicy(model, tokenizer, "agent", max_new_tokens=g.max_new_tokens, temperature=g.temperature)
    system = getattr(model.config, "agent_system_prompt", "")
    prompts = [
        list(tokenizer.apply_chat_template(agent_opening(t, system), add_generation_prompt=True, return_dict=False))
        for t in texts
    ]
    requests = [TurnRequest(role="agent", prompt_ids=p, messages=[], scenario=None) for p in prompts]  # type: ignore[arg-type]
    was_training = model.training
    model.eval()
    try:
        outputs = policy.act(requests)
    finally:
        model.train(was_training)
    return prompts, outputs


def plurality(answers: Sequence[Label]) -> Label:
    """The most frequent parseable answer; a tie goes to the answer first seen; None when none parses."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    best = max(counts.values())
    return next(a for a in answers if a is not None and counts[a] == best)


# ------------------------------------------------------------------------------------------------------- 4. rewards


def ring_peers(names: Sequence[str]) -> dict[str, str]:
    """Each member's peer in the ring A←B←C←A: member k is rewarded by member k+1's pseudo-label."""
    if len(names) < 2:
        raise ValueError(f"a ring needs at least 2 members, got {list(names)}")
    return {name: names[(k + 1) % len(names)] for k, name in enumerate(names)}


def targets(
    samples: dict[str, list[list[Label]]],
    mode: str,
    live: Sequence[str] | None = None,
    teacher: str | None = None,
) -> dict[str, list[Label]]:
    """y*_k(x) for every member k and utterance x: the label member k is rewarded by agreeing with.

    ``samples[k][i]``: member k's G answers to utterance i. ``live``: the members whose labels others may take
    (default: all); in ``ring`` a member takes the next live member's vote, in ``majority`` the live others' pooled
    samples, in ``teacher`` the vote of ``teacher`` (one of ``samples``; it takes its own); with no live other
    member left a member falls back to its own vote."""
    names = list(samples)
    live = list(names if live is None else live)
    if mode == "teacher" and teacher not in samples:
        raise ValueError(f"reward 'teacher' needs the teacher's votes: {teacher!r} is not one of {names}")
    votes = {k: [plurality(a) for a in samples[k]] for k in names}
    out: dict[str, list[Label]] = {}
    for k, name in enumerate(names):
        others = [n for n in names[k + 1 :] + names[:k] if n in live]  # ring order after k
        if mode == "self" or not others:
            out[name] = votes[name]
        elif mode == "ring":
            out[name] = votes[others[0]]
        elif mode == "majority":
            n = len(samples[name])
            out[name] = [plurality([a for o in others for a in samples[o][i]]) for i in range(n)]
        elif mode == "teacher":
            out[name] = votes[teacher]  # type: ignore[index]  (checked above)
        else:
            raise ValueError(f"reward must be ring, majority, self or teacher, got {mode!r}")
    return out


def rewards(answers: Sequence[Label], target: Label) -> list[float]:
    """r_g = 1 if answer g parses and equals the target label, else 0 (no target: all 0)."""
    return [float(a is not None and a == target) for a in answers]


def target_label_accuracy(
    votes: dict[str, Sequence[Label]], gold: Sequence[str], reward: str, teacher: str | None = None
) -> dict[str, float]:
    """The bound's half per member: the accuracy against ``gold`` of the labels ``reward`` would reward it for
    agreeing with, from each member's one greedy vote per utterance (``votes``, in ring order): its ring peer's
    vote, the plurality of the other members' votes, its own, or ``teacher``'s
    (:func:`~sparring.train.peer_reward.targets`)."""
    goal = targets({k: [[v] for v in vs] for k, vs in votes.items()}, reward, teacher=teacher)
    return {k: accuracy(goal[k], gold) for k in votes}


# ---------------------------------------------------------------------------------------------- 5. GRPO in lockstep


class Aborted(RuntimeError):
    """Another member's thread failed; this one stops."""


class Lockstep:
    """One member's thread runs at a time; the turn passes around the ring (skipping finished members)."""

    def __init__(self, n: int) -> None:
        self.turn, self.done, self.error = 0, [False] * n, None
        self.cond = threading.Condition()

    def wait(self, k: int) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.turn == k or self.error is not None)
            if self.error is not None:
                raise Aborted("another member failed") from None

    def pass_on(self, k: int, finished: bool = False) -> None:
        with self.cond:
            self.done[k] = self.done[k] or finished
            n = len(self.done)
            nxt = next((j % n for j in range(k + 1, k + 1 + n) if not self.done[j % n]), k)
            self.turn = nxt
            self.cond.notify_all()

    def fail(self, exc: BaseException) -> None:
        with self.cond:
            self.error = self.error or exc
            self.cond.notify_all()


@dataclass
class MemberLog:
    """What one member did: per step reward, entropy, agreement and (with labels) accuracy of its vote and target."""

    steps: list[dict[str, float]] = field(default_factory=list)
    collapsed: str | None = None  # the guard's reason
    collapsed_step: int | None = None


@dataclass
class Board:
    """Each step's posted samples, and the rewards computed from them once every member has posted."""

    names: list[str]
    settings: PeerRewardSettings
    gold: Sequence[Label] | None  # withheld labels of the pool (measured, never rewarded); None: unlabeled
    say: Callable[[str], None]
    fixed: dict[str, Sequence[Label]] = field(default_factory=dict)  # votes per pool row of members not trained
    posted: dict[str, tuple[list[int], list[list[Label]]]] = field(default_factory=dict)
    rewards: dict[str, list[float]] = field(default_factory=dict)
    logs: dict[str, MemberLog] = field(init=False)
    guards: dict[str, CollapseGuard] = field(init=False)
    step: int = 0
    routings: int = 0  # first messages sampled, every member's together

    def __post_init__(self) -> None:
        s = self.settings
        self.logs = {k: MemberLog() for k in self.names}
        self.guards = {k: CollapseGuard(s.collapse_window, s.collapse_entropy, s.collapse_share) for k in self.names}

    @property
    def trained(self) -> list[str]:
        return [k for k in self.names if k not in self.fixed]

    def live(self) -> list[str]:
        return [k for k in self.names if self.logs[k].collapsed is None]

    def post(self, name: str, keys: list[int], answers: list[list[Label]]) -> None:
        self.posted[name] = (keys, answers)
        self.routings += sum(len(a) for a in answers)
        if len(self.posted) == len(self.trained):
            self._score()

    def _score(self) -> None:
        """Rewards of every member for this step (SEEDS.md: 1 if equal to the peer's label, else 0)."""
        self.step += 1
        keys = self.posted[self.trained[0]][0]
        if any(self.posted[k][0] != keys for k in self.trained):
            raise RuntimeError("members were given different prompts: the cohort must share one prompt order")
        samples = {k: self.posted[k][1] if k in self.posted else [[self.fixed[k][i]] for i in keys] for k in self.names}
        votes = {k: [plurality(a) for a in samples[k]] for k in self.names}
        goal = targets(samples, self.settings.reward, self.live(), self.settings.teacher)
        gold = [self.gold[i] for i in keys] if self.gold is not None else None
        for k in self.trained:
            frozen = self.logs[k].collapsed is not None
            r = [0.0 if frozen else x for i, t in enumerate(goal[k]) for x in rewards(samples[k][i], t)]
            self.rewards[k] = r
            row = {"step": self.step, "reward": sum(r) / len(r), "entropy": entropy(votes[k])}
            row["unparseable"] = sum(a is None for ans in samples[k] for a in ans) / len(r)
            for j in self.names:
                if j != k:
                    row[f"agree_{j}"] = sum(a == b for a, b in zip(votes[k], votes[j], strict=True)) / len(keys)
            if gold is not None:
                row["vote_acc"] = _acc(votes[k], gold)
                row["target_acc"] = _acc(goal[k], gold)
            self.logs[k].steps.append(row)
            reason = None if frozen else self.guards[k].update(votes[k])
            if reason is not None:
                self.logs[k].collapsed, self.logs[k].collapsed_step = reason, self.step
                self.say(f"peer_rl: member {k} collapsed at step {self.step} ({reason}): frozen from here on")
        self.posted = {}


def _acc(labels: Sequence[Label], gold: Sequence[Label]) -> float:
    pairs = [(a, g) for a, g in zip(labels, gold, strict=True) if g is not None]
    return sum(a == g for a, g in pairs) / len(pairs) if pairs else float("nan")


def make_member_rollout(
    k: int, name: str, tokenizer: Any, pool: Sequence[str], board: Board, lock: Lockstep
) -> Callable[[list[Any], Any], dict[str, list]]:
    """Member k's ``rollout_func``: sample, post, hand the turn on, and return its completions with the rewards
    computed from every member's samples of the same step."""
    g = board.settings.grpo.num_generations

    def rollout(prompts: list[Any], trainer: Any) -> dict[str, list]:
        keys = prompt_indices(prompts, g)
        model = unwrapped(trainer)
        ids, outs = sample_routings(model, tokenizer, [pool[i] for i in keys], board.settings)
        answers = [parse_agent_message(o.text).intent for o in outs]
        board.post(name, keys[::g], [answers[i : i + g] for i in range(0, len(answers), g)])
        lock.pass_on(k)
        lock.wait(k)  # every member has posted this step; the last one scored it
        return rollout_output(
            ids,
            [o.token_ids for o in outs],
            [o.logprobs for o in outs],
            [[1] * len(o.token_ids) for o in outs],
            board.rewards[name],
        )

    return rollout


@dataclass
class CohortResult:
    models: dict[str, Any]
    logs: dict[str, MemberLog]
    seconds: float
    routings: int = 0  # first messages the members sampled (one-turn episodes), all together


def train_cohort(
    models: dict[str, Any],
    tokenizer: Any,
    pool: Sequence[str],
    settings: PeerRewardSettings,
    output_dir: Path,
    *,
    gold: Sequence[Label] | None = None,
    seed: int = 0,
    say: Callable[[str], None] = print,
    teacher_votes: Sequence[Label] | None = None,
) -> CohortResult:
    """Co-RL on the unlabeled ``pool``: every member (in ``models``' order: the ring's) trains ``grpo.max_steps``
    steps of ``scenarios_per_step`` utterances x G routings in lockstep; under ``teacher`` the teacher
    (``settings.teacher``) labels the pool once, greedily, and is returned untrained. ``tokenizer``: the cohort's,
    or one per member name (a pretrained member reads its own vocabulary). ``gold``: the pool's withheld labels,
    for the pseudo-label accuracy only. ``teacher_votes``: the teacher's greedy votes on ``pool`` when the caller
    has them already. The models are trained in place and returned."""
    if not pool:
        raise ValueError("peer_rl: the unlabeled pool is empty")
    names = list(models)
    if len(names) < 2 and settings.reward != "self":
        raise ValueError(f"reward {settings.reward!r} needs at least 2 members, got {names}")
    if settings.reward == "teacher" and settings.teacher not in models:
        raise ValueError(f"peer_rl.teacher {settings.teacher!r} is not a member of the cohort {names}")
    rows = tile_to_step(range(len(pool)), settings.grpo.scenarios_per_step)
    n = len(rows)
    texts = [pool[i] for i in rows]
    labels = [gold[i] for i in rows] if gold is not None else None
    tokenizers = tokenizer if isinstance(tokenizer, dict) else dict.fromkeys(names, tokenizer)
    start = time.perf_counter()
    fixed = {}
    if settings.reward == "teacher":
        t = settings.teacher
        fixed[t] = _teacher_rows(models[t], tokenizers[t], pool, rows, teacher_votes)  # type: ignore[index]
    board = Board(names, settings, labels, say, fixed=fixed)
    lock = Lockstep(len(board.trained))
    trainers = [
        build_trainer(
            models[name],
            tokenizers[name],
            make_member_rollout(k, name, tokenizers[name], texts, board, lock),
            n,
            settings.grpo,
            output_dir / name,
            reward_name="peer_reward",
            seed=seed,  # one sampler seed: the same prompt order for every member
            callbacks=[FreezeWhen(lambda name=name: board.logs[name].collapsed is not None)],
        )
        for k, name in enumerate(board.trained)
    ]
    _train_in_lockstep(trainers, board.trained, lock)
    trained = {name: models[name] for name in fixed}
    for name, trainer in zip(board.trained, trainers, strict=True):
        trained[name] = trained_model(trainer)  # a LoRA member keeps its own adapter only, still an adapter
    for model in trained.values():
        model.eval()
    trained = {name: trained[name] for name in names}  # the ring's order
    return CohortResult(models=trained, logs=board.logs, seconds=time.perf_counter() - start, routings=board.routings)


def _teacher_rows(
    teacher: Any, tokenizer: Any, pool: Sequence[str], rows: Sequence[int], votes: Sequence[Label] | None
) -> list[Label]:
    """The teacher's greedy vote on each of ``rows`` of the pool (``votes``: its votes on the pool, when known)."""
    votes = votes if votes is not None else route_intents(teacher, tokenizer, pool)
    if len(votes) != len(pool):
        raise ValueError(f"{len(votes)} teacher votes for a pool of {len(pool)} utterances")
    return [votes[i] for i in rows]


def _train_in_lockstep(trainers: Sequence[Any], names: Sequence[str], lock: Lockstep) -> None:
    """Each trainer's ``train()`` in its own thread, one running at a time around the ring; the first failure is
    raised here once every thread has stopped."""

    def run(k: int) -> None:
        try:
            lock.wait(k)
            trainers[k].train()
        except Aborted:
            return
        except BaseException as exc:
            lock.fail(exc)
            return
        lock.pass_on(k, finished=True)

    threads = [threading.Thread(target=run, args=(k,), name=f"peer-{name}") for k, name in enumerate(names)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if lock.error is not None:
        raise lock.error


# ------------------------------------------------------------------------------------ 6. monitoring, collapse guard


def entropy(labels: Sequence[Label]) -> float:
    """Shannon entropy (nats) of the parseable labels' distribution (0 when there are none)."""
    counts = Counter(x for x in labels if x is not None)
    n = sum(counts.values())
    return -sum(c / n * math.log(c / n) for c in counts.values()) if n else 0.0


class CollapseGuard:
    """Fires once a member's last ``window`` votes have entropy < ``floor`` or one intent above ``max_share``."""

    def __init__(self, window: int, floor: float, max_share: float) -> None:
        self.votes: deque[Label] = deque(maxlen=window)
        self.floor, self.max_share = floor, max_share

    def update(self, votes: Sequence[Label]) -> str | None:
        """Add a step's votes; the reason it collapsed (an unparseable vote counts as its own answer), else None."""
        self.votes.extend(votes)
        if len(self.votes) < (self.votes.maxlen or 0):
            return None
        seen = list(self.votes)
        h = entropy(seen)
        top, n = Counter(seen).most_common(1)[0]
        if h < self.floor:
            return f"entropy of its last {len(seen)} votes {h:.3f} < {self.floor}"
        if n / len(seen) > self.max_share:
            return f"{n / len(seen):.2f} of its last {len(seen)} votes are {top!r} (> {self.max_share})"
        return None


def summarize(log: MemberLog, tail: int = 5) -> dict[str, Any]:
    """A member's training figures: mean reward, its last steps' entropy, agreement and label accuracies."""
    steps = log.steps[-tail:] or [{}]
    keys = sorted({k for s in steps for k in s if k != "step"})
    out: dict[str, Any] = {k: sum(s.get(k, 0.0) for s in steps) / len(steps) for k in keys}
    out["reward_mean"] = sum(s["reward"] for s in log.steps) / max(len(log.steps), 1)
    out.setdefault("entropy", float("nan"))  # no step: an untrained teacher
    for key in ("target_acc", "vote_acc"):  # over the whole run
        values = [s[key] for s in log.steps if key in s and not math.isnan(s[key])]
        if values:
            out[f"{key}_all"] = sum(values) / len(values)
    out["collapsed"], out["collapse_reason"], out["collapsed_step"] = (
        log.collapsed is not None,
        log.collapsed,
        log.collapsed_step,
    )
    return out
