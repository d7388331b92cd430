"""The intent taxonomy: every Banking77 intent, the tool that resolves it, and a short description.

The data lives in ``taxonomy.json`` beside this file so that non-Python tools (and people) can read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class Intent:
    name: str
    tool: str
    description: str


@dataclass(frozen=True)
class Taxonomy:
    tools: dict[str, str]  # tool name -> what it does
    intents: dict[str, Intent]  # intent name (exactly as in Banking77) -> Intent

    @property
    def intent_names(self) -> list[str]:
        return list(self.intents)

    def tool_for(self, intent: str) -> str:
        return self.intents[intent].tool

    def intents_for(self, tool: str) -> list[str]:
        return [i.name for i in self.intents.values() if i.tool == tool]


@cache
def load_taxonomy() -> Taxonomy:
    raw = json.loads(resources.files("sparring.world").joinpath("taxonomy.json").read_text("utf-8"))
    tools = dict(raw["tools"])
    intents = {
        name: Intent(name=name, tool=v["tool"], description=v["description"]) for name, v in raw["intents"].items()
    }
    unknown = sorted({i.tool for i in intents.values()} - set(tools))
    if unknown:
        raise ValueError(f"taxonomy.json: intents refer to undefined tools {unknown}")
    return Taxonomy(tools=tools, intents=intents)
