"""Where co-evolution stands between cycles, as plain files: state.json (checkpoint paths, W_DA and adversary success
histories, what trained) and transcripts.jsonl (recent arena episodes, which later gyms replay)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sparring.atomic import write_json

STATE_FILE, TRANSCRIPTS_FILE = "state.json", "transcripts.jsonl"


@dataclass
class CycleState:
    """Where co-evolution stands after ``cycle`` finished cycles; paths are stored as given."""

    agent_dir: str
    simulator_dir: str
    adversary_dirs: list[str] = field(default_factory=list)  # generations, oldest first; the last is current
    cycle: int = 0
    w_da_history: list[float] = field(default_factory=list)
    adv_success_history: list[float] = field(default_factory=list)  # the arenas' adversary win rates
    trained_history: list[str] = field(default_factory=list)
    transcripts: list[dict[str, Any]] = field(default_factory=list)  # recent arena episodes, oldest first
    stopped: str | None = None  # why co-evolution stopped; None while it goes on

    @property
    def adversary_dir(self) -> str:
        """The current adversary: the last generation, or the simulator before the adversary ever trained."""
        return self.adversary_dirs[-1] if self.adversary_dirs else self.simulator_dir

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        state = {k: v for k, v in asdict(self).items() if k != "transcripts"}
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{TRANSCRIPTS_FILE}.tmp"
        tmp.write_text("".join(json.dumps(t, sort_keys=True, default=str) + "\n" for t in self.transcripts))
        tmp.replace(folder / TRANSCRIPTS_FILE)
        write_json(state, folder / STATE_FILE)  # last: a folder with state.json is complete

    @classmethod
    def load(cls, folder: Path) -> CycleState:
        folder = Path(folder)
        state = json.loads((folder / STATE_FILE).read_text())
        lines = (folder / TRANSCRIPTS_FILE).read_text().splitlines()
        return cls(**state, transcripts=[json.loads(x) for x in lines if x.strip()])


def dips_and_recovers(trained: Sequence[str], w_da: Sequence[float]) -> bool:
    """RL-ADA's signature, W_DA dipping and recovering: some cycle's adversary gym lowered the next arena's W_DA
    and the agent gym of the cycle after it raised the arena after that (``trained``, ``w_da``: per cycle, W_DA the
    arena played before that cycle's side trained)."""
    return any(
        trained[i] == "adversary" and trained[i + 1] == "agent" and w_da[i + 1] < w_da[i] and w_da[i + 2] > w_da[i + 1]
        for i in range(len(w_da) - 2)
    )
