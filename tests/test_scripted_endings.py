"""Scripted episodes that end as each persona's real sessions do (issue 58): the endings the simulator's SFT rows
show follow the persona rates of the dialogues, read off the world as the stage-2 reward reads them; a leaver says
the dialogues' own leave line, a refuser is handed over by the escalating expert; a persona the dialogues lack is
refused by name; and the fidelity report gives each persona's ending shares and a record per replayed session."""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl
import pytest

from sparring.agents.customer_prompt import PERSONA_BEHAVIOUR
from sparring.agents.escalation import REFUSES, EndingCustomer
from sparring.agents.leaving import gives_up
from sparring.data.dialogues import generate_dialogues
from sparring.data.synthetic import OUTCOMES, utterance_frame
from sparring.evaluate.fidelity import ending_shares_by_persona, simulator_fidelity
from sparring.train.scripted_endings import persona_ending_rates, refusal_lines
from sparring.train.tracer import replay_scenarios, scripted_episodes, simulated_outcome, simulator_conversations
from sparring.world.scenarios import sample_scenarios
from sparring.world.session import CUSTOMER_LEFT

# Personas whose dialogues all end one way, and one whose end every way (camouflaging: none at all).
ONLY = {"cooperative": "resolved", "impatient": "abandoned", "social_engineering": "escalated"}


@pytest.fixture(scope="module")
def dialogues() -> pl.DataFrame:
    frame = generate_dialogues(400, 3)
    keep = pl.col("persona") == "vague"
    for persona, outcome in ONLY.items():
        keep |= (pl.col("persona") == persona) & (pl.col("outcome") == outcome)
    return frame.filter(keep)


@pytest.fixture(scope="module")
def scenarios():
    weights = {"cooperative": 1.0, "impatient": 1.0, "social_engineering": 1.0, "vague": 2.0}
    return sample_scenarios(utterance_frame(2, 0), 100, seed=0, personas=weights)


@pytest.fixture(scope="module")
def episodes(scenarios, dialogues):
    return scripted_episodes(scenarios, seed=0, dialogues=dialogues)


def _leave_lines(dialogues: pl.DataFrame) -> set[str]:
    """The last customer turn of every abandoned dialogue."""
    rows = dialogues.filter(pl.col("outcome") == "abandoned")["turns"]
    return {[t["text"] for t in turns if t["role"] == "customer"][-1] for turns in rows}


def _persona(goal: str) -> str:
    return next(p for p, text in PERSONA_BEHAVIOUR.items() if text in goal)


def test_the_trainers_rows_end_at_each_personas_rates(scenarios, dialogues, episodes):
    """Per persona, the endings read off the world match the dialogues' rates up to rounding, and so do the endings
    the SFT rows show (a leave line, two refusals, or neither), in the conversations the trainer receives."""
    rates = persona_ending_rates(dialogues, ["vague"])["vague"]
    assert min(rates) > 0.05  # the mixed persona ends every way
    ends = Counter((e.scenario.persona, simulated_outcome(e)) for e in episodes)
    n = Counter(s.persona for s in scenarios)
    for persona, outcome in ONLY.items():
        assert ends[(persona, outcome)] == n[persona] > 5
    for k, outcome in enumerate(OUTCOMES):
        assert abs(ends[("vague", outcome)] - rates[k] * n["vague"]) <= 1

    rows = simulator_conversations(dialogues.head(0), utterance_frame(1, 0), episodes, seed=0, max_utterances=0)
    assert len(rows) == len(episodes)
    refusals, leave_lines = set(refusal_lines(dialogues)), _leave_lines(dialogues)
    shown = Counter()
    for row in rows:
        said = [m["content"] for m in row if m["role"] == "assistant"]
        ending = "abandoned" if said[-1] in leave_lines else "escalated" if said[-1] in refusals else "resolved"
        shown[(_persona(row[0]["content"]), ending)] += 1
    assert shown == ends


