"""Clarifying moves (issue 25): the world's ask/confirm moves, the scripted customers' answers, the expert's use of
them, the judge's reading of answers given against the goal, and the simulator's training data holding them."""

from __future__ import annotations

from collections import Counter

import pytest

from sparring.agents.clarify import (
    OTHER_REQUEST,
    OWN_REQUEST,
    confirm_question,
    confirmed_intent,
    mark_restatement,
    which_question,
)
from sparring.agents.customer_prompt import identity_text
from sparring.agents.leaving import gives_up
from sparring.agents.scripted import CamouflagingCustomer, CooperativeCustomer, ExpertAgent
from sparring.agents.slots import describe_slots
from sparring.data.dialogues import generate_dialogues
from sparring.data.synthetic import utterance_frame
from sparring.evaluate.crossplay import failure_kind
from sparring.lm.policies import TurnOutput, TurnRequest
from sparring.rollout import run_episodes
from sparring.train.tracer import scripted_episodes, simulator_conversations
from sparring.world.answers import answer_kind, answers_against_goal, confirmation_answers, which_answers
from sparring.world.scenarios import build_world, sample_scenarios
from sparring.world.session import Session
from sparring.world.tools import ToolCall, execute
from sparring.world.vocab import CUSTOMER_MOVES, INTENT_SPECS


def _object_scenarios(scenarios, persona=None):
    return [
        s
        for s in scenarios
        if INTENT_SPECS[s.intent].target is not None
        and len(s.expected_calls) > 1
        and (persona is None or s.persona == persona)
    ]


def _request(scenario, heard: str) -> TurnRequest:
    messages = [
        {"role": "system", "content": "goal"},
        {"role": "assistant", "content": scenario.utterance},
        {"role": "user", "content": "Please verify your identity."},
        {"role": "assistant", "content": identity_text(scenario)},
        {"role": "user", "content": heard},
    ]
    return TurnRequest(role="customer", prompt_ids=None, messages=messages, scenario=scenario, seed=0, turn=3)


def test_the_moves_change_nothing_and_are_not_actions(heldout):
    scenario = _object_scenarios(heldout)[0]
    world, session = build_world(scenario), Session()
    before = world.state_dict()
    asked = execute(world, session, ToolCall("ask_customer", {"about": "card"}))
    confirmed = execute(world, session, ToolCall("confirm_request", {"intent": scenario.intent}))
    assert asked["ok"] and confirmed["ok"] and world.state_dict() == before
    assert not execute(world, session, ToolCall("ask_customer", {"about": "mortgage"}))["ok"]
    assert not execute(world, session, ToolCall("confirm_request", {"intent": "no_such_intent"}))["ok"]


@pytest.mark.parametrize("customer", [CooperativeCustomer(), CamouflagingCustomer()])
def test_scripted_customers_answer_which_and_confirmation(heldout, customer):
    scenario = _object_scenarios(heldout)[0]
    target = INTENT_SPECS[scenario.intent].target
    which = customer.reply(_request(scenario, which_question(target)))
    assert describe_slots(scenario) and describe_slots(scenario) in which  # the object's details, verbatim
    yes = customer.reply(_request(scenario, confirm_question(scenario.intent)))
    assert answer_kind(yes) == "yes"
    other = next(i for i, spec in INTENT_SPECS.items() if spec.tool == scenario.tool and i != scenario.intent)
    no = customer.reply(_request(scenario, confirm_question(other)))
    assert answer_kind(no) == "no" and scenario.utterance.strip() in no  # a no restates what they need


def test_confirmed_intent_reads_the_expert_wording():
    assert confirmed_intent(confirm_question("card_arrival")) == "card_arrival"
    assert confirmed_intent("Is there anything else I can help with?") is None
    assert answer_kind("Yes, that's right.") == "yes" and answer_kind("No, not quite. My card...") == "no"
    assert answer_kind("My card is lost") is None
    # agreement that opens with "no" is not a no (the scripted customer hands over its identity with one)
    assert answer_kind("No problem. My customer ID is C123.") is None and answer_kind("No worries, go ahead") is None
    assert answer_kind("No. Problem is my card") == "no"


def test_expert_asks_a_withholding_customer_and_passes(heldout):
    vague = _object_scenarios(heldout, "vague") + _object_scenarios(heldout, "impatient")
    assert vague
    episodes = run_episodes(vague, ExpertAgent(refs="described"), CooperativeCustomer(), max_turns=6, seed=0)
    assert all(e.outcome.strict_pass for e in episodes)
    assert all(any(c.name == "ask_customer" for c in e.log.tool_calls()) for e in episodes)
    asked, named = map(sum, zip(*(which_answers(e) for e in episodes), strict=True))
    assert asked >= len(episodes) and named == asked  # every answer names the goal's object
    never = run_episodes(vague[:5], ExpertAgent(refs="described"), _NeverDescribes(), max_turns=6, seed=0)
    asked, named = map(sum, zip(*(which_answers(e) for e in never), strict=True))
    assert asked >= 5 and named == 0


