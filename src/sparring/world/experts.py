"""Each domain's expert: the calls that resolve a scenario, found the way an agent could find them.

An expert runs the tools to read what it acts on, and the tools run the domain's code, so experts are registered
here, apart from :mod:`sparring.world.domain_code` (which the tools import), keyed by the domain file's `module`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparring.world.vocab import DOMAIN

if TYPE_CHECKING:
    from sparring.world.scenarios import Scenario
    from sparring.world.state import World
    from sparring.world.tools import ToolCall


def expert_calls(scenario: Scenario, world: World) -> list[ToolCall]:
    """The active domain's expert calls for ``scenario`` from ``world`` (not modified)."""
    if DOMAIN.module == "sparring.domains.retail":
        from sparring.domains.retail_expert import expert_calls as calls
    elif DOMAIN.module == "sparring.domains.banking":
        from sparring.world.expert import expert_calls as calls
    else:
        raise ImportError(f"{DOMAIN.path}: no expert for {DOMAIN.module} in sparring.world.experts")
    return calls(scenario, world)
