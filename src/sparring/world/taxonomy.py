"""The intent taxonomy: every intent of the active domain, the tool that resolves it, and a short description.

The data is the domain file's ``intents`` and the tools' ``summary`` (``sparring/domains/banking.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from sparring.world.vocab import DOMAIN


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
    intents = {
        name: Intent(name=name, tool=spec.tool, description=DOMAIN.intent_descriptions[name])
        for name, spec in DOMAIN.intents.items()
    }
    return Taxonomy(tools=dict(DOMAIN.summaries), intents=intents)
