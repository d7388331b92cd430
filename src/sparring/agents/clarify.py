"""Clarifying moves (issue 25): the agent asks which object the customer means, or confirms the request before it
acts, and the customer answers.

The world knows the two moves as the tools ``ask_customer`` and ``confirm_request``
(:data:`sparring.world.vocab.CUSTOMER_MOVES`): they change nothing, end the agent's turn and cost a turn (the
judge's turn term), so asking every time is not free and never asking loses against a customer who conceals
what they mean. The customer reads only the message's text: the scripted expert writes it with
:func:`which_question` and :func:`confirm_question`, the scripted customers recognise it with :data:`ASKS_WHICH`
and :data:`ASKS_CONFIRM`. What the customer answered is read off the world's log (:mod:`sparring.world.answers`,
where the judge finds answers given against the hidden goal): camouflage lives in what a customer adds, not in lies.

A customer reads a restated request through :func:`mark_restatement`: in its own view (never the agent's) the
restatement ends with :data:`OWN_REQUEST` or :data:`OTHER_REQUEST`, whether it states the customer's own goal. A
tiny simulator did not tie its yes or no to the request ~200 tokens back in its goal (issue 46): it denied its own
request as often as its training data denied wrong ones. A customer knows what it wants; the mark is that knowledge
where the answer is written, as ``[details]`` is for which-questions, and the customer still writes its own words.
"""

from __future__ import annotations

import re
from functools import cache

from sparring.world.vocab import DOMAIN, lexicon

# The question the expert asks for each kind of object (what identifies it: world.described.mentions), and an agent
# turn that asks which one: the domain file's objects (their `which` and `words`).
WHICH_QUESTIONS: dict[str, str] = dict(DOMAIN.object_questions)
_OBJECT_WORDS = dict.fromkeys(w for words in DOMAIN.object_words.values() for w in words)  # in order, once each
ASKS_WHICH = re.compile(rf"\bwhich\s+(?:one|{'|'.join(_OBJECT_WORDS)})\b", re.I)
ASKS_CONFIRM = re.compile(
    r"just to be sure|just so i've got this right|to confirm|to check:|is that (?:right|correct)|have i understood",
    re.I,
)

OWN_REQUEST = "[your request]"
OTHER_REQUEST = "[not your request]"


@cache
def _summaries() -> dict[str, str]:
    return {intent: entry["summary"] for intent, entry in lexicon()["intents"].items()}


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
