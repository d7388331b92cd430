"""The active domain's code: what its file cannot say, in the Python module the file names (``module``).

A domain module provides: ``COLLECTIONS`` (object kind -> (the customer's attribute holding them, their id
field)); ``generate_world(seed, n_customers)`` (a :class:`~sparring.world.state.World`);
``identify(world, session, args)`` (the identity tool: binds ``session.customer_id`` and returns what the agent
sees); ``identity_of(world, customer_id)`` (what a customer can say to be identified); ``HANDLERS`` (tool -> handler
of a :class:`~sparring.world.calls.Ctx` and validated arguments); ``make_slots(intent, world, customer_id, rng,
opening)`` and ``plant(world, customer_id, intent, slots, rng)`` (a scenario's problem, chosen given what the customer
says first, then put into the world). Its expert, which runs the tools (and so this code), is registered apart:
:mod:`sparring.world.experts`.

A domain's module is registered here by name (``CODE``): imported statically, so no import escapes the layer
checks (tests/test_import_layers.py) and a stage's DVC dependencies follow it (stagekit.code_deps).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from types import ModuleType

from sparring.world.vocab import DOMAIN

REQUIRED = ("COLLECTIONS", "generate_world", "identify", "identity_of", "HANDLERS", "make_slots", "plant")


def _banking() -> ModuleType:
    from sparring.domains import banking

    return banking


def _retail() -> ModuleType:
    from sparring.domains import retail

    return retail


# A domain file's `module` -> its loader (imported on first use: it imports the world's modules that import this one).
CODE: dict[str, Callable[[], ModuleType]] = {"sparring.domains.banking": _banking, "sparring.domains.retail": _retail}


@cache
def domain_code() -> ModuleType:
    """The active domain's module; a clear error when it is not registered or lacks part of the contract."""
    load = CODE.get(DOMAIN.module)
    if load is None:
        raise ImportError(f"{DOMAIN.path}: module {DOMAIN.module} is not registered in sparring.world.domain_code.CODE")
    module = load()
    missing = [name for name in REQUIRED if not hasattr(module, name)]
    if missing:
        raise ImportError(f"{DOMAIN.path}: {DOMAIN.module} lacks {', '.join(missing)} (sparring.world.domain_code)")
    return module