class _NeverDescribes(CooperativeCustomer):
    """Gives its identity but never says which object: the world must refuse a "described" call."""

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        out = []
        for r in requests:
            if not any(m["role"] == "assistant" for m in r.messages):
                out.append(TurnOutput("I have a problem with my account."))
            else:
                out.append(TurnOutput(identity_text(r.scenario) + " I'm not sure which one, sorry."))
        return out


def test_expert_asks_after_refusal_and_never_reports_success_after_it(heldout):
    scenarios = _object_scenarios(heldout)[:20]
    episodes = run_episodes(scenarios, ExpertAgent(refs="described"), _NeverDescribes(), max_turns=8, seed=0)
    for e in episodes:
        assert not e.outcome.strict_pass
        names = [c.name for c in e.log.tool_calls()]
        assert "ask_customer" in names
        agent_texts = [m.get("content") or "" for m in e.messages if m["role"] == "assistant"]
        assert not any("All done" in t for t in agent_texts)  # no false confirmation after a refusal
        refused = [c for c in e.log.tool_calls() if c.name == e.scenario.tool and not c.ok]
        if len(refused) >= 2:
            assert e.ended_by == "transfer_to_human"


def test_a_yes_to_the_wrong_request_is_an_answer_against_the_goal(heldout):
    scenario = next(s for s in _object_scenarios(heldout) if s.persona == "cooperative")

    class Liar(CooperativeCustomer):
        def reply(self, request: TurnRequest) -> str:
            heard = str(request.messages[-1]["content"]) if request.messages[-1]["role"] == "user" else ""
            return "Yes, exactly." if "Just to be sure" in heard else super().reply(request)

    honest = run_episodes([scenario], ExpertAgent(misconfirm=1.0), CooperativeCustomer(), max_turns=6, seed=0)[0]
    liar = run_episodes([scenario], ExpertAgent(misconfirm=1.0), Liar(), max_turns=6, seed=0)[0]
    confirms = [c.arguments["intent"] for c in honest.log.tool_calls() if c.name == "confirm_request"]
    assert confirms[0] != scenario.intent and confirms[-1] == scenario.intent  # wrong, no, then right
    assert answers_against_goal(honest) == 0 and honest.outcome.strict_pass
    assert answers_against_goal(liar) >= 1


def test_simulator_data_holds_which_answers_and_denials(heldout):
    episodes = scripted_episodes(heldout, seed=0)
    moves = Counter(c.name for e in episodes for c in e.log.tool_calls() if c.name in CUSTOMER_MOVES)
    assert moves["ask_customer"] > 0 and moves["confirm_request"] > 0
    denials = [
        t.text
        for e in episodes
        for t in e.log.events
        if t.kind == "turn" and t.role == "customer"
        if answer_kind(t.text) == "no"
    ]
    assert denials  # the misconfirming expert makes the customer correct it
    assert all(e.outcome.strict_pass for e in episodes)


def test_expert_checks_again_after_a_no_to_the_right_request(heldout):
    styles = ("vague", "camouflaged", "multi_part")
    scenario = next(s for s in _object_scenarios(heldout) if s.utterance_style in styles)

    class NoOnce(CooperativeCustomer):
        """Says no to the first confirmation, whatever it states (as LM customers sometimes do)."""

        def reply(self, request: TurnRequest) -> str:
            heard = str(request.messages[-1]["content"]) if request.messages[-1]["role"] == "user" else ""
            if "Just to be sure" in heard and "check I have it right" not in heard:
                return "No, not quite."
            return super().reply(request)

    episode = run_episodes([scenario], ExpertAgent(refs="described"), NoOnce(), max_turns=8, seed=0)[0]
    confirms = [c.arguments["intent"] for c in episode.log.tool_calls() if c.name == "confirm_request"]
    assert confirms == [scenario.intent, scenario.intent] and episode.outcome.strict_pass


