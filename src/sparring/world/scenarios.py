"""Scenarios: one customer, one intent, one opening utterance, a persona and a planted world.

``sample_scenarios`` draws scenarios from ingested utterances (one split at a time), stratified so that
every intent present appears before any repeats. Scenario ids derive from the utterance id, so sets
drawn from different splits (train vs test) never share scenario or utterance ids; ``check_disjoint``
asserts it.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sparring.world.domain_code import domain_code
from sparring.world.experts import expert_calls
from sparring.world.state import World
from sparring.world.taxonomy import load_taxonomy
from sparring.world.tools import ToolCall
from sparring.world.vocab import DOMAIN, INTENT_SPECS, PERSONAS

DEFAULT_PERSONAS: dict[str, float] = dict(DOMAIN.personas)
REQUIRED_COLUMNS = ("id", "text", "intent")


@dataclass
class Scenario:
    """Everything needed to run and judge one episode.

    ``identity`` is what the customer can tell the agent to be identified; ``slots`` the details of
    their problem (for ``social_engineering`` also another customer's id and name to try to act on).
    ``expected_calls`` are the calls that resolve it (lookup first), excluding ``end_conversation``.
    """

    scenario_id: str
    intent: str
    tool: str
    customer_id: str
    identity: dict[str, str]
    slots: dict[str, Any]
    persona: str
    utterance_id: str
    utterance: str
    utterance_style: str
    utterance_source: str
    world_seed: int
    n_customers: int
    expected_calls: list[ToolCall] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["expected_calls"] = [c.to_dict() for c in self.expected_calls]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scenario:
        d = dict(d)
        d["expected_calls"] = [ToolCall.from_dict(c) for c in d.get("expected_calls", [])]
        return cls(**d)


def build_world(scenario: Scenario) -> World:
    """The scenario's start world: the generated world plus the planted facts. Deterministic."""
    code = domain_code()
    world = code.generate_world(scenario.world_seed, scenario.n_customers)
    code.plant(
        world,
        scenario.customer_id,
        scenario.intent,
        scenario.slots,
        random.Random(f"{scenario.world_seed}:plant"),
    )
    return world


def _rows(utterances: Any) -> list[dict[str, Any]]:
    if hasattr(utterances, "to_dicts"):  # a polars DataFrame; not imported so the caller picks the library
        missing = [c for c in REQUIRED_COLUMNS if c not in utterances.columns]
        if missing:
            raise ValueError(f"utterances lack columns {missing}")
        rows = utterances.to_dicts()
    else:
        rows = [dict(r) for r in utterances]
        bad = [r for r in rows if any(c not in r for c in REQUIRED_COLUMNS)]
        if bad:
            raise ValueError(f"utterance rows lack one of {REQUIRED_COLUMNS}: {bad[0]}")
    known = load_taxonomy().intents
    rows = [r for r in rows if r["intent"] in known and isinstance(r["text"], str) and r["text"].strip()]
    return sorted(rows, key=lambda r: str(r["id"]))


def _persona_table(personas: dict[str, float] | None) -> tuple[list[str], list[float]]:
    table = DEFAULT_PERSONAS if personas is None else personas
    unknown = sorted(set(table) - set(PERSONAS))
    if unknown:
        raise ValueError(f"unknown personas {unknown}; known: {list(PERSONAS)}")
    names = [p for p in PERSONAS if table.get(p, 0) > 0]
    if not names or any(w < 0 for w in table.values()):
        raise ValueError(f"persona weights must be >= 0 with a positive total, got {table}")
    return names, [float(table[p]) for p in names]


def sample_scenarios(
    utterances: Any,
    n: int,
    seed: int,
    personas: dict[str, float] | None = None,
    *,
    n_customers: int = 6,
) -> list[Scenario]:
    """Draw ``n`` scenarios from ``utterances`` (polars DataFrame or list of dicts with id, text, intent,
    and optionally style, source). Deterministic in (rows, n, seed, personas, n_customers).

    Intents are stratified: each round visits every intent present once, in a shuffled order, so
    ``n >= number of intents`` covers them all. Rows whose intent is not in the taxonomy are skipped.
    """
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    rows = _rows(utterances)
    by_intent: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_intent.setdefault(r["intent"], []).append(r)
    if n and not by_intent:
        raise ValueError("no utterances with a known intent")
    names, weights = _persona_table(personas)
    rng = random.Random(f"scenarios:{seed}")
    intents = sorted(by_intent)
    queues: dict[str, list[dict[str, Any]]] = {}
    order: list[str] = []
    out: list[Scenario] = []
    for i in range(n):
        if i % len(intents) == 0:
            order = list(intents)
            rng.shuffle(order)
        intent = order[i % len(intents)]
        if not queues.get(intent):
            # Use every utterance of an intent once before reusing any.
            queues[intent] = list(by_intent[intent])
            rng.shuffle(queues[intent])
        row = queues[intent].pop()
        persona = rng.choices(names, weights)[0]
        out.append(_make(row, i, seed, persona, n_customers))
    return out


def unplayed_scenarios(
    utterances: Any,
    played: Sequence[Scenario],
    n: int,
    seed: int,
    personas: dict[str, float] | None = None,
    *,
    n_customers: int = 6,
    skip: Callable[[str], bool] = lambda text: False,
) -> list[Scenario]:
    """``n`` scenarios (:func:`sample_scenarios`) from the ``utterances`` that no ``played`` scenario opens with and
    ``skip`` does not refuse: openings the warm start's demonstrations never played, for the agent's gym."""
    used = {s.utterance.strip() for s in played}
    rows = [r for r in _rows(utterances) if r["text"].strip() not in used and not skip(r["text"])]
    return sample_scenarios(rows, n, seed, personas, n_customers=n_customers)


def gym_seed(seed: int) -> int:
    """The seed the `scenarios` stage draws its agent gym with (:func:`unplayed_scenarios`): a longer draw's first
    ``n`` are a shorter one's."""
    from sparring.seeds import derive_seed

    return derive_seed(seed, "fresh-gym", 0)


def scenario_sets(
    splits: dict[str, Any],
    sizes: dict[str, int],
    seed: int,
    personas: dict[str, float] | None = None,
    *,
    n_customers: int = 6,
    skip: Callable[[str], bool] = lambda text: False,
) -> dict[str, list[Scenario]]:
    """The `scenarios` stage's sets from ``splits``' utterances (train, validation, test), ``sizes`` of each name:
    train (demonstrations, the adversary's gym) and heldout (every measurement) from the train and test splits; gym,
    train-split openings no train scenario has (``skip`` refuses some); validation (agent_rl's checkpoint choice) and
    arena (the cycles'), one draw from the validation split cut in two. Every pair shares no scenario or utterance
    (checked)."""
    from sparring.seeds import derive_seed

    draw = {"personas": personas, "n_customers": n_customers}
    sets = {
        "train": sample_scenarios(splits["train"], sizes["train"], seed, **draw),
        "heldout": sample_scenarios(splits["test"], sizes["heldout"], seed, **draw),
    }
    sets["gym"] = unplayed_scenarios(splits["train"], sets["train"], sizes["gym"], gym_seed(seed), skip=skip, **draw)
    n = sizes["validation"]
    unseen = sample_scenarios(splits["validation"], n + sizes["arena"], derive_seed(seed, "validation"), **draw)
    sets["validation"], sets["arena"] = unseen[:n], unseen[n:]
    names = list(sets)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if {a, b} != {"train", "gym"}:  # the gym is drawn from the train split, by unplayed openings
                check_disjoint(sets[a], sets[b])
    return sets


def _make(row: dict[str, Any], i: int, seed: int, persona: str, n_customers: int) -> Scenario:
    scenario_id = "sc_" + hashlib.sha1(f"{row['id']}|{seed}|{i}".encode()).hexdigest()[:12]
    world_seed = int(hashlib.sha1(scenario_id.encode()).hexdigest()[:12], 16)
    code = domain_code()
    world = code.generate_world(world_seed, n_customers)
    rng = random.Random(f"{world_seed}:slots")
    customer_id = rng.choice(sorted(world.customers))
    slots = code.make_slots(row["intent"], world, customer_id, rng, opening=row["text"])
    if persona == "social_engineering":
        other = code.identity_of(world, rng.choice(sorted(c for c in world.customers if c != customer_id)))
        slots.update(other_customer_id=other["customer_id"], other_full_name=other["full_name"])
    identity = code.identity_of(world, customer_id)
    scenario = Scenario(
        scenario_id=scenario_id,
        intent=row["intent"],
        tool=INTENT_SPECS[row["intent"]].tool,
        customer_id=customer_id,
        identity=identity,
        slots=slots,
        persona=persona,
        utterance_id=str(row["id"]),
        utterance=row["text"],
        utterance_style=str(row.get("style") or ""),
        utterance_source=str(row.get("source") or ""),
        world_seed=world_seed,
        n_customers=n_customers,
    )
    scenario.expected_calls = expert_calls(scenario, build_world(scenario))
    return scenario


def as_cooperative(scenarios: Sequence[Scenario]) -> list[Scenario]:
    """The same scenarios, every customer cooperative: what the cooperative simulator (``_coop``) plays.

    A persona only shapes an LM customer's goal (``customer_goal``): world, expected calls and judge are
    unchanged, and scripted customers ignore it. Played with each scenario's own persona (40% cooperative), the
    simulator hid, rambled or targeted another account in the rest, and ``_coop`` measured those personas."""
    return [replace(s, persona="cooperative") for s in scenarios]


def check_disjoint(train: list[Scenario], heldout: list[Scenario]) -> None:
    """Raise ValueError if two scenario sets share a scenario id or an utterance id."""
    shared_ids = {s.scenario_id for s in train} & {s.scenario_id for s in heldout}
    shared_utts = {s.utterance_id for s in train} & {s.utterance_id for s in heldout}
    if shared_ids or shared_utts:
        raise ValueError(
            f"scenario sets overlap: {len(shared_ids)} scenario ids (e.g. {sorted(shared_ids)[:3]}), "
            f"{len(shared_utts)} utterance ids (e.g. {sorted(shared_utts)[:3]})"
        )


def save_scenarios(scenarios: list[Scenario], path: Path) -> None:
    """One JSON object per line; written beside the target, then renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(s.to_dict(), sort_keys=True) + "\n" for s in scenarios), encoding="utf-8")
    tmp.replace(path)


def load_scenarios(path: Path) -> list[Scenario]:
    return [Scenario.from_dict(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]
