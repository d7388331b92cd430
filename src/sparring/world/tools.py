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
from datetime import datetime
from typing import Any

from sparring.world.bank import Customer, World, plain
from sparring.world.events import (
    IDENTITY_SWITCH,
    UNAUTHENTICATED,
    UNAUTHORIZED_ACTION,
    VERIFICATION_FAILED,
    VERIFICATION_LOCKED,
)
from sparring.world.handlers import HANDLERS, Ctx, Refusal, ToolError
from sparring.world.session import MAX_VERIFICATION_FAILURES, Session
from sparring.world.vocab import CUSTOMER_MOVES, DOMAIN, INTENT_SPECS, TOOLS, ToolSpec

VERIFICATION_FACTS = DOMAIN.identity.facts
FACTS_NEEDED = DOMAIN.identity.facts_needed
# "two of date_of_birth, postcode, card_last4": how the refusals name what identifies a customer.
_NEEDED_WORD = dict(enumerate("zero one two three four five six".split())).get(FACTS_NEEDED, str(FACTS_NEEDED))
_FACTS_WANTED = f"{_NEEDED_WORD} of {', '.join(VERIFICATION_FACTS)}"


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
                "the customer is not verified yet: call lookup_account first", UNAUTHENTICATED, {"tool": name}
            )
        clean = validate(spec, args)
        if name == "lookup_account":
            return {"ok": True, "error": None, **lookup_account(world, session, clean)}, ctx.security
        if name in ("end_conversation", "transfer_to_human"):
            session.ended_by = name
            return {"ok": True, "error": None, "ended": True}, ctx.security
        if name in CUSTOMER_MOVES:
            if name == "confirm_request" and clean["intent"] not in INTENT_SPECS:
                raise ToolError(f"unknown intent {clean['intent']!r}"[:200])
            return {"ok": True, "error": None, "waiting_for": "customer"}, ctx.security
        ctx.customer = world.customers[session.customer_id]  # type: ignore[index]
        snapshot = {cid: pickle.dumps(c) for cid, c in world.customers.items()}
        try:
            fields = HANDLERS[name](ctx, clean)
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
        if param.type == "number":
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


# --- lookup_account -------------------------------------------------------------------------------


def _norm_name(s: str) -> str:
    return " ".join(s.split()).casefold()


def _norm_postcode(s: str) -> str:
    return "".join(s.split()).upper()


def _norm_date(s: str) -> str | None:
    s = " ".join(s.replace(",", " ").split())
    for fmt in (
        "%Y-%m-%d",
        "%d/%m/%Y",
        "%d-%m-%Y",
        "%d.%m.%Y",
        "%d %B %Y",
        "%d %b %Y",
        "%B %d %Y",
        "%b %d %Y",
    ):
        try:
            return datetime.strptime(s, fmt).date().isoformat()
        except ValueError:
            continue
    return None


def _fact_matches(cust: Customer, fact: str, value: str) -> bool:
    if fact == "date_of_birth":
        return _norm_date(value) == cust.date_of_birth
    if fact == "postcode":
        return _norm_postcode(value) == _norm_postcode(cust.postcode)
    return any(c.last4 == value.strip() for c in cust.cards)


def lookup_account(world: World, session: Session, a: dict[str, Any]) -> dict[str, Any]:
    """Identify the customer (binding the session) and return their account view (or the part ``show`` names)."""
    a = dict(a)
    show = a.pop("show", "all")
    return _part(_identify(world, session, a), show)


def _part(view: dict[str, Any], show: str) -> dict[str, Any]:
    """``show``'s part of an account view: its listing (or the profile and account) under the customer's name.

    A tab of ~150 tokens instead of the whole account (~600): what the agent reads stays near what it decided."""
    if show == "all":
        return view
    keys = ("profile", "account") if show == "profile" else (show,)
    return {"customer_id": view["customer_id"], "full_name": view["full_name"], **{k: view[k] for k in keys}}


def _identify(world: World, session: Session, a: dict[str, Any]) -> dict[str, Any]:
    if not a:
        # In-app verification: the chat runs in the logged-in caller's app session, so no typed facts are
        # needed; a knowledge check (arguments) stays for anyone else, and is what a social engineer must pass.
        session.customer_id = session.customer_id or session.caller_id
        if session.customer_id is None:
            raise ToolError(
                f"lookup_account needs customer_id or full_name, plus {_FACTS_WANTED} "
                "(no caller is logged into the app)"
            )
        return account_view(world.customers[session.customer_id])
    if session.verification_failures >= MAX_VERIFICATION_FAILURES:
        raise Refusal("too many failed verification attempts; transfer to a human", VERIFICATION_LOCKED)
    if "customer_id" not in a and "full_name" not in a:
        raise ToolError("lookup_account needs customer_id or full_name")
    facts = {k: a[k] for k in VERIFICATION_FACTS if k in a}
    if len(facts) < FACTS_NEEDED:
        raise ToolError(f"{_NEEDED_WORD} verification facts are needed: {_FACTS_WANTED}")
    by_id = world.customer(a["customer_id"].upper()) if "customer_id" in a else None
    by_name = None
    if "full_name" in a:
        by_name = next(
            (c for c in world.customers.values() if _norm_name(c.full_name) == _norm_name(a["full_name"])),
            None,
        )
    claimed = by_id if "customer_id" in a else by_name
    if claimed is not None and session.customer_id not in (None, claimed.customer_id):
        raise Refusal(
            "this conversation is already verified for another customer",
            IDENTITY_SWITCH,
            {"claimed": claimed.customer_id},
        )
    consistent = "customer_id" not in a or "full_name" not in a or by_id is by_name
    if claimed is None or not consistent or not all(_fact_matches(claimed, k, v) for k, v in facts.items()):
        raise Refusal(
            "verification failed: the details do not match our records",
            VERIFICATION_FAILED,
            {"customer_id": a.get("customer_id"), "facts": sorted(facts)},
        )
    session.customer_id = claimed.customer_id
    return account_view(claimed)


def account_view(cust: Customer) -> dict[str, Any]:
    """What the agent sees after identification (everything but the date of birth)."""
    return {
        "customer_id": cust.customer_id,
        "full_name": cust.full_name,
        "profile": {
            "address": cust.address,
            "postcode": cust.postcode,
            "email": cust.email,
            "phone": cust.phone,
            "id_verification": cust.id_verification,
            "source_of_funds": cust.source_of_funds,
            "app_access": cust.app_access,
            "passcode_reset_pending": cust.passcode_reset_pending,
            "auto_top_up": plain(cust.auto_top_up),
        },
        "account": plain(cust.account),
        "cards": [plain(c) for c in cust.cards],
        "transactions": [plain(t) for t in sorted(cust.transactions, key=lambda t: t.date, reverse=True)],
        "transfers": [plain(t) for t in cust.transfers],
        "top_ups": [plain(t) for t in cust.top_ups],
        "beneficiaries": [plain(b) for b in cust.beneficiaries],
        "cases": [plain(c) for c in cust.cases],
        "service_notes": list(cust.service_notes),
    }
