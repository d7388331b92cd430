"""Scripted reference policies (same protocol as :class:`~sparring.lm.policies.LMPolicy`).

They anchor the metrics: the expert agent against a cooperative customer must pass every scenario strictly
(else the world, the engine or the judge is wrong), a random agent must pass none, and the expert that skips
identification must be refused. They also give LM policies something sane to play against early in training.
Scripted policies are stateless: each turn is decided from the conversation in the request, so batching,
episode order and restarts cannot change what they say.

Over 400 lines: the scripted agents and customers side by side, each customer answering what the expert asks.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from sparring.agents.clarify import (
    ASKS_CONFIRM,
    ASKS_WHICH,
    confirm_question,
    confirmed_intent,
    which_question,
)
from sparring.agents.customer_prompt import identity_text
from sparring.agents.domain_expert import DomainExpert
from sparring.agents.slots import describe_slots
from sparring.agents.transcript import (
    ASKS_IDENTITY,
    call_key,
    identity_facts,
    last_customer_message,
    read_queue,
    tool_calls,
    tool_history,
)
from sparring.lm.chat import (
    CALL_CLOSE,
    CALL_OPEN,
    INTENT,
    ParsedCall,
    known_intents,
    parse_agent_message,
    render_agent_message,
)
from sparring.lm.policies import TurnOutput, TurnRequest
from sparring.world.answers import answer_kind
from sparring.world.described import describing_turn
from sparring.world.expert import details_call, expert_calls, lookup_call
from sparring.world.scenarios import Scenario, build_world
from sparring.world.session import Session
from sparring.world.tools import ToolCall, execute
from sparring.world.vocab import DESCRIBED, DOMAIN, ID_KEYS, INTENT_SPECS, QUEUE, TARGETS, TOOLS

# Personas whose scripted customer names the object only when asked which one: vague ones wait to be asked
# for specifics, impatient ones answer only what was asked.
WITHHOLDING = ("vague", "impatient")
ID_ARG = DOMAIN.identity.id_arg  # the value a customer who gave their identity has said
_ASKS_MORE = re.compile(r"anything else|all done|sorted|resolved|taken care|all set|done", re.I)


def _rng(request: TurnRequest, salt: Any) -> random.Random:
    return random.Random(f"{salt}:{request.seed}:{request.turn}")


# ------------------------------------------------------------------------------------------------ agents


def account_part(intent: str) -> str:
    """The part of the account an intent's resolution reads (``lookup_account``'s ``show``): the listing of
    the object it acts on, or the profile when it acts on none."""
    target = INTENT_SPECS[intent].target
    return TARGETS[target][1] if target is not None else "profile"


def resolving_call(scenario: Scenario) -> ToolCall | None:
    """The call that resolves the scenario, the last expected one (None for lookup-only intents):
    ``scenario.expected_calls``, which is ``world.expert.expert_calls`` at sampling time (recomputed if absent)."""
    calls = scenario.expected_calls or expert_calls(scenario, build_world(scenario))
    return calls[-1] if len(calls) > 1 else None


# How the expert names the object it acts on: the id the lookup listed, or "described" (world.described).
OBJECT_REFS = ("id", "described")


def _call(message: str) -> tuple[str | None, list[tuple[str, str]]]:
    """The call a rendered agent message makes, as :func:`~sparring.agents.transcript.call_key` keys it."""
    parsed = parse_agent_message(message).call
    return call_key(parsed.name, parsed.arguments) if parsed else call_key(None, None)


class ExpertAgent:
    """Asks for the customer's details, looks them up, asks which object when the customer never described it,
    confirms when the request may be another, resolves, reports, ends.

    ``verify="app"`` (the default) looks up the caller logged into the app (``lookup_account`` without
    identity arguments, showing only the part of the account the intent needs) once the customer has answered;
    ``verify="facts"`` types the id, date of birth and postcode the customer gave. The app path is what DA0
    imitates: a tiny model trained from scratch did not learn to copy the typed facts (0 of 100 lookups after
    1.4M tokens of demonstrations), and copying ids is not the routing skill co-evolution is about.
    ``skip_lookup=True`` goes straight to the resolving call: the world must refuse it.
    ``refs="described"`` names the object to act on as ``"described"`` (``world.described``: the one the
    customer's words identify) instead of copying its id from the lookup result, which DA0 never learned; the
    expert then asks which object (``ask_customer``) when no customer message describes it, and again after a
    refusal. It confirms the request (``confirm_request``) before acting when the customer's words could fit
    several intents (:func:`needs_confirmation`); ``misconfirm`` is the share of scenarios (drawn per scenario)
    whose first confirmation states a wrong intent of the same tool, so customers' training data holds the no
    that corrects an agent. It never reports success after a refused call: a second refusal goes to a human.
    Reading a conversation another agent began (DAgger's corrections), it answers that agent's failed call that is
    not the one it would have made in its place (a wrong case queue, say) with what it would have said there: a
    failed call changes nothing, so that is how it would have acted from there.
    """

    tokenizer = None

    def __init__(
        self,
        skip_lookup: bool = False,
        max_failed_lookups: int = 2,
        verify: str = "app",
        refs: str = "id",
        misconfirm: float = 0.0,
    ) -> None:
        if verify not in ("app", "facts"):
            raise ValueError(f"verify must be 'app' or 'facts', got {verify!r}")
        if refs not in OBJECT_REFS:
            raise ValueError(f"refs must be one of {OBJECT_REFS}, got {refs!r}")
        if not 0.0 <= misconfirm <= 1.0:
            raise ValueError(f"misconfirm must be in [0, 1], got {misconfirm!r}")
        self.refs = refs
        self.skip_lookup = skip_lookup
        self.max_failed_lookups = max_failed_lookups
        self.verify = verify
        self.misconfirm = misconfirm

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        return [TurnOutput(self.reply(r.scenario, r.messages)) for r in requests]

    def reply(self, scenario: Scenario, messages: list[dict[str, Any]]) -> str:
        """The next agent message for this conversation (agent view).

        Over 60 lines: the expert's whole decision procedure, one branch per step of a support call, in order."""
        intent = scenario.intent
        history = tool_history(messages)
        names = [name for name, _ in history]
        resolver = resolving_call(scenario)
        looked_up = ("lookup_account", True) in history
        failed = sum(1 for name, ok in history if name == "lookup_account" and not ok)
        resolved = (resolver is None and looked_up) or (resolver is not None and (resolver.name, True) in history)
        if self.skip_lookup:
            resolved = resolver is None or resolver.name in names
        last = messages[-1]["role"] if messages else "system"
        if last == "user":
            if resolved and self._confirmed(messages):
                return self._say(
                    intent,
                    "Thank you for contacting us. Goodbye!",
                    "end_conversation",
                    {"resolution": f"Resolved the customer's request ({intent})."},
                )
            facts = identity_facts(messages)
            n_facts = sum(k in facts for k in ("date_of_birth", "postcode", "card_last4"))
            enough = "customer_id" in facts and n_facts >= 2
            if self.verify == "app" and not looked_up and not self.skip_lookup:
                answered = any(m["role"] == "assistant" for m in messages)  # the details are in the chat
                if answered and failed == 0:
                    args = {"show": account_part(scenario.intent)}
                    return self._say(intent, "Thank you, let me look up your account.", "lookup_account", args)
            if enough and not self.skip_lookup and not looked_up:
                # As world.expert.lookup_call: id, date of birth and postcode (card ending if one is missing).
                keys = [k for k in ("date_of_birth", "postcode", "card_last4") if k in facts][:2]
                args = {"customer_id": facts["customer_id"], **{k: facts[k] for k in keys}}
                return self._say(intent, "Thank you, let me look up your account.", "lookup_account", args)
            if enough and self.skip_lookup and not resolved and resolver is not None:
                return self._say(intent, "Let me sort that out.", resolver.name, self._refer(resolver.arguments))
            if looked_up and not resolved and resolver is not None:
                return self._next_step(scenario, messages, history, resolver)
            if resolved:
                return self._confirm(intent)
            return self._say(
                intent,
                "I can help with that. To verify your identity, please tell me your customer "
                "id, date of birth and postcode.",
            )
        if last == "tool":
            name, ok = history[-1]
            if name == "lookup_account" and not ok:
                if failed >= self.max_failed_lookups:
                    return self._handoff(intent, "Identity could not be verified.")
                return self._say(
                    intent,
                    "Sorry, those details don't match our records. Could you check your "
                    "customer id, date of birth and postcode?",
                )
            if name in ("lookup_account", "payment_details") and ok and resolver is not None and not resolved:
                return self._next_step(scenario, messages, history, resolver)
            if resolver is not None and name in (resolver.name, "payment_details") and not ok:
                made = max(i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls"))
                own = self.reply(scenario, messages[:made])  # what it would have said in that turn's place
                failed = tool_calls(messages)[-1]
                if _call(own) != call_key(failed["name"], failed["arguments"]):  # another agent's mistake
                    return own
                refusals = sum(1 for n, good in history if n in (resolver.name, "payment_details") and not good)
                target = INTENT_SPECS[intent].target
                if refusals >= 2 or target is None:
                    return self._handoff(intent, "The request could not be completed.")
                return self._say(
                    intent, f"Sorry, I couldn't find it. {which_question(target)}", "ask_customer", {"about": target}
                )
            return self._confirm(intent)
        return self._say(intent, "Hello! How can I help you today?")

    def _next_step(
        self, scenario: Scenario, messages: list[dict[str, Any]], history: list[tuple[str, bool]], resolver: ToolCall
    ) -> str:
        """After the lookup, before the resolving call: ask which object, confirm, or act."""
        intent, target = scenario.intent, INTENT_SPECS[scenario.intent].target
        asked = sum(1 for name, _ in history if name == "ask_customer")
        if self.refs == "described" and target is not None and asked < 2 and not _described(scenario, messages):
            return self._say(intent, which_question(target), "ask_customer", {"about": target})
        confirms = [c["arguments"].get("intent") for c in tool_calls(messages) if c["name"] == "confirm_request"]
        if not confirms:
            shown = self._misconfirms(scenario) or intent
            if shown != intent or needs_confirmation(scenario, messages):
                return self._say(shown, confirm_question(shown), "confirm_request", {"intent": shown})
        elif confirms[-1] != intent:  # the deliberately wrong one was answered: confirm the right one
            return self._say(intent, confirm_question(intent), "confirm_request", {"intent": intent})
        elif answer_kind(last_customer_message(messages)) == "no":
            if confirms.count(intent) >= 2:  # a second no to the request: not for this agent to guess on
                return self._handoff(intent, "The customer does not want the request as stated.")
            text = f"Sorry, let me check I have it right. {confirm_question(intent)}"
            return self._say(intent, text, "confirm_request", {"intent": intent})
        if INTENT_SPECS[intent].quotes_queue:  # read the payment's case queue first, then quote it
            queue = read_queue(messages)
            if queue is None:
                details = details_call(target, resolver.arguments[TARGETS[target][0]])  # type: ignore[arg-type]
                return self._say(intent, "", details.name, self._refer(details.arguments))
            return self._say(intent, "", resolver.name, {**self._refer(resolver.arguments), QUEUE: queue})
        return self._say(intent, "", resolver.name, self._refer(resolver.arguments))

    def _misconfirms(self, scenario: Scenario) -> str | None:
        """The wrong intent this scenario's first confirmation states, or None (drawn per scenario)."""
        if self.misconfirm <= 0 or random.Random(f"misconfirm:{scenario.scenario_id}").random() >= self.misconfirm:
            return None
        tool = INTENT_SPECS[scenario.intent].tool
        others = sorted(i for i, spec in INTENT_SPECS.items() if spec.tool == tool and i != scenario.intent)
        return random.Random(f"misconfirm-intent:{scenario.scenario_id}").choice(others) if others else None

    def _refer(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.refs == "id":
            return arguments
        return {k: DESCRIBED if k in ID_KEYS else v for k, v in arguments.items()}

    @staticmethod
    def _confirmed(messages: list[dict[str, Any]]) -> bool:
        return any(m["role"] == "assistant" and "anything else" in str(m.get("content")) for m in messages)

    @staticmethod
    def _confirm(intent: str) -> str:
        return ExpertAgent._say(
            intent, "All done, I've taken care of that for you. Is there anything else I can help with?"
        )

    @staticmethod
    def _handoff(intent: str, reason: str) -> str:
        text = "I'm sorry, I can't complete this here. Let me pass you to a colleague."
        return ExpertAgent._say(intent, text, "transfer_to_human", {"reason": reason})

    @staticmethod
    def _say(intent: str, text: str, tool: str | None = None, args: dict[str, Any] | None = None) -> str:
        call = ParsedCall(tool, dict(args or {})) if tool else None
        return render_agent_message(text, call, intent)


BANKING = DOMAIN.module == "sparring.domains.banking"


def expert_agent(
    refs: str = "id", misconfirm: float = 0.0, verify: str = "app", skip_identity: bool = False
) -> ExpertAgent | DomainExpert:
    """The active domain's scripted expert: banking's :class:`ExpertAgent`, the one its agents learnt from; another
    domain's :class:`~sparring.agents.domain_expert.DomainExpert`, which neither describes objects nor misconfirms
    (``refs`` and ``misconfirm`` are banking's). ``skip_identity``: the expert that never identifies the customer."""
    if BANKING:
        return ExpertAgent(refs=refs, misconfirm=misconfirm, verify=verify, skip_lookup=skip_identity)
    return DomainExpert(verify=verify, skip_identity=skip_identity)


# Openings this long (in words) may hide their request among others: the expert confirms before acting.
CONFIRM_OPENING_WORDS = 25
AMBIGUOUS_STYLES = ("vague", "camouflaged", "multi_part")


def needs_confirmation(scenario: Scenario, messages: list[dict[str, Any]]) -> bool:
    """Whether the customer's words could fit several intents: a vague, camouflaged or several-part opening,
    or a long first message (the expert knows the goal; this is when an agent that does not should check)."""
    first = next((str(m.get("content") or "") for m in messages if m["role"] == "user"), "")
    return scenario.utterance_style in AMBIGUOUS_STYLES or len(first.split()) > CONFIRM_OPENING_WORDS


@dataclass(frozen=True)
class _Said:
    role: str
    text: str


def _described(scenario: Scenario, messages: list[dict[str, Any]]) -> bool:
    """Whether the customer's messages so far describe the object the scenario acts on (world.described)."""
    target = INTENT_SPECS[scenario.intent].target
    if target is None:
        return True
    _, listing = TARGETS[target]
    items = _listing(scenario, listing)
    turns = [_Said("customer", str(m.get("content") or "")) for m in messages if m["role"] == "user"]
    try:
        chosen, _ = describing_turn(target, items, turns)
    except ValueError:
        return False
    resolver = resolving_call(scenario)
    id_key = TARGETS[target][0]
    return resolver is None or chosen.get(id_key) == resolver.arguments.get(id_key)


_LISTINGS: dict[tuple[str, int, str], list[dict[str, Any]]] = {}  # built worlds are costly; keyed by scenario


def _listing(scenario: Scenario, listing: str) -> list[dict[str, Any]]:
    """The customer's objects of one listing, as lookup_account shows them (the expert's own lookup)."""
    key = (scenario.scenario_id, scenario.world_seed, listing)
    if key not in _LISTINGS:
        if len(_LISTINGS) > 4096:
            _LISTINGS.clear()
        view = execute(build_world(scenario), Session(), lookup_call(scenario.identity))
        _LISTINGS[key] = list(view.get(listing) or ())
    return _LISTINGS[key]


_WORDS = (
    "card account please help money transfer yes no the a balance pending refund thanks sorry payment "
    "check id verify top-up fee rate limit ok hmm why when where bank app"
).split()


class RandomAgent:
    """Garbage in the chat format: random words and characters, random intents, random calls and arguments."""

    tokenizer = None

    def __init__(self, seed: int = 0, p_call: float = 0.5, p_end: float = 0.12) -> None:
        self.seed, self.p_call, self.p_end = seed, p_call, p_end
        self._intents = sorted(known_intents())
        self._tools = sorted(TOOLS)

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        return [TurnOutput(self.reply(_rng(r, f"random-agent:{self.seed}"))) for r in requests]

    def reply(self, rng: random.Random) -> str:
        """One random message (deterministic in ``rng``)."""
        words = [rng.choice(_WORDS) for _ in range(rng.randint(0, 8))]
        if rng.random() < 0.3:
            words.append("".join(rng.choice("abcdefxyz0123456789!?.,:;{}[]<>") for _ in range(rng.randint(1, 12))))
        text = " ".join(words)
        intent = rng.choice(self._intents) if rng.random() < 0.5 else None
        if rng.random() < self.p_end:
            return render_agent_message(text, ParsedCall("end_conversation", {"resolution": text or "done"}), intent)
        if rng.random() >= self.p_call:
            return render_agent_message(text, None, intent)
        tool = rng.choice(self._tools)
        if rng.random() < 0.1:  # a broken call: the parser must report it, the world never sees it
            return f"{INTENT}{intent or 'x'} {text}{CALL_OPEN}{tool} {{'bad': json{CALL_CLOSE}"
        spec = TOOLS[tool]
        args: dict[str, Any] = {}
        for name, param in spec.params.items():
            if rng.random() < 0.6:
                if param.choices:
                    args[name] = rng.choice(param.choices)
                elif param.type == "number":
                    args[name] = round(rng.uniform(0, 500), 2)
                else:
                    args[name] = rng.choice(
                        [f"C{rng.randrange(10**6):06d}", f"tx_{rng.randrange(1000):03d}", rng.choice(_WORDS)]
                        + ["1990-01-01", "AB1 2CD", f"{rng.randrange(10**4):04d}"]
                    )
        return render_agent_message(text, ParsedCall(tool, args), intent)


# --------------------------------------------------------------------------------------------- customers


class CooperativeCustomer:
    """Opens with the scenario's utterance, gives its identity when asked, confirms, thanks and leaves."""

    tokenizer = None

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        return [TurnOutput(self.reply(r)) for r in requests]

    def opening(self, request: TurnRequest) -> str:
        return request.scenario.utterance.strip()

    def reply(self, request: TurnRequest) -> str:
        """The next customer message (customer view: own turns are ``assistant``, the agent's are ``user``)."""
        scenario, messages = request.scenario, request.messages
        own = [m["content"] for m in messages if m["role"] == "assistant"]
        if not own:
            return self.opening(request)
        rng = _rng(request, "customer")
        heard = str(messages[-1]["content"]) if messages[-1]["role"] == "user" else ""
        gave_identity = any(scenario.identity[ID_ARG] in text for text in own)
        details = describe_slots(scenario)
        if ASKS_CONFIRM.search(heard):
            return self.answer_confirmation(request, heard)
        if ASKS_WHICH.search(heard) and details:
            return f"{rng.choice(('Sure.', 'Of course.', 'This one:', 'Yes, sorry.'))} {details}"
        if scenario.persona in WITHHOLDING and INTENT_SPECS[scenario.intent].target is not None:
            # names the object only when asked which one (PERSONA_BEHAVIOUR); facts of no object come with identity
            details = ""
        if ASKS_IDENTITY.search(heard):
            lead = rng.choice(("Sure.", "Of course.", "No problem.", "Okay."))
            if gave_identity:
                lead = rng.choice(("As I said:", "Again:", "I already said, but here you go:"))
            return " ".join(p for p in (lead, identity_text(scenario), details) if p)
        if gave_identity and _ASKS_MORE.search(heard):
            return rng.choice(
                (
                    "No, that's everything, thank you. Bye!",
                    "That's all, thanks a lot. Goodbye!",
                    "Great, nothing else. Thanks, bye!",
                )
            )
        if not gave_identity:
            return (
                rng.choice(
                    (
                        "Sorry, I'm not sure I follow.",
                        "Could you help me with this, please?",
                        "Hello? I still need help.",
                    )
                )
                + f" {scenario.utterance.strip()}"
            )
        return rng.choice(
            ("Okay. Could you sort it out for me, please?", "Thanks. So can you fix it?", "Right. What happens now?")
        )

    @staticmethod
    def answer_confirmation(request: TurnRequest, heard: str) -> str:
        """Yes when the agent restated this customer's request (clarify.confirm_question), else a no that restates
        what they need: a direct question is answered truthfully, whatever else the customer says."""
        scenario, rng = request.scenario, _rng(request, "confirm")
        if confirmed_intent(heard) == scenario.intent:
            return rng.choice(("Yes, that's right.", "Yes, exactly.", "Yep, that's it.", "Correct."))
        lead = rng.choice(("No, that's not it.", "No, not quite.", "No."))
        return " ".join(p for p in (lead, scenario.utterance.strip(), describe_slots(scenario)) if p)


@cache
def _camouflaged_pool(seed: int, per_intent: int) -> dict[str, list[str]]:
    from sparring.data.synthetic import generate_utterances  # deferred: pulls in polars

    frame = generate_utterances(per_intent, seed, style_weights={"camouflaged": 1.0})
    pool: dict[str, list[str]] = {}
    for text, intent in zip(frame["text"].to_list(), frame["intent"].to_list(), strict=True):
        pool.setdefault(intent, []).append(text)
    return pool


class CamouflagingCustomer(CooperativeCustomer):
    """Opens with the intent buried in irrelevant detail (the synthetic generator's ``camouflaged`` style for
    the scenario's intent), then behaves like the cooperative customer."""

    def __init__(self, seed: int = 0, per_intent: int = 6) -> None:
        self.seed, self.per_intent = seed, per_intent

    def opening(self, request: TurnRequest) -> str:
        scenario = request.scenario
        if scenario.utterance_style == "camouflaged":
            return scenario.utterance.strip()
        choices = _camouflaged_pool(self.seed, self.per_intent).get(scenario.intent)
        if not choices:
            return f"Long day, the trains were a mess and my sister visited. Anyway, {scenario.utterance.strip()}"
        return _rng(request, f"camo:{self.seed}").choice(choices).strip()
