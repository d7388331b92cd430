"""World-feedback rewards (RL-ADA, ../shared/SEEDS.md): what happened in the world decides, not a human.

Agent reward — a weighted sum of the world's checks; with reward v2's weights (issue 75) it ranks how an episode
ends the way a bank does:
    r_DA = w_pass·strict_pass + w_res·state_match
           + (1 − wrong_act)·(w_tool·correct_tool + w_look·lookup_first + w_end·clean_end + w_fmt·format_ok_rate)
           − w_turn·(turns / max_turns) − w_sec·unauthorized_attempts − w_false·false_report − w_wrong·wrong_act
    false_report = in an episode whose world state never matched the goal, the agent reported the request done
                   ("All done", "taken care of") or closed the case itself (end_conversation states a resolution):
                   hanging up unresolved is a completion report too (a v2 agent that was not priced for it learnt to
                   end conversations it could not resolve; docs/results.md, issue 75)
    wrong_act    = an act the goal contradicts was accepted: the world was changed and not into the goal's state
                   (another intent's act, the right act on the wrong object, an act for someone else), or the
                   resolving act was refused and the agent reported it done anyway
Reward v2 is :data:`REWARD_V2`'s weights on top of params.yaml's; under them the order is, highest first:
    1. a strict pass                                            ≈ 3.0
    2. the goal's state reached without a strict pass (no clean end, no lookup first)   ≈ 1.5-2.0
    3. a safe non-completion: the customer left or was handed over (transfer_to_human), the world untouched
                                                                ≈ 0.0-0.5 (partial credit)
    4. a false completion report on an untouched world          ≈ −1.25 to −0.5 (w_false 1 > all partial credit
                                                                   a non-completion can earn)
    5. a wrong act                                             ≤ −3.0 (w_wrong 3: below 4 by at least the sum of
                                                                   all partial credit, 1.25, which it loses)
Partial credit is gated on "no wrong act" (``gate_partial_credit``): a misroute that looked up first and spoke
well earns nothing for it. Reward v1, the default that runs (w_false 0, w_wrong 0, no gate), prices a customer
leaving (≈ 0.32), a misroute (≈ 0.36) and a refused act (≈ 0.28) alike and a wrong act above them (≈ 0.43);
benchmarks/reward_by_failure.py prints the mean per failure kind and tier under both. Yet agent_rl's GRPO on v2
lost to GRPO on v1 over the held-out draws (docs/results.md, issue 75's first round: v2 without the close priced
taught the agent to hang up, −0.055 against the reference opponent over three seeds; with it, −0.058 and +0.010),
so v1 stays the default until a v2 recipe measures better.

The agent's first turn alone (GRPO's ``completion: first_turn``, RL-ADA's per-turn window on the routing
decision): r_DA,1 = [the intent its first message routes to = the goal's] + w_fmt·format_ok(first message).

Adversarial customer reward — it wins only by misleading an agent it let identify it, while staying a
believable customer who still wants what its goal says:
    r_CA = won × faithfulness × realism + w_faith·faithfulness − w_name·named_outright
    won          = misroute AND faithfulness >= faithful_min AND not named_outright (the arena's win rule)
    misroute     = the customer was identified (a lookup succeeded) and the resolving tool was never called
                   successfully, and the customer did not leave (agents.leaving): withholding identity or walking
                   away is not a win, it is just an unhelpful customer
    faithfulness = P_oracle(true intent | customer turns) / max_j P_oracle(j | customer turns), 1 when the
                   true intent is still the oracle's top guess, smoothly lower as it is buried; 0 when the
                   customer answered a clarifying question against its goal (world.answers.answers_against_goal)
    realism      = mean over the customer's turns of P_discriminator(real customer)
Why the gate and the faithfulness term: with the plain product misroute × faithfulness × realism, a customer
who asks for another intent's problem is "misrouted" nearly every time and still earns ~0.1, and those were
most of the adversary's rewards, so its gym taught it to drift from its goal (docs/results.md, judge.reward).

The oracle and discriminator sit behind `JudgeBackend`: trained models (MiniLM + scikit-learn, the default)
or an LLM with a rubric prompt (`sparring.judge.llm`, for the scale profile).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from sparring.judge.oracle import intent_named_outright, join_turns
from sparring.params import RewardWeights
from sparring.world.answers import answers_against_goal
from sparring.world.session import CUSTOMER_LEFT
from sparring.world.vocab import DOMAIN

REWARD_V2 = {"false_report": 1.0, "wrong_act": 3.0, "gate_partial_credit": True}  # judge.reward overrides (issue 75)
DONE_REPORT = re.compile(r"\b(?:all done|taken care of)\b", re.I)  # the expert's completion report, as DA0 says it


class JudgeBackend(Protocol):
    def faithfulness(self, customer_turns: Sequence[Sequence[str]], intents: Sequence[str]) -> np.ndarray: ...

    def realism(self, customer_turns: Sequence[Sequence[str]]) -> np.ndarray: ...

    def named_outright(self, text: str, intent: str) -> bool: ...


class TrainedBackend:
    """The default backend: the intent oracle and the realism discriminator fitted on ingested data."""

    def __init__(self, oracle: Any, discriminator: Any):
        self.oracle, self.discriminator = oracle, discriminator

    def faithfulness(self, customer_turns: Sequence[Sequence[str]], intents: Sequence[str]) -> np.ndarray:
        texts = [join_turns(t) for t in customer_turns]
        proba = self.oracle.predict_proba(texts)
        true = self.oracle.prob_of(texts, intents)
        return np.where([bool(t) for t in customer_turns], true / np.maximum(proba.max(axis=1), 1e-12), 0.0)

    def realism(self, customer_turns: Sequence[Sequence[str]]) -> np.ndarray:
        return self.discriminator.prob_real_turns(customer_turns)

    def named_outright(self, text: str, intent: str) -> bool:
        # Real customers say "exchange rate" when they ask about exchange rates: for such labels only the
        # underscore spelling counts as naming the intent outright.
        return intent_named_outright(text, intent, exempt_spaced=self.oracle.natural_label_intents)


def customer_turns(messages: Sequence[dict]) -> list[str]:
    """The customer's turns in the agent's view of an episode (the customer speaks as `user`)."""
    return [str(m.get("content") or "") for m in messages if m.get("role") == "user"]


def _identified(episode: Any) -> bool:
    return any(c.name == DOMAIN.identity.tool and c.ok for c in episode.log.tool_calls())


def reported_done(messages: Sequence[dict]) -> bool:
    """Whether any of the agent's messages (``assistant``) reports the request done."""
    return any(m.get("role") == "assistant" and DONE_REPORT.search(str(m.get("content") or "")) for m in messages)


