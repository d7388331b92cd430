"""The active domain's code: what its file cannot say, in the Python module the file names (``module``).

A domain module provides: ``COLLECTIONS`` (object kind -> (the customer's attribute holding them, their id
field)); ``generate_world(seed, n_customers)`` (a :class:`~sparring.world.state.World`);
``identify(world, session, args)`` (the identity tool: binds ``session.customer_id`` and returns what the agent
sees); ``identity_of(world, customer_id)`` (what a customer can say to be identified); ``HANDLERS`` (tool -> handler
of a :class:`~sparring.world.calls.Ctx` and validated arguments); ``make_slots(intent, world, customer_id, rng)``
and ``plant(world, customer_id, intent, slots, rng)`` (a scenario's problem, chosen then put into the world); and
``expert_calls(scenario, world)`` (the calls that resolve a scenario, found as an agent could find them).
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from types import ModuleType

from sparring.world.vocab import DOMAIN

REQUIRED = (
    "COLLECTIONS",
    "generate_world",
    "identify",
    "identity_of",
    "HANDLERS",
    "make_slots",
    "plant",
    "expert_calls",
)


@cache
def domain_code() -> ModuleType:
    """The active domain's module, imported on first use (it imports the world's modules that import this one)."""
    if DOMAIN.module == "sparring.domains.banking":
        # the default by name, so the import is seen: a stage's DVC dependencies follow its imports (stagekit.code_deps)
        from sparring.domains import banking as module
    else:
        module = import_module(DOMAIN.module)
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if missing:
        raise ImportError(
            f"{DOMAIN.path}: module {DOMAIN.module} lacks {', '.join(missing)} (sparring.world.domain_code)"
        )
    return module
