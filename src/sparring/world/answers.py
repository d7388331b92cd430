"""A customer's answers to the agent's clarifying moves, read off the world's log against the scenario's goal.

The agent asks which object the customer means (``ask_customer``) or confirms the request before it acts
(``confirm_request``); :mod:`sparring.agents.clarify` writes and recognises those questions. What the customer
answered is a fact of the episode: its log holds the accepted call and the customer's next message, the scenario
holds the goal, the world the customer's objects. :func:`answer_kind` reads a yes or no, and the judge counts answers
given against the hidden goal (:func:`answers_against_goal`): camouflage lives in what a customer adds, not in lies.
:func:`which_answers` and :func:`confirmation_answers` count the rest for failure analysis.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sparring.world.bank import plain
from sparring.world.described import mentions
from sparring.world.vocab import INTENT_SPECS, TARGETS

_AFFIRM = re.compile(r"^\W*(?:yes|yep|yeah|yup|correct|exactly|that's (?:right|it)|right)\b", re.I)
# "No problem" / "no worries" open with agreement: the scripted customer hands over its identity that way
_DENY = re.compile(
    r"^\W*(?:no(?!\s+(?:problem|worries|bother)\b)|nope|not quite|not really|not exactly|that's not|wrong)\b", re.I
)


def answer_kind(text: str) -> str | None:
    """ "yes" or "no" when a customer's message opens with an answer to a yes/no question, else None."""
    if _DENY.search(text):
        return "no"
    if _AFFIRM.search(text):
        return "yes"
    return None


def _goal_object(scenario: Any) -> tuple[str, str] | None:
    """(kind, id) of the object the scenario's resolving call acts on, or None."""
    target = INTENT_SPECS[scenario.intent].target
    if target is None or len(scenario.expected_calls) < 2:
        return None
    id_key = TARGETS[target][0]
    object_id = scenario.expected_calls[-1].arguments.get(id_key)
    return (target, object_id) if object_id else None


def reply_after(events: Sequence[Any], index: int) -> str | None:
    """The customer's first message after event ``index`` of an episode's log events, or None: their answer to the
    question the agent asked there."""
    return next((e.text for e in events if e.kind == "turn" and e.role == "customer" and e.index > index), None)


def _named_objects(episode: Any, kind: str, answer: str) -> list[dict[str, Any]]:
    """The customer's objects of ``kind`` (as plain dicts) that ``answer`` names."""
    customer = episode.world.customers.get(episode.scenario.customer_id)
    items = [] if customer is None else [plain(i) for i in getattr(customer, TARGETS[kind][1], [])]
    return [i for i in items if mentions(kind, i, answer)]


def _asked_about_goal(episode: Any, goal_object: tuple[str, str] | None) -> list[tuple[Any, str | None]]:
    """The episode's accepted clarifying calls (confirmations, and which-questions about ``goal_object``, the
    scenario's :func:`_goal_object`), each with the customer's answer (None when none came)."""
    return [
        (call, reply_after(episode.log.events, call.index))
        for call in episode.log.tool_calls()
        if call.ok
        and (
            call.name == "confirm_request"
            or (call.name == "ask_customer" and goal_object and call.arguments.get("about") == goal_object[0])
        )
    ]


def answers_against_goal(episode: Any) -> int:
    """How many of the agent's clarifying questions the customer answered against their hidden goal: a yes to a
    confirmation of another intent, a no to the right one, or a which-object answer naming another object of
    theirs than the one the goal is about."""
    goal_object, lies = _goal_object(episode.scenario), 0
    for call, answer in _asked_about_goal(episode, goal_object):
        if answer is None:
            continue
        if call.name == "confirm_request":
            said = answer_kind(answer)
            right = call.arguments.get("intent") == episode.scenario.intent
            lies += (said == "yes" and not right) or (said == "no" and right)
        elif goal_object is not None:  # a which-question about the goal's object (_asked_about_goal)
            kind, object_id = goal_object
            named = _named_objects(episode, kind, answer)
            lies += bool(named) and not any(i.get(TARGETS[kind][0]) == object_id for i in named)
    return int(lies)


def which_answers(episode: Any) -> tuple[int, int]:
    """(which-questions about the goal's object the customer answered, answers that name that object): how well a
    customer answers the question the world needs answered before the agent can act."""
    goal_object = _goal_object(episode.scenario)
    if goal_object is None:
        return 0, 0
    kind, object_id = goal_object
    asked = [a for c, a in _asked_about_goal(episode, goal_object) if c.name == "ask_customer" and a is not None]
    named = sum(any(i.get(TARGETS[kind][0]) == object_id for i in _named_objects(episode, kind, a)) for a in asked)
    return len(asked), named


def confirmation_answers(episode: Any) -> dict[str, int]:
    """The customer's answers to the agent's confirmations (``confirm_request``): ``own`` answered confirmations of
    the scenario's own intent and ``own_denied`` the no's among them (the customer's fault: the agent was right),
    ``other`` answered confirmations of another intent and ``other_yes`` the yes's among them."""
    counts = {"own": 0, "own_denied": 0, "other": 0, "other_yes": 0}
    for call, answer in _asked_about_goal(episode, None):
        if call.name != "confirm_request" or answer is None:
            continue
        said, own = answer_kind(answer), call.arguments.get("intent") == episode.scenario.intent
        counts["own" if own else "other"] += 1
        counts["own_denied"] += own and said == "no"
        counts["other_yes"] += not own and said == "yes"
    return counts