def test_a_refuser_is_handed_over_and_a_leaver_leaves_with_a_real_leave_line(dialogues, episodes):
    """An escalated episode refuses twice in the dialogues' words and ends with the escalating expert's hand-over;
    an abandoned one ends on the last customer line of one of its persona's abandoned dialogues."""
    refusals = set(refusal_lines(dialogues))
    assert refusals and all(REFUSES.search(line) for line in refusals)
    escalated = [e for e in episodes if simulated_outcome(e) == "escalated"]
    left = [e for e in episodes if simulated_outcome(e) == "abandoned"]
    assert escalated and left
    for e in escalated:
        own = [m["content"] for m in e.customer_messages if m["role"] == "assistant"]
        assert own[-2] in refusals and own[-1] in refusals
        assert e.ended_by == "transfer_to_human" and e.log.tool_calls()[-1].name == "transfer_to_human"
        assert "pass you to a colleague" in next(m for m in reversed(e.messages) if m["role"] == "assistant")["content"]
    for e in left:
        leave_lines = _leave_lines(dialogues.filter(pl.col("persona") == e.scenario.persona))
        assert e.ended_by == CUSTOMER_LEFT and e.messages[-1]["content"] in leave_lines
        assert gives_up(e.messages[-1]["content"])


def test_the_episodes_are_deterministic_and_all_resolved_without_dialogues(scenarios, dialogues, episodes):
    again = scripted_episodes(scenarios, seed=0, dialogues=dialogues)
    assert [e.messages for e in again] == [e.messages for e in episodes]
    assert {simulated_outcome(e) for e in scripted_episodes(scenarios[:20], seed=0)} == {"resolved"}


def test_a_persona_without_dialogues_is_refused_by_name(scenarios, dialogues):
    camouflaging = sample_scenarios(utterance_frame(1, 0), 5, seed=0, personas={"camouflaging": 1.0})
    with pytest.raises(ValueError, match="camouflaging"):
        scripted_episodes([*scenarios[:5], *camouflaging], seed=0, dialogues=dialogues)
    with pytest.raises(ValueError, match="camouflaging"):
        persona_ending_rates(dialogues.with_columns(outcome=pl.lit("unknown")), ["camouflaging", "vague"])


def test_ending_shares_by_persona():
    shares = ending_shares_by_persona(
        ["resolved", "abandoned", "escalated", "resolved"], ["resolved", "resolved", "escalated", "abandoned"],
        ["a", "a", "b", "b"],
    )  # fmt: skip
    assert shares["real_rate_resolved_a"] == 0.5 and shares["sim_rate_resolved_a"] == 1.0
    assert shares["real_rate_abandoned_b"] == 0.0 and shares["sim_rate_abandoned_b"] == 0.5
    assert sum(shares[f"sim_rate_{o}_b"] for o in OUTCOMES) == 1.0


class _Judge:
    """Oracle and discriminator stand-ins: the oracle names one intent for every text."""

    def __init__(self, intent: str = "") -> None:
        self.intent = intent

    def predict(self, texts):
        return [self.intent] * len(texts)

    def prob_of(self, texts, intents):
        return [0.5] * len(texts)

    def auc(self, real, simulated):
        return 0.5

    def prob_real(self, texts):
        return [0.5] * len(texts)


def test_the_fidelity_report_gives_per_persona_shares_and_one_record_per_session():
    test = generate_dialogues(40, 5)
    endings = {s.scenario_id: o for s, o in zip(replay_scenarios(test, 0), test["outcome"].to_list(), strict=True)}
    hashed = lambda texts: np.asarray([[len(t) % 7 + 1.0, t.count(" ") + 1.0] for t in texts])  # noqa: E731
    sessions: list[dict] = []
    first = test["intent"][0]
    m = simulator_fidelity(
        EndingCustomer(endings), [], test, _Judge(first), _Judge(), seed=0, embedder=hashed, sessions=sessions
    )
    for persona in set(test["persona"].to_list()):
        for o in OUTCOMES:
            assert m[f"sim_rate_{o}_{persona}"] == m[f"real_rate_{o}_{persona}"]
    assert [s["session_id"] for s in sessions] == test["id"].to_list()
    assert all(s["simulated_ending"] == s["real_ending"] for s in sessions)
    assert [s["faithful"] for s in sessions] == [i == first for i in test["intent"].to_list()]
    distances = [s["trajectory_distance"] for s in sessions if s["trajectory_distance"] is not None]
    assert np.mean(distances) == pytest.approx(m["trajectory_distance"], abs=1e-3)
