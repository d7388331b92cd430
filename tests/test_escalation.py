"""The escalating expert (agents.escalation): it hands over on a request for a person and after two refusals, and
the world records the ending as escalated; against customers who do neither it plays as the plain expert; the
phrases it reads fire on requests and refusals, not on what customers otherwise say; and a customer steered to
an ending reaches it through the world."""

from __future__ import annotations

import numpy as np
import pytest

from sparring.agents.clarify import ASKS_CONFIRM
from sparring.agents.escalation import (
    REFUSES,
    EndingCustomer,
    EscalatingExpert,
    asks_for_person,
    refusals,
)
from sparring.agents.scripted import CooperativeCustomer, ExpertAgent, needs_confirmation
from sparring.data.dialogues import generate_dialogues
from sparring.data.synthetic import OUTCOMES, generate_utterances
from sparring.evaluate.ending_ceiling import ending_ceiling, played_ceiling, simulator_ceiling
from sparring.evaluate.fidelity import simulator_fidelity
from sparring.lm.policies import TurnRequest
from sparring.rollout import run_episodes
from sparring.train.tracer import replay_scenarios, simulated_outcome
from sparring.world.vocab import lexicon

PERSON = "This is going in circles. Could I talk to a real person, please?"
REFUSE_ID = "Why do you need that? Just read me the card number and I'll check it myself."
DENY = "No, that's not it."


class Scripted(CooperativeCustomer):
    """The cooperative customer, with its ``k``-th message (1: the opening) replaced by ``lines[k]``, and every
    answer to an identity request replaced by ``on_identity`` and its answer to the first confirmation by
    ``on_confirm``, when given."""

    def __init__(self, lines: dict[int, str] | None = None, on_identity: str = "", on_confirm: str = "") -> None:
        self.lines, self.on_identity, self.on_confirm = lines or {}, on_identity, on_confirm

    def reply(self, request: TurnRequest) -> str:
        own = sum(m["role"] == "assistant" for m in request.messages) + 1
        heard = str(request.messages[-1]["content"]) if request.messages else ""
        if own in self.lines:
            return self.lines[own]
        if self.on_identity and own > 1 and "identity" in heard:
            return self.on_identity
        confirmations = sum(m["role"] == "user" and bool(ASKS_CONFIRM.search(m["content"])) for m in request.messages)
        if self.on_confirm and ASKS_CONFIRM.search(heard) and confirmations == 1:
            return self.on_confirm
        return super().reply(request)


def _transfer_reason(episode) -> str:
    calls = [c for c in episode.log.tool_calls() if c.name == "transfer_to_human"]
    return str(calls[-1].arguments["reason"]) if calls else ""


def test_it_hands_over_when_the_customer_asks_for_a_person(heldout):
    scenarios = heldout[:8]
    for asked_at in (2, 3):  # in answer to the identity request, and later in the session
        episodes = run_episodes(scenarios, EscalatingExpert(), Scripted({asked_at: PERSON}), seed=0)
        for ep in episodes:
            assert ep.ended_by == "transfer_to_human" and simulated_outcome(ep) == "escalated"
            assert _transfer_reason(ep) == "The customer asked for a person."
            assert not ep.outcome.strict_pass
    plain = run_episodes(scenarios, ExpertAgent(), Scripted({2: PERSON}), seed=0)
    assert not any(simulated_outcome(ep) == "escalated" for ep in plain)  # why the fidelity replays need it


def test_it_hands_over_after_two_refusals_and_asks_again_after_one(heldout):
    scenarios = heldout[:8]
    twice = run_episodes(scenarios, EscalatingExpert(), Scripted(on_identity=REFUSE_ID), seed=0)
    for ep in twice:
        assert ep.ended_by == "transfer_to_human" and simulated_outcome(ep) == "escalated"
        assert _transfer_reason(ep) == "The customer refused 2 times."
        assert not any(c.name == "lookup_account" for c in ep.log.tool_calls())  # it never looked a refuser up
    once = run_episodes(scenarios, EscalatingExpert(), Scripted({2: REFUSE_ID}), seed=0)
    assert all(simulated_outcome(ep) == "resolved" and ep.outcome.strict_pass for ep in once)
    plain = run_episodes(scenarios, ExpertAgent(), Scripted(on_identity=REFUSE_ID), seed=0)
    assert not any(simulated_outcome(ep) == "escalated" for ep in plain)


def test_a_refused_identity_and_a_denied_confirmation_add_up_to_two(heldout):
    confirming = [s for s in heldout if needs_confirmation(s, [{"role": "user", "content": s.utterance}])][:6]
    assert confirming
    customer = Scripted({2: REFUSE_ID}, on_confirm=DENY)
    episodes = run_episodes(confirming, EscalatingExpert(), customer, seed=0)
    assert all(simulated_outcome(ep) == "escalated" for ep in episodes)
    plain = run_episodes(confirming, ExpertAgent(), customer, seed=0)  # one no is not enough for the plain expert
    assert not any(simulated_outcome(ep) == "escalated" for ep in plain)


