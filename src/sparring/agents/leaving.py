"""A customer may give up: a message that says they are leaving ends the conversation, unresolved.

Real sessions end three ways (the dialogues' ``outcome``): resolved, escalated by the agent, or abandoned by the
customer. Before this the world had no way for a customer to leave, so every simulated session ran on until the
agent ended it or the turn limit cut it off, and a simulator could not be trained or measured on ending as real
customers do (TRACER's outcome-level fidelity, issue 29). The rollout reads each customer message with
:func:`gives_up`; a customer who gives up before the request was carried out ends the session (``ended_by =``
:data:`~sparring.world.session.CUSTOMER_LEFT`): the agent gets no further turn and the case is not resolved. After the
resolving call a goodbye is only a goodbye: the agent still closes the conversation itself.

The judge does not count a customer who walked away as an adversary's win (``judge.rewards``): leaving beats no
agent, so an adversary gains nothing by it.
"""

from __future__ import annotations

import re

# Phrases a customer uses to leave a chat: the dialogues' closing lines and their common variants. Checked on
# every generated customer turn and ingested utterance (tests/test_leaving.py): they fire on the leaving lines
# and on nothing else the customers say.
LEAVES = re.compile(
    r"\b(?:bye|goodbye|forget it|never ?mind|i'?m done(?: here)?\W*$|i'?m closing\b|i'?ll (?:just )?call instead"
    r"|sort it (?:out )?myself|(?:try|come back) (?:another time|later)|don'?t wor+y ab+out it"
    r"|take my (?:money|business) (?:somewhere|elsewhere)|find someone who will"
    r"|i (?:have|need|'ve got) to go\b(?!\s+\w))",
    re.I,
)


def gives_up(text: str) -> bool:
    """True when a customer message says the customer is leaving the chat."""
    return bool(LEAVES.search(text))
