"""Readers of an agent-view transcript (the messages an agent reads: customer turns, its own calls and their
results), shared by the scripted policies, the escalation and ending rules and the social engineer."""

from __future__ import annotations

import json
import re
from typing import Any

from sparring.world.vocab import DOMAIN, QUEUE

# An agent turn that asks for identity, and each identifying value where a customer gives it: the domain's wording.
ASKS_IDENTITY = re.compile(DOMAIN.identity.asked, re.I)
_IDENTITY_READERS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (key, DOMAIN.identity.reader(key)) for key in DOMAIN.identity.keys
)


def tool_results(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(tool name, result as the agent read it; {} when unreadable) of every call in an agent-view conversation."""
    results: list[tuple[str, dict[str, Any]]] = []
    pending: str | None = None
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            pending = m["tool_calls"][0]["function"]["name"]
        elif m["role"] == "tool" and pending is not None:
            try:
                result = json.loads(m["content"])
            except ValueError:
                result = {}
            results.append((pending, result if isinstance(result, dict) else {}))
            pending = None
    return results


def call_key(name: str | None, arguments: dict[str, Any] | None) -> tuple[str | None, list[tuple[str, str]]]:
    """A call as (name, its arguments sorted, as text): two turns make the same call when their keys are equal."""
    return name, sorted((k, str(v)) for k, v in (arguments or {}).items())


def tool_history(messages: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """(tool name, ok) of every call in an agent-view conversation, in order."""
    return [(name, bool(result.get("ok"))) for name, result in tool_results(messages)]


def identity_facts(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Identity facts the customer wrote so far (a later message overrides an earlier one)."""
    facts: dict[str, str] = {}
    for m in messages:
        if m["role"] != "user":
            continue
        text = str(m.get("content") or "")
        for key, pattern in _IDENTITY_READERS:
            found = pattern.search(text)  # the first in a message: later ones describe the problem
            if found:
                facts[key] = found.group(1)
    return facts


def tool_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every call (name, arguments) in an agent-view conversation, in order."""
    return [
        {"name": c["function"]["name"], "arguments": dict(c["function"].get("arguments") or {})}
        for m in messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or ()
    ]


def read_queue(messages: list[dict[str, Any]]) -> str | None:
    """The ``case_queue`` the last successful ``payment_details`` result in the conversation showed, or None."""
    read = [r for name, r in tool_results(messages) if name == "payment_details" and r.get("ok")]
    return read[-1].get(QUEUE) if read else None


def last_customer_message(messages: list[dict[str, Any]]) -> str:
    """The customer's latest message in an agent-view conversation ("" before the first)."""
    return next((str(m.get("content") or "") for m in reversed(messages) if m["role"] == "user"), "")
