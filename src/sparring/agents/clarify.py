"""Clarifying moves (issue 25): the agent asks which object the customer means, or confirms the request before it
acts, and the customer answers.

The world knows the two moves as the tools ``ask_customer`` and ``confirm_request``
(:data:`sparring.world.vocab.CUSTOMER_MOVES`): they change nothing, end the agent's turn and cost a turn (the
judge's turn term), so asking every time is not free and never asking loses against a customer who conceals
what they mean. The customer reads only the message's text: the scripted expert writes it with
:func:`which_question` and :func:`confirm_question`, the scripted customers recognise it with :data:`ASKS_WHICH`
and :data:`ASKS_CONFIRM`, and the judge reads a customer's yes or no with :func:`answer_kind` to find answers
given against the hidden goal (:func:`answers_against_goal`): camouflage lives in what a customer adds, not in lies.

A customer reads a restated request through :func:`mark_restatement`: in its own view (never the agent's) the
restatement ends with :data:`OWN_REQUEST` or :data:`OTHER_REQUEST`, whether it states the customer's own goal. A
tiny simulator did not tie its yes or no to the request ~200 tokens back in its goal (issue 46): it denied its own
request as often as its training data denied wrong ones. A customer knows what it wants; the mark is that knowledge
where the answer is written, as ``[details]`` is for which-questions, and the customer still writes its own words.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from sparring.world.bank import plain
from sparring.world.described import mentions
from sparring.world.vocab import INTENT_SPECS, TARGETS

# The question the expert asks for each kind of object: what identifies it (world.described.mentions).
WHICH_QUESTIONS: dict[str, str] = {
    "card": "Which card do you mean? Please tell me the kind of card and its last four digits.",
    "transaction": "Which payment do you mean? Please tell me the merchant and the amount.",
    "transfer": "Which transfer do you mean? Please tell me who it was to or from and the amount.",
    "top_up": "Which top-up do you mean? Please tell me how you topped up and the amount.",
    "beneficiary": "Which payee do you mean? Please tell me their name.",
}
ASKS_WHICH = re.compile(r"\bwhich\s+(?:one|card|payment|transaction|transfer|top-?up|payee|beneficiary)\b", re.I)
ASKS_CONFIRM = re.compile(
    r"just to be sure|just so i've got this right|to confirm|to check:|is that (?:right|correct)|have i understood",
    re.I,
)
_AFFIRM = re.compile(r"^\W*(?:yes|yep|yeah|yup|correct|exactly|that's (?:right|it)|right)\b", re.I)
# "No problem" / "no worries" open with agreement: the scripted customer hands over its identity that way
_DENY = re.compile(
    r"^\W*(?:no(?!\s+(?:problem|worries|bother)\b)|nope|not quite|not really|not exactly|that's not|wrong)\b", re.I
)


OWN_REQUEST = "[your request]"
OTHER_REQUEST = "[not your request]"


@cache
def _summaries() -> dict[str, str]:
    raw = resources.files("sparring.data").joinpath("synthetic_lexicon.json").read_text("utf-8")
    return {intent: entry["summary"] for intent, entry in json.loads(raw)["intents"].items()}


def summary(intent: str) -> str:
    """The request ``intent`` stands for, as the agent would restate it ("a card payment was declined")."""
    return _summaries()[intent]


def which_question(kind: str) -> str:
    """The expert's question for an object of ``kind`` (a key of ``world.vocab.TARGETS``)."""
    return WHICH_QUESTIONS[kind]


def confirm_question(intent: str) -> str:
    """The expert's confirmation of ``intent`` before it acts."""
    return f"Just to be sure: {summary(intent)}?"


def confirmed_intent(text: str) -> str | None:
    """The intent whose summary ``text`` states (the longest that fits), or None when it states none."""
    low = text.lower()
    found = [intent for intent, s in _summaries().items() if s.lower() in low]
    return max(found, key=lambda i: len(summary(i))) if found else None


def mark_restatement(text: str, intent: str) -> str:
    """The customer's view of an agent message: a question that restates a request (:func:`confirmed_intent`)
    gets :data:`OWN_REQUEST` appended when it is ``intent``'s, the customer's own, else :data:`OTHER_REQUEST`."""
    if "?" not in text or OWN_REQUEST in text or OTHER_REQUEST in text:
        return text
    stated = confirmed_intent(text)
    if stated is None:
        return text
    return f"{text} {OWN_REQUEST if stated == intent else OTHER_REQUEST}"


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


def _answer_after(log: Any, index: int) -> str | None:
    """The customer's first message after event ``index`` of the log, or None."""
    return next((e.text for e in log.events if e.kind == "turn" and e.role == "customer" and e.index > index), None)


def _named_objects(episode: Any, kind: str, answer: str) -> list[dict[str, Any]]:
    """The customer's objects of ``kind`` (as plain dicts) that ``answer`` names."""
    customer = episode.world.customers.get(episode.scenario.customer_id)
    items = [] if customer is None else [plain(i) for i in getattr(customer, TARGETS[kind][1], [])]
    return [i for i in items if mentions(kind, i, answer)]


def _asked_about_goal(episode: Any, goal_object: tuple[str, str] | None) -> list[tuple[Any, str | None]]:
    """The episode's accepted clarifying calls (confirmations, and which-questions about ``goal_object``, the
    scenario's :func:`_goal_object`), each with the customer's answer (None when none came)."""
    return [
        (call, _answer_after(episode.log, call.index))
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
