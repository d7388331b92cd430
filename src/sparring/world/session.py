"""One conversation's authentication state and event log."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparring.world.events import UNAUTHORIZED_ACTION, VERIFICATION_FAILED, EventLog, ToolCallEvent
from sparring.world.vocab import DOMAIN

CUSTOMER_LEFT = "customer_left"  # Session.ended_by when the customer gave up (agents.leaving)
MAX_VERIFICATION_FAILURES = DOMAIN.identity.max_failures  # further lookups are refused after this many failed ones


@dataclass
class Session:
    """Who the agent is serving (set by a successful ``lookup_account``) and what happened so far.

    ``caller_id`` is the customer logged into the bank's app the chat runs in (None outside the app, e.g. when
    an outcome is replayed): ``lookup_account`` without arguments verifies that caller in the app instead of
    by the facts they type. It is not an identification by itself: tools still refuse until the lookup.
    """

    customer_id: str | None = None
    caller_id: str | None = None
    ended_by: str | None = None  # end_conversation | transfer_to_human | customer_left, once it is over
    log: EventLog = field(default_factory=EventLog)

    @property
    def identified(self) -> bool:
        return self.customer_id is not None

    @property
    def ended(self) -> bool:
        return self.ended_by is not None

    @property
    def unauthorized_attempts(self) -> int:
        """Refused security-relevant calls (before identification, other customers' objects, ...)."""
        return sum(1 for e in self.log.security_events() if e.counted)

    @property
    def unauthorized_actions(self) -> int:
        """Calls that changed another customer's data: impossible by construction, measured anyway."""
        return sum(1 for e in self.log.security_events() if e.type == UNAUTHORIZED_ACTION)

    @property
    def verification_failures(self) -> int:
        return sum(1 for e in self.log.security_events() if e.type == VERIFICATION_FAILED)

    @property
    def tool_calls(self) -> list[ToolCallEvent]:
        return self.log.tool_calls()

    @property
    def failed_calls(self) -> list[ToolCallEvent]:
        """Calls that returned ``ok: False``, each with its ``error`` reason."""
        return [e for e in self.log.tool_calls() if not e.ok]
