"""Scripted episodes that end as each persona's real sessions do (issue 58), for the simulator's stage-1 SFT.

Why: the simulator's only sessions against an expert-styled agent are its scripted episodes (TRACER stage 1.1 (c),
:mod:`sparring.train.tracer`), and they all ended resolved. The SFT simulator learnt that: it ended 119-120 of 120
held-out sessions resolved against the escalating expert (real: 52.5%), outcome F1 0.230 = the always-resolved
bound (ceiling 0.417), and in stage 2 97-100% of its GRPO sessions ended resolved, so the hierarchical reward had
no ending spread to reinforce (docs/results.md, "TRACER stage 2 on the default simulator, two RL seeds").

Here each scripted episode's ending is drawn from its persona's ending rates in the training dialogues
(:func:`persona_ending_rates`; the counts per persona follow the rates up to rounding, :func:`draw_endings`) and
played through the world, so :func:`~sparring.train.tracer.simulated_outcome` reads it off as drawn:

- ``abandoned``: the customer answers as many questions as a real leaver of its persona did, then leaves with that
  dialogue's own leave line (:func:`~sparring.agents.leaving.gives_up` ends the session);
- ``escalated``: the customer refuses to verify twice, in the dialogues' own refusal wording, and the escalating
  expert (:class:`~sparring.agents.escalation.EscalatingExpert`) hands it to a person (``transfer_to_human``);
- ``resolved``: the cooperative customer, as before.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from sparring.agents.customer_view import extract_identity
from sparring.agents.escalation import LEAVE_LINE, REFUSE_LINE, REFUSES, EscalatingExpert
from sparring.agents.leaving import gives_up
from sparring.agents.scripted import CooperativeCustomer
from sparring.agents.slots import delexicalize, identity_slots
from sparring.agents.transcript import ASKS_IDENTITY
from sparring.data.synthetic import OUTCOMES
from sparring.lm.policies import TurnOutput, TurnRequest
from sparring.rollout import Episode, run_episodes
from sparring.world.scenarios import Scenario
from sparring.world.session import CUSTOMER_LEFT


def persona_ending_rates(dialogues: pl.DataFrame, personas: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """Each persona's (resolved, escalated, abandoned) shares in ``dialogues``; a persona with no dialogue of a known
    ending is refused by name: a default would hide that the source cannot say how its sessions end."""
    known = dialogues.filter(pl.col("outcome").is_in(OUTCOMES))
    rates: dict[str, tuple[float, ...]] = {}
    for persona in sorted(set(personas)):
        ends = known.filter(pl.col("persona") == persona)["outcome"].to_list()
        if ends:
            rates[persona] = tuple(ends.count(o) / len(ends) for o in OUTCOMES)
    missing = sorted(set(personas) - rates.keys())
    if missing:
        raise ValueError(f"no dialogues with a known ending for persona(s) {missing}: their ending rates are unknown")
    return rates


def draw_endings(scenarios: Sequence[Scenario], rates: Mapping[str, Sequence[float]], seed: int) -> list[str]:
    """One ending per scenario: per persona, counts by largest remainder of rate x n, in a seeded order."""
    by_persona: dict[str, list[int]] = {}
    for i, s in enumerate(scenarios):
        by_persona.setdefault(s.persona, []).append(i)
    endings = [""] * len(scenarios)
    for persona, idx in sorted(by_persona.items()):
        exact = [r * len(idx) for r in rates[persona]]
        counts = [int(x) for x in exact]
        by_remainder = sorted(range(len(OUTCOMES)), key=lambda k: (counts[k] - exact[k], k))
        for k in by_remainder[: len(idx) - sum(counts)]:
            counts[k] += 1
        pool = [o for o, c in zip(OUTCOMES, counts, strict=True) for _ in range(c)]
        random.Random(f"scripted-endings:{seed}:{persona}").shuffle(pool)
        for i, ending in zip(idx, pool, strict=True):
            endings[i] = ending
    return endings


@dataclass(frozen=True)
class Leaver:
    """How one real customer left: the questions answered first and the leave line (facts as placeholders)."""

    answers: int
    line: str


def leavers(dialogues: pl.DataFrame) -> dict[str, list[Leaver]]:
    """Per persona, the abandoned dialogues whose last customer turn leaves the chat (:func:`gives_up`)."""
    out: dict[str, list[Leaver]] = {}
    for row in dialogues.filter(pl.col("outcome") == "abandoned").iter_rows(named=True):
        said = [t for t in row["turns"] if t["role"] == "customer" and str(t["text"]).strip()]
        if len(said) >= 2 and gives_up(str(said[-1]["text"])):
            line = delexicalize(str(said[-1]["text"]).strip(), identity_slots(extract_identity(row["turns"])))
            out.setdefault(row["persona"], []).append(Leaver(len(said) - 2, line))
    return out


def refusal_lines(dialogues: pl.DataFrame) -> list[str]:
    """The dialogues' customer answers that refuse to verify as the escalating expert reads them (:data:`REFUSES`)
    and do not leave, their identity facts as placeholders, each once in order of first use. Lines written all
    in lower case are left out: the customer's name in them is not found, so it would stay another customer's."""
    lines: dict[str, None] = {}
    for row in dialogues.iter_rows(named=True):
        values = identity_slots(extract_identity(row["turns"]))
        for prev, turn in zip(row["turns"], row["turns"][1:], strict=False):
            text = str(turn["text"]).strip()
            refuses = REFUSES.search(text) and not gives_up(text) and text != text.lower()
            if prev["role"] == "agent" and turn["role"] == "customer" and refuses:
                lines[delexicalize(text, values)] = None
    return list(lines)


@dataclass(frozen=True)
class EndingPlan:
    """One scripted episode's ending: ``lines`` are the leave line (abandoned) or the two refusals (escalated)."""

    ending: str
    lines: tuple[str, ...] = ()
    answers: int = 0