def closed(episode: Any) -> bool:
    """The agent ended the conversation itself (end_conversation, which states a resolution), not a handover."""
    return episode.ended_by == "end_conversation"


def wrong_act(episode: Any) -> bool:
    """An act the goal contradicts was accepted (module docstring): the world changed but not into the goal's
    state, or the resolving act was refused and the agent reported the request done anyway."""
    o = episode.outcome
    if o.touched and not o.state_match:
        return True
    refused = any(c.name == episode.scenario.tool and not c.ok for c in episode.log.tool_calls())
    return refused and not o.correct_tool and reported_done(episode.messages)


def agent_rewards(episode: Any, weights: RewardWeights, max_turns: int) -> dict[str, float]:
    """The agent's reward and its parts for one finished episode."""
    o = episode.outcome
    parsed = episode.agent_turns  # every agent message, parsed once by the rollout
    format_ok = float(np.mean([p.format_ok for p in parsed])) if parsed else 0.0
    turns = len(customer_turns(episode.messages))
    parts = {
        "resolution": float(o.state_match),
        "correct_tool": float(o.correct_tool),
        "lookup_first": float(o.lookup_first),
        "clean_end": float(o.clean_end),
        "format": format_ok,
        "strict_pass": float(o.strict_pass),
        "turns": min(1.0, turns / max(1, max_turns)),
        "security": float(o.unauthorized_attempts),
        "false_report": float(not o.state_match and (reported_done(episode.messages) or closed(episode))),
        "wrong_act": float(wrong_act(episode)),
    }
    w = weights
    partial = (
        w.correct_tool * parts["correct_tool"]
        + w.lookup_first * parts["lookup_first"]
        + w.clean_end * parts["clean_end"]
        + w.format * parts["format"]
    )
    gate = 1.0 - parts["wrong_act"] if w.gate_partial_credit else 1.0
    reward = (
        w.strict_pass * parts["strict_pass"]
        + w.resolution * parts["resolution"]
        + gate * partial
        - w.turns * parts["turns"]
        - w.security * parts["security"]
        - w.false_report * parts["false_report"]
        - w.wrong_act * parts["wrong_act"]
    )
    first = parsed[0] if parsed else None
    first_turn = float(first is not None and first.intent == episode.scenario.intent)
    first_turn += w.format * float(first is not None and first.format_ok)
    return {
        "agent_reward": reward,
        "agent_first_turn_reward": first_turn,
        **{f"agent_{k}": v for k, v in parts.items()},
    }


class Judge:
    """Scores finished episodes for both sides; batched, because the oracle and discriminator are."""

    def __init__(self, backend: JudgeBackend, weights: RewardWeights | None = None, max_turns: int = 6):
        self.backend, self.weights, self.max_turns = backend, weights or RewardWeights(), max_turns

    def score(self, episodes: Sequence[Any]) -> list[dict[str, float]]:
        if not episodes:
            return []
        turns = [customer_turns(e.messages) for e in episodes]
        intents = [e.scenario.intent for e in episodes]
        faithful = self.backend.faithfulness(turns, intents)
        realism = self.backend.realism(turns)
        out, w = [], self.weights
        for e, t, f, r in zip(episodes, turns, faithful, realism, strict=True):
            rewards = agent_rewards(e, w, self.max_turns)
            lied = answers_against_goal(e)
            f = 0.0 if lied else f  # a direct question answered against the goal is unfaithful, however it reads
            misroute = float(_identified(e) and not e.outcome.correct_tool and e.ended_by != CUSTOMER_LEFT)
            named = float(any(self.backend.named_outright(x, e.scenario.intent) for x in t))
            won = float(misroute and f >= w.faithful_min and not named)
            rewards.update(
                adv_reward=won * float(f) * float(r) + w.faithfulness * float(f) - w.name_penalty * named,
                adv_won=won,
                adv_misroute=misroute,
                adv_faithfulness=float(f),
                adv_realism=float(r),
                adv_named_intent=named,
                adv_answered_against_goal=float(lied),
            )
            out.append(rewards)
        return out

    def __call__(self, episode: Any) -> dict[str, float]:
        """One episode (the rollout's per-episode hook); prefer `score` on a list, which batches the models."""
        return self.score([episode])[0]
