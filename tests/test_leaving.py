"""A customer may give up (agents.leaving): the phrases are read on leaving lines only, a customer who leaves ends
the session unresolved, a goodbye after the resolving call does not, and leaving is no adversary's win."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sparring.agents.leaving import gives_up
from sparring.agents.scripted import CooperativeCustomer, ExpertAgent
from sparring.data.dialogues import generate_dialogues
from sparring.data.synthetic import utterance_frame
from sparring.evaluate.crossplay import failure_kind
from sparring.judge.rewards import Judge
from sparring.lm.policies import TurnRequest
from sparring.rollout import run_episodes
from sparring.world.session import CUSTOMER_LEFT

LEAVE = "Forget it, I'll sort it myself."


class LeavesAt(CooperativeCustomer):
    """The cooperative customer, who gives up at its ``turn``-th message."""

    def __init__(self, turn: int) -> None:
        self.turn = turn

    def reply(self, request: TurnRequest) -> str:
        own = sum(m["role"] == "assistant" for m in request.messages)
        return LEAVE if own + 1 == self.turn else super().reply(request)


class Believes:
    """A judge backend that finds every customer faithful and real, and never hears the intent named."""

    def faithfulness(self, turns: Sequence[Sequence[str]], intents: Sequence[str]) -> np.ndarray:
        return np.ones(len(turns))

    def realism(self, turns: Sequence[Sequence[str]]) -> np.ndarray:
        return np.ones(len(turns))

    def named_outright(self, text: str, intent: str) -> bool:
        return False


def test_leaving_lines_are_read_and_nothing_else_is():
    dialogues = generate_dialogues(1500, 0)
    leaving, other = [], []
    for row in dialogues.iter_rows(named=True):
        turns = row["turns"]
        for i, t in enumerate(turns):
            if t["role"] == "customer":
                last = row["outcome"] == "abandoned" and i == len(turns) - 1
                (leaving if last else other).append(t["text"])
    assert len(leaving) > 200
    recall = np.mean([gives_up(t) for t in leaving])
    assert recall >= 0.97, [t for t in leaving if not gives_up(t)][:5]  # the misses are typos in the line
    assert not [t for t in other if gives_up(t)]
    assert not [t for t in utterance_frame(20, 0)["text"].to_list() if gives_up(t)]


def test_a_customer_who_leaves_ends_the_session_unresolved(heldout):
    episodes = run_episodes(heldout[:40], ExpertAgent(), LeavesAt(2), max_turns=6, seed=0)
    for ep in episodes:
        assert ep.ended_by == CUSTOMER_LEFT and ep.rounds == 2
        assert ep.messages[-1]["role"] == "user" and ep.messages[-1]["content"] == LEAVE  # no agent turn after
        assert not ep.outcome.strict_pass and failure_kind(ep) == "left"


def test_a_goodbye_after_the_request_was_carried_out_is_only_a_goodbye(heldout):
    episodes = run_episodes(heldout[:40], ExpertAgent(), CooperativeCustomer(), max_turns=6, seed=0)
    said_bye = [ep for ep in episodes if any(gives_up(m["content"]) for m in ep.messages if m["role"] == "user")]
    assert len(said_bye) > 20  # the cooperative customer's closing line is a goodbye
    assert all(ep.ended_by == "end_conversation" and ep.outcome.strict_pass for ep in said_bye)


def test_walking_away_is_no_adversary_win(heldout):
    judge = Judge(Believes())
    left = run_episodes(heldout[:60], ExpertAgent(refs="described"), LeavesAt(3), max_turns=6, seed=0)
    identified = [
        ep for ep in left
        if ep.ended_by == CUSTOMER_LEFT and any(c.name == "lookup_account" and c.ok for c in ep.log.tool_calls())
    ]  # fmt: skip
    assert identified  # identified, then gone before the resolving call
    for scores in judge.score(identified):
        assert scores["adv_misroute"] == 0.0 and scores["adv_won"] == 0.0
