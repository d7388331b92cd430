"""Tool calls: validation, authentication and the :func:`execute` entry point.

``execute(world, session, call)`` never raises. Whatever the call, it returns a result dict
``{"ok": bool, "error": str | None, ...fields}`` and logs the call (with argument provenance) in
``session.log``; security refusals add a :class:`~sparring.world.events.SecurityEvent` after it.

Order of checks: known tool -> conversation still open -> identified (account-level tools) ->
argument types and vocabulary -> object ownership -> preconditions -> state change. A refused,
invalid or crashing call changes nothing; a call that changed another customer's data (impossible by
construction, but measured) is undone and logged as an ``unauthorized_action`` security event.
"""

from __future__ import annotations

import json
import math
import pickle
import re
from dataclasses import dataclass, field
from typing import Any

from sparring.world.calls import Ctx, Refusal, ToolError
from sparring.world.domain_code import domain_code
from sparring.world.events import UNAUTHENTICATED, UNAUTHORIZED_ACTION
from sparring.world.session import Session
from sparring.world.state import World
from sparring.world.vocab import CUSTOMER_MOVES, DOMAIN, ENDING_TOOLS, INTENT_SPECS, TOOLS, ToolSpec

IDENTITY_TOOL = DOMAIN.identity.tool


@dataclass
class ToolCall:
    """A call the agent makes: tool ``name`` and keyword ``arguments``."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.arguments)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        return cls(name=d["name"], arguments=dict(d.get("arguments") or {}))


def execute(world: World, session: Session, call: Any) -> dict[str, Any]:
    """Run ``call`` (a ToolCall, or a dict with name/arguments) against ``world``; never raises."""
    name, args, problem = _coerce(call)
    security: list[tuple[str, dict[str, Any]]] = []
    if problem is not None:
        result = _fail(problem)
    else:
        try:
            result, security = _run(world, session, name, args)
        except Exception as exc:  # why: a tool bug must surface as a failed call, not crash a rollout
            result = _fail(f"internal error: {type(exc).__name__}: {exc}")
    try:
        event = session.log.add_tool_call(name, args, result)
        for typ, detail in security:
            session.log.add_security(typ, name, event.index, detail)
    except Exception:  # pragma: no cover - logging plain data should not fail; never let it raise
        pass
    return result


def _fail(message: str, refused: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"ok": False, "error": message}
    if refused:
        out["refused"] = True
    return out


def _coerce(call: Any) -> tuple[str, dict[str, Any], str | None]:
    """(name, arguments, problem): normalise the many shapes a model may produce."""
    if isinstance(call, dict) and isinstance(call.get("function"), dict):
        call = call["function"]  # OpenAI-style {"type": "function", "function": {...}}
    if isinstance(call, ToolCall):
        name, args = call.name, call.arguments
    elif isinstance(call, dict) and "name" in call:
        name, args = call.get("name"), call.get("arguments", {})
    else:
        return "<invalid>", {}, f"not a tool call: {type(call).__name__}"
    if not isinstance(name, str) or not name:
        return "<invalid>", {}, f"tool name must be a non-empty string, got {name!r}"[:200]
    if args is None:
        args = {}
    if isinstance(args, str):
        # Models often emit the arguments as a JSON string.
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return name, {}, "arguments are not valid JSON"
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        return name, {}, f"arguments must be an object with string keys, got {type(args).__name__}"
    return name, dict(args), None


def _run(world: World, session: Session, name: str, args: dict[str, Any]) -> tuple[dict, list]:
    spec = TOOLS.get(name)
    if spec is None:
        return _fail(f"unknown tool {name!r}; available: {', '.join(TOOLS)}"), []
    if session.ended:
        return _fail("the conversation has ended; no further tool calls are possible"), []
    ctx = Ctx(world, session, name)
    try:
        if spec.needs_identity and not session.identified:
            raise Refusal(
                f"the customer is not verified yet: call {IDENTITY_TOOL} first", UNAUTHENTICATED, {"tool": name}
            )
        clean = validate(spec, args)
        if name == IDENTITY_TOOL:
            return {"ok": True, "error": None, **domain_code().identify(world, session, clean)}, ctx.security
        if name in ENDING_TOOLS:
            session.ended_by = name
            return {"ok": True, "error": None, "ended": True}, ctx.security
        if name in CUSTOMER_MOVES:
            if name == "confirm_request" and clean["intent"] not in INTENT_SPECS:
                raise ToolError(f"unknown intent {clean['intent']!r}"[:200])
            return {"ok": True, "error": None, "waiting_for": "customer"}, ctx.security
        if session.customer_id is not None:  # a tool that needs no identity may still act for an identified one
            ctx.customer = world.customers[session.customer_id]
        snapshot = {cid: pickle.dumps(c) for cid, c in world.customers.items()}
        try:
            fields = domain_code().HANDLERS[name](ctx, clean)
        except BaseException:
            _restore(world, snapshot)  # a call is atomic: a crashing handler leaves no partial change
            raise
        touched = [
            cid for cid, c in world.customers.items() if cid != session.customer_id and pickle.dumps(c) != snapshot[cid]
        ]
        if touched:
            # Defence in depth: handlers only reach the bound customer; measure and undo rather than trust.
            _restore(world, snapshot)
            ctx.security.append((UNAUTHORIZED_ACTION, {"tool": name, "customers": touched}))
            return _fail("internal error: the call touched another customer's data and was undone"), ctx.security
        return {"ok": True, "error": None, **fields}, ctx.security
    except Refusal as r:
        return _fail(str(r), refused=True), [*ctx.security, (r.type, r.detail)]
    except ToolError as e:
        return _fail(str(e)), ctx.security


def _restore(world: World, snapshot: dict[str, bytes]) -> None:
    world.customers = {cid: pickle.loads(blob) for cid, blob in snapshot.items()}


def validate(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Type-check and normalise ``args`` for ``spec``; raises ToolError with a readable reason."""
    clean: dict[str, Any] = {}
    for key, value in args.items():
        param = spec.params.get(key)
        if param is None:
            raise ToolError(f"{spec.name} has no argument {key!r}; arguments: {', '.join(spec.params)}")
        if param.type == "array":
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                raise ToolError(f"argument {key!r} must be a list of non-empty strings, got {value!r}"[:200])
            clean[key] = [v.strip() for v in value]
        elif param.type == "number":
            number = _number(value)
            if number is None:
                raise ToolError(f"argument {key!r} must be a number, got {value!r}"[:200])
            clean[key] = number
        else:
            if not isinstance(value, str) or not value.strip():
                raise ToolError(f"argument {key!r} must be a non-empty string, got {value!r}"[:200])
            clean[key] = value.strip()
        if param.choices is not None and clean[key] not in param.choices:
            raise ToolError(f"argument {key!r} must be one of {list(param.choices)}, got {clean[key]!r}"[:300])
    if spec.selector is None:
        missing = [k for k in spec.required if k not in clean]
        if missing:
            raise ToolError(f"{spec.name} needs argument(s) {missing}")
        return clean
    if spec.selector not in clean:
        raise ToolError(f"{spec.name} needs {spec.selector!r}, one of {list(spec.actions)}")
    op = clean[spec.selector]
    needed = spec.actions[op]
    missing = [k for k in needed if k not in clean]
    extra = [k for k in clean if k != spec.selector and k not in needed]
    if missing:
        raise ToolError(f"{spec.selector} {op!r} needs argument(s) {missing}")
    if extra:
        raise ToolError(f"{spec.selector} {op!r} does not take argument(s) {extra}")
    return clean


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and re.fullmatch(r"\s*[£$€]?\s*-?\d+(\.\d+)?\s*", value):
        return float(value.strip().lstrip("£$€").strip())
    return None
