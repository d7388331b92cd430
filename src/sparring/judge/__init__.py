"""The automated judge: trained intent oracle and realism discriminator, and the rewards built on them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sparring.rollout import Episode


class Scorer(Protocol):
    """What training and evaluation need of a judge: one reward dict per finished episode (``Judge.score``)."""

    def score(self, episodes: Sequence[Episode]) -> list[dict[str, float]]: ...
