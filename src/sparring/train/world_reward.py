"""The judge's reward from the world's state alone: its learned parts (faithfulness, realism) held constant and never
loaded. The agent's r_DA reads the world's state (resolution, correct tool, lookup first, clean end, format), the
learned parts are the adversary's terms: agent_rl's judge (:func:`~sparring.train.agent_rl.world_judge`), and the
plumbing checks' (the DDP smoke test, the gym tests), whose rewards then need no fitted judge."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class ConstantStyle:
    """A judge backend whose learned parts are constants: faithfulness 0.9, realism 0.8, an intent never named."""

    def faithfulness(self, turns: Sequence[Sequence[str]], intents: Sequence[str]) -> np.ndarray:
        return np.full(len(turns), 0.9)

    def realism(self, turns: Sequence[Sequence[str]]) -> np.ndarray:
        return np.full(len(turns), 0.8)

    def named_outright(self, text: str, intent: str) -> bool:
        return False