def test_ceiling_replay_refuses_a_folder_without_a_run(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "ceiling_replay.py"
    done = subprocess.run([sys.executable, str(script), "--run", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode != 0 and str(tmp_path) in done.stderr and "Traceback" not in done.stderr
    alone = subprocess.run(
        [sys.executable, str(script), "--run", str(tmp_path), "--simulator-only"], capture_output=True, text=True
    )
    assert alone.returncode != 0 and "simulator_sft" in alone.stderr and "Traceback" not in alone.stderr


def test_a_case_stopped_at_the_payment_read_fails_as_undescribed(heldout):
    """Disputes and transfer cases read the payment before acting: a customer who never says which payment stops
    the expert at that read, and the failure is the undescribed object, not a misroute."""
    chained = [s for s in _object_scenarios(heldout) if INTENT_SPECS[s.intent].quotes_queue][:6]
    assert chained
    episodes = run_episodes(chained, ExpertAgent(refs="described"), _NeverDescribes(), max_turns=8, seed=0)
    for e in episodes:
        reads = [c for c in e.log.tool_calls() if c.name == "payment_details"]
        assert reads and not any(c.ok for c in reads) and not any(c.name == e.scenario.tool for c in e.log.tool_calls())
        assert failure_kind(e) == "undescribed"


def test_a_restated_request_is_marked_for_the_customer_only(heldout):
    """The customer's view of a confirmation says whether it states the customer's own request (issue 46); the
    agent's view, the world's log and the judge's episode keep the agent's words."""
    scenario = next(s for s in _object_scenarios(heldout) if s.persona == "cooperative")
    another = next(i for i in INTENT_SPECS if i != scenario.intent)
    own, other = confirm_question(scenario.intent), confirm_question(another)
    assert mark_restatement(own, scenario.intent) == f"{own} {OWN_REQUEST}"
    assert mark_restatement(other, scenario.intent) == f"{other} {OTHER_REQUEST}"
    assert mark_restatement("Which card do you mean?", scenario.intent) == "Which card do you mean?"
    assert mark_restatement(mark_restatement(own, scenario.intent), scenario.intent).count(OWN_REQUEST) == 1
    episode = run_episodes([scenario], ExpertAgent(misconfirm=1.0), CooperativeCustomer(), max_turns=6, seed=0)[0]
    heard = [m["content"] for m in episode.customer_messages if m["role"] == "user"]
    assert any(t.endswith(OTHER_REQUEST) for t in heard) and any(t.endswith(OWN_REQUEST) for t in heard)
    said = [str(m.get("content") or "") for m in episode.messages]
    said += [getattr(e, "text", "") or "" for e in episode.log.events]
    assert not any(OWN_REQUEST in t or OTHER_REQUEST in t for t in said)


def test_simulator_data_says_yes_to_its_own_request_and_no_to_another():
    """The rows the simulator's trainer receives: every restatement of the customer's own request is answered yes,
    every other one no (or the customer leaves the chat instead), and the yes-answers outnumber the denials."""
    dialogues = generate_dialogues(300, 0)
    utterances = utterance_frame(1, 0)
    episodes = scripted_episodes(sample_scenarios(utterances, 60, seed=0), seed=0)
    conversations = simulator_conversations(dialogues, utterances, episodes, seed=0, max_utterances=10)
    answers: dict[str, list[str | None]] = {OWN_REQUEST: [], OTHER_REQUEST: []}
    for conversation in conversations:
        for heard, said in zip(conversation, conversation[1:], strict=False):
            for mark, found in answers.items():
                if heard["role"] == "user" and heard["content"].endswith(mark) and said["role"] == "assistant":
                    found.append(answer_kind(said["content"]) or ("left" if gives_up(said["content"]) else None))
    own, other = answers[OWN_REQUEST], answers[OTHER_REQUEST]
    assert other and own.count("yes") > len(other)
    assert set(own) <= {"yes", "left"} and set(other) <= {"no", "left"}


def test_a_customer_who_denies_its_own_request_fails_as_denied_own(heldout):
    """The expert confirms the right request, the customer says no twice, the expert hands over: the customer's
    failure (denied_own), not the agent's misroute; the confirmation counts say the same."""

    class DeniesAll(CooperativeCustomer):
        def answer_confirmation(self, request: TurnRequest, heard: str) -> str:
            return "No, that's not it."

    episodes = run_episodes(heldout[:40], ExpertAgent(refs="described"), DeniesAll(), max_turns=10, seed=0)
    denied = [e for e in episodes if confirmation_answers(e)["own_denied"]]
    assert denied
    for e in denied:
        assert not any(c.name == e.scenario.tool and c.ok for c in e.log.tool_calls())
        assert failure_kind(e) == "denied_own"
        assert confirmation_answers(e)["own"] == confirmation_answers(e)["own_denied"] >= 1
    untouched = [e for e in episodes if not confirmation_answers(e)["own"]]
    assert untouched and all(failure_kind(e) != "denied_own" for e in untouched)