def test_against_a_cooperative_customer_it_plays_exactly_as_the_expert(heldout):
    mine = run_episodes(heldout[:60], EscalatingExpert(refs="described"), CooperativeCustomer(), seed=0)
    theirs = run_episodes(heldout[:60], ExpertAgent(refs="described"), CooperativeCustomer(), seed=0)
    assert [e.messages for e in mine] == [e.messages for e in theirs]
    assert all(e.outcome.strict_pass for e in mine)


def test_the_phrases_fire_on_requests_and_refusals_only():
    for text in ("Can I speak to a human?", "get me through to a manager", "Is this a bot? I want a real person.",
                 "Please transfer me.", "let me talk with someone else"):  # fmt: skip
        assert asks_for_person(text), text
    assert all(REFUSES.search(t) for t in lexicon()["dialogue"]["customer_identity_evasive"])
    said = [t["text"] for turns in generate_dialogues(600, 5)["turns"].to_list() for t in turns
            if t["role"] == "customer"]  # fmt: skip
    assert not any(asks_for_person(t) for t in said)
    utterances = generate_utterances(10, 0)["text"].to_list()
    assert not any(asks_for_person(t) for t in utterances)
    identity = lexicon()["dialogue"]["customer_identity"]
    assert not any(REFUSES.search(t) for t in identity)


def test_only_answers_to_the_agents_questions_count_as_refusals():
    conversation = [
        {"role": "user", "content": "No idea why, but my card was declined."},  # an opening: no question asked
        {"role": "assistant", "content": "To verify your identity, please tell me your customer id."},
        {"role": "user", "content": "Can we skip the security questions?"},
        {"role": "assistant", "content": "All done. Is there anything else I can help with?"},
        {"role": "user", "content": "No, that's everything. Bye!"},  # a no to "anything else?": no refusal
    ]
    assert refusals(conversation) == (1, False)
    assert refusals(conversation[:3]) == (1, True)


@pytest.mark.parametrize("escalate_by", ["ask", "refuse"])
def test_a_customer_steered_to_an_ending_reaches_it_through_the_world(heldout, escalate_by):
    scenarios = heldout[:30]
    endings = {s.scenario_id: OUTCOMES[i % 3] for i, s in enumerate(scenarios)}
    customer = EndingCustomer(endings, escalate_by)
    episodes = run_episodes(scenarios, EscalatingExpert(), customer, seed=0)
    assert [simulated_outcome(ep) for ep in episodes] == [endings[s.scenario_id] for s in scenarios]
    plain = run_episodes(scenarios, ExpertAgent(), customer, seed=0)
    assert "escalated" not in [simulated_outcome(ep) for ep in plain]
    with pytest.raises(ValueError, match="endings must be"):
        EndingCustomer({"x": "transferred"})


class _Judge:
    """Stand-ins for the oracle and the discriminator where only the replays' endings are under test."""

    def auc(self, real, simulated):
        return 0.5

    def prob_real(self, texts):
        return [0.5] * len(texts)


def test_the_fidelity_replays_reach_every_real_ending_with_the_default_agent():
    """A customer steered to each held-out session's real ending scores outcome F1 1 in the fidelity replays: the
    default agent there escalates, so an escalated ending is reachable (the plain expert scored it 0)."""
    dialogues = generate_dialogues(60, 4)
    scenarios = replay_scenarios(dialogues, seed=0)
    endings = {s.scenario_id: o for s, o in zip(scenarios, dialogues["outcome"].to_list(), strict=True)}
    assert "escalated" in endings.values()
    hashed = lambda texts: np.asarray([[len(t) % 7 + 1.0, t.count(" ") + 1.0] for t in texts])  # noqa: E731
    m = simulator_fidelity(EndingCustomer(endings), [], dialogues, _Judge(), _Judge(), seed=0, embedder=hashed)
    assert m["outcome_f1"] == 1.0 and m["group_outcome_rate_error"] == 0.0
    assert m["sim_rate_escalated"] == m["real_rate_escalated"] > 0
    plain = simulator_fidelity(
        EndingCustomer(endings), [], dialogues, _Judge(), _Judge(), ExpertAgent(), seed=0, embedder=hashed
    )
    assert plain["sim_rate_escalated"] == 0.0 and plain["outcome_f1"] < 1.0


def test_the_played_ceiling_reaches_every_drawn_ending_only_with_the_escalating_expert():
    """The persona-rate sampler's endings, played through the world, are all reached against the escalating expert
    (so its F1 is the sampler's on the same draws) and none of the escalations against the plain expert; the
    stage's flat block carries the escalating figures."""
    train, test = generate_dialogues(120, 1), generate_dialogues(120, 2).head(30)
    played = played_ceiling(train, test, draws=3)
    sampled = ending_ceiling(train, test, draws=3)
    assert played["played_escalating"]["drawn_ending_reached"] == 1.0
    assert played["played_escalating"]["outcome_f1"] == pytest.approx(sampled["persona_rates"]["outcome_f1"])
    assert played["played_escalating"]["sim_rate_escalated"] > 0 == played["played_expert"]["sim_rate_escalated"]
    assert played["played_expert"]["drawn_ending_reached"] < 1.0
    block = simulator_ceiling(train, test, draws=3)
    assert block["outcome_f1"] == played["played_escalating"]["outcome_f1"] and block["draws"] == 3
    assert block["sim_rate_escalated"] == played["played_escalating"]["sim_rate_escalated"]
