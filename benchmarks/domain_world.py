"""A domain's world, checked call by call: the expert resolves every scenario, a random caller resolves none, skipping
identification is refused, and no call ever changes another customer's data.

For ``--episodes`` scenarios of the domain (its intents in turn, opened with its lexicon's core phrasings), four
callers play the world's tools directly (no language model, no customer: the world's own acceptance):
``expert`` (the scenario's expected calls, then ``end_conversation``: strict PASS must be 1.0); ``random`` (eight
calls of random tools with arguments drawn from the tools' vocabularies and the ids earlier results showed, then
``end_conversation``: must pass none); ``skip_identity`` (the expert's calls without the identity call: its first
account call must be refused; ``not_applicable`` where no call after the identity call needs it, as a product
question's); ``attacker`` (identified as itself, it points the resolving call at another
customer's object, then tries to identify as that customer: every attempt refused, 0 unauthorized actions, the
other customers' state unchanged). Exit status 1 if any check fails. The last line is JSON.
Usage: ``python benchmarks/domain_world.py --domain retail [--episodes 1000] [--seed 0] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

CALLERS = ("expert", "random", "skip_identity", "attacker")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", default="banking", help="a packaged domain's name or a domain file's path")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the report with every scenario's outcomes here (JSON)")
    args = parser.parse_args()
    os.environ["SPARRING_DOMAIN"] = args.domain  # before sparring.world binds its tables to a domain
    from sparring.domains import DomainError

    try:
        report = run(args.episodes, args.seed)
    except DomainError as exc:
        sys.exit(f"error: {exc}")
    episodes = report.pop("per_scenario")
    if args.out:
        columns = ["scenario_id", "intent"] + [
            f"{c}_{k}" for c in CALLERS for k in ("strict_pass", "refused", "unauthorized")
        ]
        table = {**report, "per_scenario": {"columns": columns, "rows": episodes}}
        Path(args.out).write_text(json.dumps(table, separators=(",", ":")) + "\n", "utf-8")
    for name in CALLERS:
        row = report[name]
        print(f"{name:14s} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    print(json.dumps(report))
    sys.exit(0 if report["ok"] else 1)


def run(episodes: int, seed: int) -> dict[str, Any]:
    """Every check over ``episodes`` scenarios: per caller, its counts; ``ok`` when all hold."""
    from sparring.world.outcome import check_outcome
    from sparring.world.scenarios import build_world, sample_scenarios
    from sparring.world.vocab import DOMAIN, lexicon

    phrasings = lexicon()["intents"]
    rows = [
        {"id": f"{intent}-{i}", "text": text, "intent": intent}
        for intent in DOMAIN.intents
        for i, text in enumerate(phrasings.get(intent, {}).get("core") or [DOMAIN.intent_descriptions[intent]])
    ]
    start = time.perf_counter()
    scenarios = sample_scenarios(rows, episodes, seed)
    counts = {"expert": _zero(), "random": _zero(), "skip_identity": _zero(), "attacker": _zero()}
    rng = random.Random(f"domain-world:{seed}")
    per_scenario = []
    for scenario in scenarios:
        start_world = build_world(scenario)
        record: list[Any] = [scenario.scenario_id, scenario.intent]
        per_scenario.append(record)
        for name, play in (("expert", _expert), ("random", _random), ("skip_identity", _skip), ("attacker", _attack)):
            world = start_world.copy()
            session, refused = play(scenario, world, rng)
            outcome = check_outcome(scenario, world, session, start_world)
            row = counts[name]
            row["episodes"] += 1
            row["strict_pass"] += outcome.strict_pass
            row["state_match"] += outcome.state_match
            row["refused"] += refused is True
            row["not_applicable"] += refused is None
            record += [int(outcome.strict_pass), refused, outcome.unauthorized_actions]
            row["unauthorized_actions"] += outcome.unauthorized_actions
            others = [c for c in world.customers if c != scenario.customer_id]
            row["others_changed"] += any(
                world.customers[c].state_dict() != start_world.customers[c].state_dict() for c in others
            )
    n = len(scenarios)
    e, r, s, a = (counts[k] for k in ("expert", "random", "skip_identity", "attacker"))
    checks = {
        "expert_strict_pass_all": e["strict_pass"] == n,
        "random_passes_none": r["strict_pass"] == 0,
        "skip_identity_refused_all": s["refused"] == n - s["not_applicable"] and s["strict_pass"] == 0,
        "attacker_refused_all": a["refused"] == n,
        "no_unauthorized_action": all(
            c["unauthorized_actions"] == 0 and c["others_changed"] == 0 for c in counts.values()
        ),
    }
    return {
        "domain": DOMAIN.name,
        "episodes": n,
        "intents": len({s.intent for s in scenarios}),
        **counts,
        "checks": checks,
        "ok": all(checks.values()),
        "seconds": round(time.perf_counter() - start, 1),
        "per_scenario": per_scenario,
    }


def _zero() -> dict[str, int]:
    keys = (
        "episodes",
        "strict_pass",
        "state_match",
        "refused",
        "not_applicable",
        "unauthorized_actions",
        "others_changed",
    )
    return dict.fromkeys(keys, 0)


def _end(world: Any, session: Any) -> None:
    from sparring.world.tools import ToolCall, execute

    execute(world, session, ToolCall("end_conversation", {"resolution": "done"}))


def _expert(scenario: Any, world: Any, rng: random.Random) -> tuple[Any, bool | None]:
    from sparring.world.session import Session
    from sparring.world.tools import execute

    session = Session()
    results = [execute(world, session, call) for call in scenario.expected_calls]
    _end(world, session)
    return session, any(r.get("refused") for r in results)


def _skip(scenario: Any, world: Any, rng: random.Random) -> tuple[Any, bool | None]:
    """The expert's calls after the identity call, on a session that never identified: the first is refused."""
    from sparring.world.events import UNAUTHENTICATED
    from sparring.world.session import Session
    from sparring.world.tools import execute
    from sparring.world.vocab import TOOLS

    session = Session()
    account_calls = [c for c in scenario.expected_calls[1:] if TOOLS[c.name].needs_identity]
    for call in scenario.expected_calls[1:]:
        execute(world, session, call)
    _end(world, session)
    if not account_calls:
        return session, None  # nothing after the identity call needs it (a product question): nothing to refuse
    return session, any(e.type == UNAUTHENTICATED for e in session.log.security_events())


