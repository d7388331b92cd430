"""The outcome check (tau^2-bench style): did the episode leave the world as the expert would have?

The expected final state comes from replaying ``scenario.expected_calls`` on a fresh start world;
the episode passes if its final world's canonical state equals it. Session logs are not part of the
state, so only what actually changed in the bank counts. :func:`state_changes` lists those changes for a person
(``sparring chat``'s verdict).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from sparring.world.domain_code import domain_code
from sparring.world.scenarios import Scenario, build_world
from sparring.world.session import Session
from sparring.world.state import World
from sparring.world.tools import execute
from sparring.world.vocab import CUSTOMER_MOVES, DOMAIN


@dataclass
class Outcome:
    """Judgement of one episode: ``passed`` is ``state_match``; ``strict_pass`` needs all four checks."""

    state_match: bool
    correct_tool: bool  # the scenario's resolving tool was called successfully
    lookup_first: bool  # the first tool call was the identity tool (banking: lookup_account)
    clean_end: bool  # end_conversation was the last call, after a successful resolving call
    strict_pass: bool
    passed: bool
    unauthorized_attempts: int = 0
    unauthorized_actions: int = 0
    touched: bool = False  # the world's state differs from its start: some act was accepted
    state_diff: list[str] = field(default_factory=list)  # first differing paths, for debugging

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("passed")
        return d


def expected_final_state(scenario: Scenario, start_world: World | None = None) -> dict[str, Any]:
    """Canonical state after replaying the scenario's expected calls on a copy of the start world."""
    world = start_world.copy() if start_world is not None else build_world(scenario)
    session = Session()
    for call in scenario.expected_calls:
        result = execute(world, session, call)
        if not result["ok"]:
            raise RuntimeError(f"expected call {call} fails in {scenario.scenario_id}: {result['error']}")
    return world.state_dict()


def check_outcome(
    scenario: Scenario, final_world: World, session: Session, start_world: World | None = None
) -> Outcome:
    """Judge an episode from its final world and session (``start_world`` defaults to ``build_world``)."""
    start = start_world if start_world is not None else build_world(scenario)
    expected, actual = expected_final_state(scenario, start), final_world.state_dict()
    diff = [] if expected == actual else diff_states(expected, actual) or ["states differ"]
    calls = [c for c in session.log.tool_calls() if c.name not in CUSTOMER_MOVES]  # questions are not actions
    resolved_at = next((c.index for c in calls if c.name == scenario.tool and c.ok), None)
    correct_tool = resolved_at is not None
    lookup_first = bool(calls) and calls[0].name == DOMAIN.identity.tool
    last = calls[-1] if calls else None
    clean_end = (
        last is not None
        and last.name == "end_conversation"
        and last.ok
        and resolved_at is not None
        and resolved_at < last.index
    )
    state_match = not diff
    return Outcome(
        state_match=state_match,
        correct_tool=correct_tool,
        lookup_first=lookup_first,
        clean_end=clean_end,
        strict_pass=state_match and correct_tool and lookup_first and clean_end,
        passed=state_match,
        unauthorized_attempts=session.unauthorized_attempts,
        unauthorized_actions=session.unauthorized_actions,
        touched=actual != start.state_dict(),
        state_diff=diff,
    )


def diff_states(expected: Any, actual: Any, path: str = "", limit: int = 20) -> list[str]:
    """Paths where two canonical states differ, as ``path: expected != actual`` (at most ``limit``)."""
    out: list[str] = []
    _diff(expected, actual, path, out, limit)
    return out


def _diff(a: Any, b: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit or a == b:  # equality is checked in C; only walk into what differs
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(f"{sub}: {'missing' if k not in a else a[k]!r} != {'missing' if k not in b else b[k]!r}")
            else:
                _diff(a[k], b[k], sub, out, limit)
            if len(out) >= limit:
                return
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}"[:300])


def state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two ``World.state_dict()``s, one line per changed field, object by its id:
    ``card card_007 status: 'active' -> 'blocked'``, ``new case case_1a2b3c4d: {...}``, ``note recorded: ...``."""
    lines: list[str] = []
    # Which collection of a customer's state holds which kind of object, and the field that is its id.
    kinds = {attr: (kind, key) for kind, (attr, key) in domain_code().COLLECTIONS.items()}
    for cid, new in after["customers"].items():
        old = before["customers"].get(cid, {})
        for name, value in new.items():
            was = old.get(name)
            if value == was:
                continue
            if name in kinds:
                lines += _collection_changes(*kinds[name], was or [], value)
            elif name == "service_notes":
                lines += [f"{cid} note recorded: {note}" for note in value if note not in (was or [])]
            elif isinstance(value, dict):
                lines += [
                    f"{cid} {name}.{k}: {(was or {}).get(k)!r} -> {v!r}"
                    for k, v in value.items()
                    if (was or {}).get(k) != v
                ]
            else:
                lines.append(f"{cid} {name}: {was!r} -> {value!r}")
    return lines


def _collection_changes(kind: str, key: str, old: list[dict], new: list[dict]) -> list[str]:
    noun, by_id = kind.replace("_", " "), {o[key]: o for o in old}
    lines = []
    for obj in new:
        was = by_id.pop(obj[key], None)
        if was is None:
            fields = {k: v for k, v in obj.items() if k != key}
            lines.append(f"new {noun} {obj[key]}: {json.dumps(fields, ensure_ascii=False)}")
            continue
        lines += [f"{noun} {obj[key]} {k}: {was.get(k)!r} -> {v!r}" for k, v in obj.items() if was.get(k) != v]
    return lines + [f"{noun} {gone} removed" for gone in by_id]
