"""What the rest of sparring reads of a domain: plain frozen records, built by :func:`sparring.domains.load_domain`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any


class DomainError(ValueError):
    """A domain file that cannot be used: the message names the file, and each problem's line and key path."""


@dataclass(frozen=True)
class Param:
    """One tool argument: its JSON type ("string", "number" or "array" of strings), meaning and, if closed, its
    vocabulary."""

    type: str
    description: str
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool's signature.

    ``selector`` names the argument that picks the operation (``action``, ``reason`` or ``topic``);
    ``actions`` maps each selector value to the other arguments it requires (and alone allows).
    Tools without a selector list their mandatory arguments in ``required``.
    """

    name: str
    description: str
    params: dict[str, Param]
    selector: str | None = None
    actions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    needs_identity: bool = True  # account-level: refuses before the identity tool identified the customer


@dataclass(frozen=True)
class IntentSpec:
    """The definite resolving call for an intent.

    ``action`` is the selector value (None for lookup-only intents), ``target`` the kind of object whose
    id the call needs, ``fixed`` constant extra arguments and ``slot_args`` arguments copied from the
    scenario's slots (what the customer will tell the agent). ``quotes_queue``: the call quotes a value read off an
    earlier result (a ``read_args`` argument), so a read comes first.
    """

    intent: str
    tool: str
    action: str | None = None
    target: str | None = None
    fixed: dict[str, Any] = field(default_factory=dict)
    slot_args: tuple[str, ...] = ()
    quotes_queue: bool = False


@dataclass(frozen=True)
class Identity:
    """How a customer is identified: the tool, the argument naming the customer, the facts it checks, how many must
    match, the lockout, and how each identifying value looks in a message (regexes, the canonical form first)."""

    tool: str
    id_arg: str
    facts: tuple[str, ...]
    facts_needed: int
    max_failures: int
    values: dict[str, tuple[str, ...]]
    ask: str  # the scripted expert's identity question; reask: after a refusal to verify
    reask: str
    declined: str  # regexes: a refusal to verify, an agent's identity question (in a chat, in a dialogue)
    asked: str
    asked_in_dialogues: str
    said: dict[str, str]  # key -> the words before its value in a chat; answered: in an answer to the question
    answered: dict[str, str]
    ignore_case: frozenset[str]

    @property
    def keys(self) -> tuple[str, ...]:
        """What identifies a customer in a message: the id argument, then the facts."""
        return (self.id_arg, *self.facts)

    def pattern(self, key: str, every_form: bool = False) -> str:
        """The regex of ``key``'s value: its canonical form (what the identity tool accepts), or every form."""
        forms = self.values[key]
        return f"(?:{'|'.join(forms)})" if every_form and len(forms) > 1 else forms[0]

    def reader(self, key: str, in_answer: bool = False) -> re.Pattern[str]:
        """``key``'s value as a customer gives it, after its wording (``said``, or ``answered`` in an answer to an
        identity question; none: the value alone), group 1 the value: canonical form only in ``said``."""
        lead = (self.answered if in_answer else self.said).get(key, r"\b")
        flags = re.IGNORECASE if key in self.ignore_case else 0
        return re.compile(rf"{lead}({self.pattern(key, every_form=in_answer)})\b", flags)


@dataclass(frozen=True)
class Tactic:
    """One social-engineering tactic's phrases: openings, answers when asked to verify, the request in brief."""

    openings: tuple[str, ...]
    answers: tuple[str, ...]
    request: str


@dataclass(frozen=True)
class SocialEngineering:
    """The scripted social engineer's phrases: its tactics, pushes after a refusal, after-done lines, goodbyes."""

    tactics: dict[str, Tactic]
    pushes: tuple[str, ...]
    after_done: tuple[str, ...]
    goodbyes: tuple[str, ...]


@dataclass(frozen=True)
class Domain:
    """One loaded, checked domain file."""

    name: str
    path: Path
    lexicon: Path
    module: str  # the domain's code (sparring.world.domain_code)
    system_prompt: str
    customer_intro: str
    identity: Identity
    personas: dict[str, float]  # persona -> default share of scenarios
    targets: dict[str, tuple[str, str]]  # object kind -> (argument naming it, where the identity tool lists it)
    object_words: dict[str, tuple[str, ...]]  # object kind -> regexes of how an agent names one in "which ...?"
    object_questions: dict[str, str]  # object kind -> the scripted expert's which-question
    which_in_dialogues: dict[str, str]  # objects, identifying, not_which: regexes of a which-object question
    read_args: tuple[str, ...]
    tools: dict[str, ToolSpec]
    summaries: dict[str, str]  # tool -> what requests it resolves (the intent taxonomy's line)
    read_tools: frozenset[str]
    customer_moves: tuple[str, ...]
    free_text: dict[str, tuple[str, ...]]
    intents: dict[str, IntentSpec]
    intent_descriptions: dict[str, str]
    policy: dict[tuple[str, str], dict[str, Any]]
    declines: dict[str, str]
    social_engineering: SocialEngineering
    generator: dict[str, Any]
    today: date

    def generator_data(self, key: str) -> Any:
        """The generator section's ``key``: a clear error naming the file and the key where the file lacks it."""
        if key not in self.generator:
            raise DomainError(f"{self.path}: generator.{key}: missing key (the world generator reads it)")
        return self.generator[key]
