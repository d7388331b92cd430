"""What every domain's tool handlers share: the two ways a call fails and the context a handler gets.

A handler (``HANDLERS[tool](ctx, args)`` of the domain's code) receives validated arguments and the identified
customer, checks every precondition before it changes anything (so a failed call leaves the world as it was) and
reaches the customer's objects only through :meth:`Ctx.get`, which refuses other customers' objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparring.world.catalog import INFO
from sparring.world.described import DESCRIBED, describing_turn
from sparring.world.events import CROSS_CUSTOMER
from sparring.world.session import Session
from sparring.world.state import World, plain


class ToolError(Exception):
    """Invalid call: bad arguments, unknown ids, or a precondition that does not hold."""


class Refusal(Exception):
    """A call refused for security reasons; logged as a security event of ``type``."""

    def __init__(self, message: str, type: str, detail: dict[str, Any] | None = None):
        super().__init__(message)
        self.type = type
        self.detail = detail or {}


def require(condition: bool, message: str) -> None:
    """A precondition: a :class:`ToolError` with ``message`` when it does not hold."""
    if not condition:
        raise ToolError(message)


@dataclass
class Ctx:
    world: World
    session: Session
    tool: str
    customer: Any | None = None
    security: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def cust(self) -> Any:
        assert self.customer is not None  # execute() binds it before calling an account-level handler
        return self.customer

    def get(self, kind: str, obj_id: str) -> Any:
        """The customer's object of ``kind``; other customers' objects are refused, unknown ids rejected.
        ``obj_id`` ``"described"`` means the one the customer's words identify (``world.described``)."""
        if obj_id == DESCRIBED:
            attr, key = self.cust.COLLECTIONS[kind]
            try:
                item, _ = describing_turn(kind, [plain(o) for o in getattr(self.cust, attr)], self.session.log.turns())
            except ValueError as exc:
                raise ToolError(str(exc)) from None
            obj_id = item[key]
        obj = self.cust.find(kind, obj_id)
        if obj is not None:
            return obj
        message = f"no {kind.replace('_', ' ')} with id {obj_id!r} on this customer's account"
        owner = self.world.owner_of(obj_id)
        if owner is not None:
            # Same message as for an unknown id: the agent must not learn that the id exists elsewhere.
            raise Refusal(message, CROSS_CUSTOMER, {"object_id": obj_id, "kind": kind})
        raise ToolError(message)

    def info(self, action: str, target: str | None = None) -> dict[str, Any]:
        """Record an informational resolution on the customer's file and return the policy facts."""
        note = f"{self.tool}:{action}" + (f":{target}" if target else "")
        self.cust.add_note(note)
        return {"info": dict(INFO.get((self.tool, action), {})), "recorded": note}
