"""The goal-knowing expert of any domain, in conversation: asks who the customer is, identifies them with the domain's
identity tool, makes the domain expert's calls (:func:`sparring.world.experts.expert_calls`) one per turn, reports,
ends. Stateless like the other scripted policies: each turn is decided from the conversation in the request.

Banking's :class:`~sparring.agents.scripted.ExpertAgent` is the one its agents learnt from (it describes objects,
confirms, quotes case queues); this one anchors a new domain's metrics: against the cooperative customer it must pass
every scenario strictly, and with ``skip_identity`` the world must refuse it."""

from __future__ import annotations

from typing import Any

from sparring.agents.transcript import ASKS_IDENTITY, identity_facts, tool_results
from sparring.lm.chat import ParsedCall, render_agent_message
from sparring.lm.policies import TurnOutput, TurnRequest
from sparring.world.experts import expert_calls
from sparring.world.scenarios import Scenario, build_world
from sparring.world.tools import ToolCall
from sparring.world.vocab import DOMAIN

IDENTITY = DOMAIN.identity
DONE = "All done, I've taken care of that for you. Is there anything else I can help with?"


class DomainExpert:
    """``verify="app"`` identifies the caller logged into the app (the identity tool without arguments) once the
    customer has answered the identity question; ``verify="facts"`` types the identifying values the customer wrote
    (read by :func:`~sparring.agents.transcript.identity_facts`). ``skip_identity=True`` goes straight to the
    expert's calls: the world must refuse them. A failed identification is asked again up to ``max_failed_lookups``
    times; any other refused call goes to a human."""

    tokenizer = None

    def __init__(self, verify: str = "app", skip_identity: bool = False, max_failed_lookups: int = 2) -> None:
        if verify not in ("app", "facts"):
            raise ValueError(f"verify must be 'app' or 'facts', got {verify!r}")
        self.verify, self.skip_identity, self.max_failed_lookups = verify, skip_identity, max_failed_lookups

    # The two replies a subclass adds turns with (agents.escalation): a message, and the hand-over to a human.
    @staticmethod
    def _say(intent: str, text: str, tool: str | None = None, args: dict[str, Any] | None = None) -> str:
        return render_agent_message(text, ParsedCall(tool, dict(args or {})) if tool else None, intent)

    @classmethod
    def _handoff(cls, intent: str, reason: str) -> str:
        text = "I'm sorry, I can't complete this here. Let me pass you to a colleague."
        return cls._say(intent, text, "transfer_to_human", {"reason": reason})

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        return [TurnOutput(self.reply(r.scenario, r.messages)) for r in requests]

    def reply(self, scenario: Scenario, messages: list[dict[str, Any]]) -> str:
        """The next agent message for this conversation (agent view)."""
        intent = scenario.intent
        results = tool_results(messages)
        steps = _steps(scenario)  # the expert's calls after the identifying one
        identified = any(name == IDENTITY.tool and r.get("ok") for name, r in results)
        failed_ids = sum(1 for name, r in results if name == IDENTITY.tool and not r.get("ok"))
        made = sum(1 for name, r in results if name != IDENTITY.tool and r.get("ok"))
        last = messages[-1]["role"] if messages else "system"
        if last == "tool" and not results[-1][1].get("ok"):
            if results[-1][0] != IDENTITY.tool or failed_ids >= self.max_failed_lookups:
                return self._handoff(intent, "The request could not be completed.")
            return self._say(intent, f"Sorry, those details don't match our records. {IDENTITY.ask}")
        if (identified or self.skip_identity) and made < len(steps):
            if last == "user" or last == "tool":
                call = steps[made]
                return self._say(intent, "Let me take care of that.", call.name, call.arguments)
        if made >= len(steps) and (identified or self.skip_identity):
            if last == "user" and any(DONE in str(m.get("content")) for m in messages if m["role"] == "assistant"):
                return self._say(intent, "Thank you for contacting us. Goodbye!", "end_conversation",
                            {"resolution": f"Resolved the customer's request ({intent})."})  # fmt: skip
            return self._say(intent, DONE)
        if last != "user":
            return self._say(intent, "Hello! How can I help you today?")
        asked = any(m["role"] == "assistant" and ASKS_IDENTITY.search(str(m.get("content"))) for m in messages)
        if not asked:
            return self._say(intent, IDENTITY.ask)
        arguments = {} if self.verify == "app" else _typed(identity_facts(messages))
        return self._say(intent, "Thank you, let me find your account.", IDENTITY.tool, arguments)


def _steps(scenario: Scenario) -> list[ToolCall]:
    """The expert's calls that follow the identifying one (``scenario.expected_calls``, recomputed if absent)."""
    calls = scenario.expected_calls or expert_calls(scenario, build_world(scenario))
    return [c for c in calls if c.name != IDENTITY.tool]


def _typed(facts: dict[str, str]) -> dict[str, str]:
    """The identity tool's arguments from what the customer wrote: the id, and as many facts as the domain needs."""
    given = [k for k in (IDENTITY.id_arg, *IDENTITY.facts) if k in facts][: 1 + IDENTITY.facts_needed]
    return {k: facts[k] for k in given}
