"""Fixed bank policy facts returned by the informational tool actions (keyed by (tool, action)).

The facts are the domain file's ``policy`` and ``declines`` sections (``sparring/domains/banking.yaml``).
"""

from __future__ import annotations

from typing import Any

from sparring.world.vocab import DOMAIN

INFO: dict[tuple[str, str], dict[str, Any]] = DOMAIN.policy
DECLINE_EXPLANATIONS: dict[str, str] = DOMAIN.declines
