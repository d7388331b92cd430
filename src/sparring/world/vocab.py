"""The active domain's tool signatures, action vocabularies and intent -> expected-call table.

Everything that says *which* call resolves *which* intent lives in the domain file
(``sparring/domains/banking.yaml``, or the file ``$SPARRING_DOMAIN`` names); this module binds the loaded
domain's tables to the names the tools, the scenario sampler, the expert and the provenance tracker read, so they
all read one source of truth.
"""

from __future__ import annotations

import json
import os
from typing import Any

from sparring.domains import ENDING_TOOLS, IntentSpec, Param, ToolSpec, load_domain
from sparring.runtime import DOMAIN_ENV

__all__ = [
    "ENDING_TOOLS",
    "IntentSpec",
    "Param",
    "ToolSpec",
]  # the records, re-exported where the world's code has always read them

# The active domain: $SPARRING_DOMAIN (a packaged domain's name or a file's path), else banking. Read once, at import:
# every table below is bound to it, so a process plays one domain.
DOMAIN = load_domain(os.environ.get(DOMAIN_ENV) or "banking")

TOOLS: dict[str, ToolSpec] = DOMAIN.tools
INTENT_SPECS: dict[str, IntentSpec] = DOMAIN.intents
PERSONAS: tuple[str, ...] = tuple(DOMAIN.personas)
# Which argument names an object of each kind, and where lookup_account lists it.
TARGETS: dict[str, tuple[str, str]] = DOMAIN.targets
# The arguments that name an object, e.g. transaction_id.
ID_KEYS = frozenset(id_key for id_key, _ in TARGETS.values())
# Closed-vocabulary arguments whose value is read off an earlier result, not chosen (world.events' provenance).
READ_ARGS: tuple[str, ...] = DOMAIN.read_args
# Who handles cases on a payment (issue 28): a fact of each banking transaction and transfer that only
# payment_details shows, and that a dispute, a cancel, a trace or a retry must quote.
QUEUE = "case_queue"
# An object argument may name the object the customer's words identify instead of its id (world.described).
DESCRIBED = "described"
# Moves that put a question to the customer: they change nothing, end the agent's turn and are not the "first
# call" or "last call" the outcome check reads.
CUSTOMER_MOVES: tuple[str, ...] = DOMAIN.customer_moves
READ_TOOLS: frozenset[str] = DOMAIN.read_tools  # tools that show the account and change nothing
# Arguments whose value is prose written by the agent, not data copied from somewhere.
FREE_TEXT_PARAMS: dict[str, tuple[str, ...]] = DOMAIN.free_text


def lexicon() -> dict[str, Any]:
    """The domain's phrase material (the synthetic generator's, the customers' and the clarifying moves'), fresh."""
    return json.loads(DOMAIN.lexicon.read_text("utf-8"))


def resolving_args(
    spec: IntentSpec, target_id: str | None, slots: dict[str, Any], queue: str | None = None
) -> dict[str, Any]:
    """The resolving call's arguments for ``spec``, given the target's id, the scenario slots and, for a call that
    quotes it, the target's ``case_queue`` as ``payment_details`` showed it."""
    tool = TOOLS[spec.tool]
    args: dict[str, Any] = {}
    if tool.selector and spec.action is not None:
        args[tool.selector] = spec.action
    if spec.target is not None and target_id is not None:
        args[TARGETS[spec.target][0]] = target_id
    args.update(spec.fixed)
    for name in spec.slot_args:
        args[name] = slots[name]
    if spec.quotes_queue:
        if queue is None:
            raise ValueError(f"{spec.intent}'s resolving call quotes the case queue; read it with payment_details")
        args[QUEUE] = queue
    return args


def tool_schemas() -> list[dict[str, Any]]:
    """JSON-schema function declarations for every tool (for prompting a function-calling model)."""
    schemas = []
    for spec in TOOLS.values():
        props: dict[str, Any] = {}
        for name, p in spec.params.items():
            prop: dict[str, Any] = {"type": p.type, "description": p.description}
            if p.choices:
                prop["enum"] = list(p.choices)
            props[name] = prop
        required = [spec.selector] if spec.selector else list(spec.required)
        description = spec.description
        if spec.selector:
            # Spell out which arguments each operation takes: the schema alone cannot say it.
            ops = ", ".join(f"{a}({', '.join(req)})" for a, req in spec.actions.items())
            description += f" {spec.selector} values and their arguments: {ops}."
        schemas.append(
            {
                "name": spec.name,
                "description": description,
                "parameters": {"type": "object", "properties": props, "required": required},
            }
        )
    return schemas