class PlannedCustomer(CooperativeCustomer):
    """The cooperative customer playing each scenario's :class:`EndingPlan` (unlisted scenarios: resolved)."""

    def __init__(self, plans: Mapping[str, EndingPlan]) -> None:
        self.plans = dict(plans)

    def act(self, requests: list[TurnRequest]) -> list[TurnOutput]:
        return [TurnOutput(self.reply(r)) for r in requests]

    def reply(self, request: TurnRequest) -> str:
        plan = self.plans.get(request.scenario.scenario_id, EndingPlan("resolved"))
        own = [str(m["content"]) for m in request.messages if m["role"] == "assistant"]
        if plan.ending == "resolved" or not own:
            return super().reply(request)  # the opening, or a session to resolve
        if plan.ending == "abandoned":
            return plan.lines[0] if len(own) - 1 >= plan.answers else super().reply(request)
        heard = str(request.messages[-1]["content"]) if request.messages[-1]["role"] == "user" else ""
        refused = sum(text in plan.lines for text in own)
        if ASKS_IDENTITY.search(heard) and refused < len(plan.lines):
            return plan.lines[refused]
        return super().reply(request)


def ending_plans(
    scenarios: Sequence[Scenario], dialogues: pl.DataFrame, seed: int, leave_now: frozenset[str] = frozenset()
) -> dict[str, EndingPlan]:
    """Each scenario's plan, its ending drawn from its persona's rates in ``dialogues``; a leaver copies a real
    leaver of its persona (any persona's when its own left no line; :data:`LEAVE_LINE` when none did), a refuser
    says two of the dialogues' refusals (:data:`REFUSE_LINE` when they hold none). ``leave_now``: scenarios whose
    leaver answers nothing first (the expert had already acted when it would have left)."""
    endings = draw_endings(scenarios, persona_ending_rates(dialogues, [s.persona for s in scenarios]), seed)
    left, refusals = leavers(dialogues), refusal_lines(dialogues) or [REFUSE_LINE]
    anyone = [leaver for persona in sorted(left) for leaver in left[persona]] or [Leaver(0, LEAVE_LINE)]
    plans = {}
    for s, ending in zip(scenarios, endings, strict=True):
        rng = random.Random(f"scripted-ending-lines:{seed}:{s.scenario_id}")
        if ending == "abandoned":
            leaver = rng.choice(left.get(s.persona) or anyone)
            answers = 0 if s.scenario_id in leave_now else leaver.answers
            plans[s.scenario_id] = EndingPlan(ending, (leaver.line,), answers)
        elif ending == "escalated":  # two different refusals where the dialogues hold two
            plans[s.scenario_id] = EndingPlan(ending, tuple(rng.sample(refusals, min(2, len(refusals))) * 2)[:2])
        else:
            plans[s.scenario_id] = EndingPlan(ending)
    return plans


def ending_episodes(
    scenarios: Sequence[Scenario], dialogues: pl.DataFrame, agent: EscalatingExpert, seed: int, max_turns: int = 6
) -> list[Episode]:
    """The scripted episodes, each ending as :func:`ending_plans` drew it; a leaver whose expert acted before it
    left (the session was resolved, not left: ``ended_by``) is played again leaving at once, so every drawn ending
    is reached."""
    plans = ending_plans(scenarios, dialogues, seed)
    episodes = run_episodes(scenarios, agent, PlannedCustomer(plans), max_turns=max_turns, seed=seed)
    late = frozenset(
        e.scenario.scenario_id
        for e in episodes
        if plans[e.scenario.scenario_id].ending == "abandoned" and e.ended_by != CUSTOMER_LEFT
    )
    if late:
        plans = ending_plans(scenarios, dialogues, seed, leave_now=late)
        again = [s for s in scenarios if s.scenario_id in late]
        replayed = run_episodes(again, agent, PlannedCustomer(plans), max_turns=max_turns, seed=seed)
        by_id = {e.scenario.scenario_id: e for e in replayed}
        episodes = [by_id.get(e.scenario.scenario_id, e) for e in episodes]
    return episodes
