"""How an LM customer opens a conversation: with its scenario's own utterance, then in its own words
(:class:`OpensWithUtterance`, what ``_coop`` plays), or going on from that utterance in its first message
(:class:`ContinuesUtterance`, what adversaries play). Both wrap a policy of :mod:`sparring.lm.policies`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import replace

from sparring.lm.policies import LMPolicy, Policy, TurnOutput, TurnRequest


def _has_spoken(request: TurnRequest) -> bool:
    """Whether this side already has a message in the conversation (its own turns are ``assistant`` in its view)."""
    return any(m["role"] == "assistant" for m in request.messages)


class OpensWithUtterance:
    """A customer whose first message is its scenario's own utterance and whose every later message ``policy``
    writes: the simulator continuing a held-out customer's opening, as replay-style simulator evaluations do.

    What ``_coop`` plays (``coevolution.coop_opening: utterance``). The utterance comes from the ingested test
    split (Banking77's customers with that source), words the agent never trained on; the oracle recovers the
    goal's intent from the simulator's own turns only about half the time, so playing its openings scored the
    simulator's slips as the agent's misroutes (docs/results.md, coevolution.coop_opening)."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.tokenizer = policy, policy.tokenizer

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        opening = [not _has_spoken(r) for r in requests]
        later = [r for r, first in zip(requests, opening, strict=True) if not first]
        written = iter(self.policy.act(later) if later else [])
        return [
            TurnOutput(r.scenario.utterance.strip()) if first else next(written)
            for r, first in zip(requests, opening, strict=True)
        ]

    def release(self, keys: Iterable[Hashable] | None = None) -> None:
        if hasattr(self.policy, "release"):
            self.policy.release(keys)


class ContinuesUtterance:
    """A customer LM whose first message starts with its scenario's own utterance and goes on in its own words;
    every later message it writes whole. What adversaries play (``coevolution.adversary_opening: utterance``).

    RL-ADA's adversary learned Contextual Camouflage: the request stays, buried in dense, realistic detail. The
    1.5M-parameter simulator it starts from states another intent's problem in its own openings about half the
    time, so its "wins" were mostly unfaithful; continuing a real customer's request it starts faithful and can
    only win by what it adds (docs/results.md, coevolution.adversary_opening). The utterance is the
    request's ``prefix_ids``: the LM reads it as the message's start and generates after it (a space may lead what
    it adds), so its logprobs are of what it wrote."""

    def __init__(self, policy: LMPolicy) -> None:
        self.policy, self.tokenizer = policy, policy.tokenizer

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        def utterance(r: TurnRequest) -> list[int]:
            return self.tokenizer.encode(r.scenario.utterance.strip(), add_special_tokens=False)

        return self.policy.act([r if _has_spoken(r) else replace(r, prefix_ids=utterance(r)) for r in requests])

    def release(self, keys: Iterable[Hashable] | None = None) -> None:
        self.policy.release(keys)