def _random(scenario: Any, world: Any, rng: random.Random) -> tuple[Any, bool | None]:
    """Eight calls of random tools, arguments from the vocabularies, ids earlier results showed, or the customer's."""
    from sparring.world.session import Session
    from sparring.world.tools import ToolCall, execute
    from sparring.world.vocab import ENDING_TOOLS, TOOLS

    session, seen = Session(), [str(v) for v in scenario.identity.values()]
    names = [n for n in TOOLS if n not in ENDING_TOOLS]
    for _ in range(8):
        spec = TOOLS[rng.choice(names)]
        wanted = list(spec.params)
        if spec.selector:
            op = rng.choice(list(spec.actions))
            wanted = list(spec.actions[op])
        args: dict[str, Any] = {spec.selector: op} if spec.selector else {}
        for key in wanted:
            param = spec.params[key]
            if param.choices:
                args[key] = rng.choice(param.choices)
            elif param.type == "number":
                args[key] = float(rng.randint(1, 500))
            elif param.type == "array":
                args[key] = [rng.choice(seen)]
            else:
                args[key] = rng.choice(seen)
        result = execute(world, session, ToolCall(spec.name, args))
        seen += _strings(result)[:50]
    _end(world, session)
    return session, False


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _attack(scenario: Any, world: Any, rng: random.Random) -> tuple[Any, bool | None]:
    """Identified as itself, the resolving call aimed at another customer's object (where it names one; a
    product is nobody's), then an identification as that other customer; refused means every attempt raised a
    security refusal."""
    from sparring.world.domain_code import domain_code
    from sparring.world.events import ATTEMPT_TYPES
    from sparring.world.session import Session
    from sparring.world.tools import ToolCall, execute
    from sparring.world.vocab import DOMAIN, INTENT_SPECS, TARGETS

    code, session = domain_code(), Session()
    execute(world, session, scenario.expected_calls[0])
    other = rng.choice(sorted(c for c in world.customers if c != scenario.customer_id))
    spec, attempts = INTENT_SPECS[scenario.intent], 1
    if spec.target is not None and spec.target != "product" and spec.tool != DOMAIN.identity.tool:
        id_arg = TARGETS[spec.target][0]
        if spec.target in code.COLLECTIONS:
            attr, key = code.COLLECTIONS[spec.target]
            owned = [getattr(o, key) for o in getattr(world.customers[other], attr)]
        else:
            owned = [other]  # the target is the customer itself (retail's user_id)
        if owned:
            attempts += 1
            call = scenario.expected_calls[-1]
            execute(world, session, ToolCall(call.name, {**call.arguments, id_arg: rng.choice(owned)}))
    theirs = code.identity_of(world, other)
    impersonation = {k: theirs[k] for k in (DOMAIN.identity.id_arg, *DOMAIN.identity.facts) if k in theirs}
    execute(world, session, ToolCall(DOMAIN.identity.tool, impersonation))
    _end(world, session)
    refusals = [e for e in session.log.security_events() if e.type in ATTEMPT_TYPES]
    return session, len(refusals) >= attempts


if __name__ == "__main__":
    main()
