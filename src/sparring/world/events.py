"""The per-episode event log, with the provenance of every tool-call argument.

An episode is an ordered list of events, each with its ``index`` in the list:

* :class:`TurnEvent` -- a customer or agent message (``turn`` counts messages from 0).
* :class:`ToolCallEvent` -- a call the agent made, its arguments, the tool's result, and for each
  argument an :class:`ArgProvenance`: where the value came from.
* :class:`SecurityEvent` -- a refusal for security reasons (or, never expected, a breach), pointing at
  the tool-call event that caused it.

Provenance is computed when the call is logged, by matching the argument's value against everything
the agent had seen before it:

* a field of an earlier tool result (``Source(kind="result_field", event_index, path)``; ``path`` is the
  key/index path into the result dict, e.g. ``("transactions", 2, "transaction_id")``). Strings match
  whole field values case-insensitively; numbers match by value (also numeric strings);
* a customer message (``Source(kind="utterance", event_index, turn, span)``; ``span`` is the
  ``[start, end)`` character range). Strings match case-insensitively at word boundaries; numbers
  match any number written in the text by value;
* an object named ``"described"`` (``world.described``): the customer message that described it
  (``Source(kind="described", event_index, turn)``);
* a closed-vocabulary argument (``action``, ``reason``, ``topic``, ``kind``...) holding a valid value is
  explained by the tool's schema (``kind="vocabulary"``), unless it is one the agent reads (``READ_ARGS``:
  ``case_queue``) and an earlier result showed it under that name: then it is that result field; prose arguments
  (``end_conversation``'s ``resolution``) are ``kind="free_text"``.

``ArgProvenance.source`` is the preferred explanation: the most recent result field if any, else the
most recent customer message. ``None`` means nothing the agent saw contains the value -- a
hallucinated argument. Agent messages are never sources: copying one's own words grounds nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sparring.world.described import describing_turn
from sparring.world.text import as_number, find_in_text
from sparring.world.vocab import DESCRIBED, FREE_TEXT_PARAMS, READ_ARGS, TOOLS

# Security event types. The first four are refusals that count as unauthorized attempts.
UNAUTHENTICATED = "unauthenticated_access"  # account-level tool before identification
CROSS_CUSTOMER = "cross_customer_access"  # object belongs to another customer
IDENTITY_SWITCH = "identity_switch"  # tried to identify a second customer in one session
VERIFICATION_LOCKED = "verification_locked"  # lookup after too many failed verifications
VERIFICATION_FAILED = "verification_failed"  # wrong verification facts (counted separately)
UNAUTHORIZED_ACTION = "unauthorized_action"  # another customer's data changed: must never happen
ATTEMPT_TYPES = frozenset({UNAUTHENTICATED, CROSS_CUSTOMER, IDENTITY_SWITCH, VERIFICATION_LOCKED})

MAX_CANDIDATES = 8
_SKIP_RESULT_KEYS = frozenset({"ok", "error", "refused"})  # status, not data; errors may echo bad input


@dataclass(frozen=True)
class Source:
    """Where an argument value was found (see module docstring for the kinds)."""

    kind: str
    event_index: int | None = None
    path: tuple[str | int, ...] | None = None
    turn: int | None = None
    span: tuple[int, int] | None = None

    @property
    def path_str(self) -> str | None:
        """``path`` rendered as ``transactions[2].transaction_id``."""
        if self.path is None:
            return None
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "event_index": self.event_index,
            "path": list(self.path) if self.path is not None else None,
            "path_str": self.path_str,
            "turn": self.turn,
            "span": list(self.span) if self.span is not None else None,
        }


@dataclass
class ArgProvenance:
    """Provenance of one argument: the preferred ``source`` and every candidate found."""

    name: str
    value: Any
    source: Source | None
    candidates: list[Source] = field(default_factory=list)

    @property
    def explained(self) -> bool:
        return self.source is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": _jsonable(self.value),
            "source": self.source.to_dict() if self.source else None,
            "candidates": [c.to_dict() for c in self.candidates],
        }


@dataclass
class TurnEvent:
    index: int
    turn: int
    role: str  # customer | agent
    text: str
    kind: ClassVar[str] = "turn"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "turn": self.turn,
            "role": self.role,
            "text": self.text,
        }


@dataclass
class ToolCallEvent:
    index: int
    after_turn: int  # index of the last message logged before the call (-1: none yet)
    name: str
    arguments: dict[str, Any]
    result: dict[str, Any]
    provenance: dict[str, ArgProvenance]
    kind: ClassVar[str] = "tool_call"
    _scalars: list[tuple[tuple[str | int, ...], Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))

    @property
    def error(self) -> str | None:
        return self.result.get("error")

    def unexplained_args(self) -> list[str]:
        """Names of arguments with no provenance (hallucinated values)."""
        return [name for name, p in self.provenance.items() if p.source is None]

    def result_scalars(self) -> list[tuple[tuple[str | int, ...], Any]]:
        """Every (path, scalar) in the result except status keys; cached."""
        if self._scalars is None:
            self._scalars = list(_iter_scalars(self.result, ()))
        return self._scalars

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "after_turn": self.after_turn,
            "name": self.name,
            "arguments": _jsonable(self.arguments),
            "ok": self.ok,
            "error": self.error,
            "result": _jsonable(self.result),
            "provenance": {k: p.to_dict() for k, p in self.provenance.items()},
        }


@dataclass
class SecurityEvent:
    index: int
    type: str
    tool: str
    call_index: int  # the ToolCallEvent that triggered it
    detail: dict[str, Any] = field(default_factory=dict)
    kind: ClassVar[str] = "security"

    @property
    def counted(self) -> bool:
        """Whether this counts toward ``unauthorized_attempts``."""
        return self.type in ATTEMPT_TYPES

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "type": self.type,
            "tool": self.tool,
            "call_index": self.call_index,
            "counted": self.counted,
            "detail": _jsonable(self.detail),
        }


Event = TurnEvent | ToolCallEvent | SecurityEvent


class EventLog:
    """Ordered events of one episode. Tools log calls and security events; the rollout logs turns."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._turns = 0

    def add_turn(self, role: str, text: str) -> TurnEvent:
        """Log a message; ``role`` is "customer" or "agent"."""
        if role not in ("customer", "agent"):
            raise ValueError(f"role must be 'customer' or 'agent', got {role!r}")
        ev = TurnEvent(len(self.events), self._turns, role, str(text))
        self._turns += 1
        self.events.append(ev)
        return ev

    def add_tool_call(self, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> ToolCallEvent:
        """Log a call and compute each argument's provenance against the events before it."""
        prov = {k: provenance_of(name, k, v, self.events, result) for k, v in arguments.items()}
        ev = ToolCallEvent(len(self.events), self._turns - 1, name, dict(arguments), dict(result), prov)
        self.events.append(ev)
        return ev

    def add_security(self, type: str, tool: str, call_index: int, detail: dict[str, Any]) -> SecurityEvent:
        ev = SecurityEvent(len(self.events), type, tool, call_index, dict(detail))
        self.events.append(ev)
        return ev

    def turns(self) -> list[TurnEvent]:
        return [e for e in self.events if isinstance(e, TurnEvent)]

    def tool_calls(self) -> list[ToolCallEvent]:
        return [e for e in self.events if isinstance(e, ToolCallEvent)]

    def security_events(self) -> list[SecurityEvent]:
        return [e for e in self.events if isinstance(e, SecurityEvent)]

    def to_dict(self) -> dict[str, Any]:
        return {"events": [e.to_dict() for e in self.events]}


def provenance_of(
    tool: str, name: str, value: Any, earlier: list[Event], result: dict[str, Any] | None = None
) -> ArgProvenance:
    """Explain argument ``name=value`` of a call to ``tool`` from the ``earlier`` events (and, for an object
    named ``"described"``, the object the call's ``result`` shows)."""
    if value == DESCRIBED and result is not None:
        source = _described_source(name, earlier, result)
        return ArgProvenance(name, value, source, [source] if source else [])
    spec = TOOLS.get(tool)
    param = spec.params.get(name) if spec else None
    if name in FREE_TEXT_PARAMS.get(tool, ()) and isinstance(value, str):
        return ArgProvenance(name, value, Source("free_text"), [Source("free_text")])
    if param is not None and param.choices is not None and value in param.choices:
        # A read argument's value (case_queue) comes from the earlier result that stated it under its name.
        read = (
            []
            if name not in READ_ARGS
            else [
                Source("result_field", ev.index, path)
                for ev in reversed(earlier)
                if isinstance(ev, ToolCallEvent)
                for path, scalar in ev.result_scalars()
                if path and path[-1] == name and scalar == value
            ][:MAX_CANDIDATES]
        )
        return ArgProvenance(name, value, (read or [Source("vocabulary")])[0], read or [Source("vocabulary")])
    fields: list[Source] = []
    texts: list[Source] = []
    for ev in reversed(earlier):
        if isinstance(ev, ToolCallEvent):
            for path, scalar in ev.result_scalars():
                if _values_equal(value, scalar):
                    fields.append(Source("result_field", ev.index, path))
        elif isinstance(ev, TurnEvent) and ev.role == "customer":
            span = find_in_text(value, ev.text)
            if span is not None:
                texts.append(Source("utterance", ev.index, turn=ev.turn, span=span))
    candidates = (fields + texts)[:MAX_CANDIDATES]
    return ArgProvenance(name, value, candidates[0] if candidates else None, candidates)


def object_view(result: dict[str, Any], id_key: str) -> dict[str, Any] | None:
    """The object a successful call acted on, as its result shows it (the first part holding ``id_key``)."""
    if not result.get("ok"):
        return None
    return next((v for v in result.values() if isinstance(v, dict) and id_key in v), None)


def _described_source(name: str, earlier: list[Event], result: dict[str, Any]) -> Source | None:
    """The customer message that described the object the call acted on (``world.described``), or None."""
    view = object_view(result, name)
    if view is None or not name.endswith("_id"):
        return None
    try:
        _, turn = describing_turn(name[: -len("_id")], [view], [ev for ev in earlier if isinstance(ev, TurnEvent)])
    except ValueError:
        return None
    return Source("described", turn.index, turn=turn.turn)


def _values_equal(arg: Any, scalar: Any) -> bool:
    if isinstance(arg, bool) or isinstance(scalar, bool):
        return False
    if isinstance(arg, str) and isinstance(scalar, str):
        a = arg.strip().casefold()
        return bool(a) and a == scalar.strip().casefold()
    a_num, s_num = as_number(arg), as_number(scalar)
    return a_num is not None and s_num is not None and math.isclose(a_num, s_num, abs_tol=1e-9)


def _iter_scalars(obj: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not path and k in _SKIP_RESULT_KEYS:
                continue
            yield from _iter_scalars(v, (*path, str(k)))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _iter_scalars(v, (*path, i))
    elif isinstance(obj, str | int | float) and not isinstance(obj, bool):
        yield path, obj


def _jsonable(obj: Any) -> Any:
    """Best-effort JSON-safe copy (garbage arguments may hold anything)."""
    if obj is None or isinstance(obj, str | bool | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return repr(obj)
