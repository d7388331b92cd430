"""Embedded, deterministic generator of the active domain's synthetic support dialogues, over the utterance
generator's lexicon (its ``dialogue`` key) and writer (``synthetic.py``): an opening in the persona's style, the agent's
questions (verify, which object, confirm, sometimes wrongly) with the customer's answers, and an ending drawn from the
persona's outcome odds."""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import polars as pl

from sparring.data.synthetic import OUTCOMES, TURN_DTYPE, Writer, decap, end_sentence
from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import DOMAIN, INTENT_SPECS, PERSONAS

# P(resolved, escalated, abandoned) per persona: the impatient walk away, social engineers get escalated.
OUTCOME_WEIGHTS: dict[str, tuple[float, float, float]] = {
    "cooperative": (0.82, 0.12, 0.06),
    "vague": (0.60, 0.20, 0.20),
    "impatient": (0.35, 0.20, 0.45),
    "camouflaging": (0.62, 0.22, 0.16),
    "social_engineering": (0.12, 0.68, 0.20),
}
_PERSONA_STYLE = {
    "cooperative": "cooperative",
    "vague": "vague",
    "impatient": "cooperative",
    "camouflaging": "camouflaged",
    "social_engineering": "cooperative",
}

# Share of confirmations that first state another intent's summary (a plausible confusion), so the simulator
# learns to say no and restate its need; a quarter keeps right confirmations the norm.
WRONG_CONFIRM_P = 0.25
# The agent's questions in speaking order, each with its draw weight when the turn budget cannot hold them all.
# verify weighs most: a simulator that does not give its identity when asked lets no agent pass
_ASK_WEIGHTS = {"clarify": 5.0, "verify": 20.0, "which": 4.0, "confirm": 4.0, "detail": 0.5}
_AGENT_LINES = {
    "clarify": "agent_clarify",
    "confirm": "agent_confirm",
    "reconfirm": "agent_reconfirm",
    "detail": "agent_detail",
}


def _plan(rng: random.Random, persona: str, target: str | None, asks: int) -> list[str]:
    """At most ``asks`` agent questions in speaking order. Social engineers are always asked to verify, and vague
    customers (who give specifics only when asked) which object they mean, or else what they need. A wrong
    confirmation ("misconfirm") is followed by the right one ("reconfirm"), so it takes two questions and displaces
    a drawn one when the budget is short."""
    weights = {
        k: v for k, v in _ASK_WEIGHTS.items() if (k != "clarify" or persona == "vague") and (k != "which" or target)
    }
    first = {"social_engineering": "verify", "vague": "which" if target else "clarify"}.get(persona)
    wrong = rng.random() < WRONG_CONFIRM_P
    picked: list[str] = []
    while len(picked) < asks and weights:
        kind = first if first in weights else rng.choices(list(weights), weights=list(weights.values()))[0]
        del weights[kind]
        picked.append(kind)
    spare = [k for k in picked if k not in ("confirm", first)]  # in draw order: the last drawn is the least wanted
    if wrong and "confirm" in picked and asks >= 2 and (len(picked) < asks or spare):
        if len(picked) == asks:
            picked.remove(spare[-1])
        picked[picked.index("confirm")] = "misconfirm"
    order = list(_ASK_WEIGHTS)
    plan: list[str] = []
    for kind in sorted(picked, key=lambda k: order.index("confirm" if k == "misconfirm" else k)):
        plan += ["misconfirm", "reconfirm"] if kind == "misconfirm" else [kind]
    return plan


@cache
def _confusable(intent: str) -> tuple[str, ...]:
    """Intents an agent might mistake ``intent`` for: those acting on the same kind of object or through the same
    tool (any other intent when there is none)."""
    tax, target = load_taxonomy(), INTENT_SPECS[intent].target
    others = [i for i in tax.intent_names if i != intent]
    near = [
        i for i in others if (target and INTENT_SPECS[i].target == target) or tax.tool_for(i) == tax.tool_for(intent)
    ]
    return tuple(near or others)


def _join(parts: list[str]) -> str:
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _options(w: Writer, spec: dict[str, Any]) -> dict[str, str]:
    """One value of each of a catalogue product's options (generator.products), in the lexicon's words for it."""
    words = w.lex["dialogue"]["option_words"]
    return {key: w.fill(words[key], {"value": str(w.rng.choice(values))}) for key, values in spec["options"].items()}


def _order_facts(w: Writer, pick: dict[str, str]) -> dict[str, str]:
    """An order: one to three catalogue items with their options, when it was placed (or delivered), and the first
    item as the opening's {product}/{plural}, on the same {day}."""
    rng, dlg, catalogue = w.rng, w.lex["dialogue"], DOMAIN.generator_data("products")
    names = rng.sample(sorted(catalogue), rng.choice((1, 1, 2, 2, 3)))
    items = [f"{dlg['products'][name]['item']} ({', '.join(_options(w, catalogue[name]).values())})" for name in names]
    day = w.fill("{day}")
    first = dlg["products"][names[0]]
    facts = {"product": first["product"], "plural": first["plural"], "items": _join(items), "day": day}
    return {**facts, "when": w.fill(pick["when"], {"day": day})}


def _product_facts(w: Writer, pick: dict[str, str]) -> dict[str, str]:
    """A catalogue product and the options wanted, those an opening names ({colour}, {size}: option_slots) pinned."""
    dlg, catalogue = w.lex["dialogue"], DOMAIN.generator_data("products")
    name = w.rng.choice(sorted(catalogue))
    wanted = _options(w, catalogue[name])
    pinned = {slot: wanted[key] for key, slot in dlg["option_slots"].items() if key in wanted}
    words = dlg["products"][name]
    return {"product": words["product"], "plural": words["plural"], "wanted": ", ".join(wanted.values()), **pinned}


def _user_facts(w: Writer, pick: dict[str, str]) -> dict[str, str]:
    """The customer's new address, from the domain's streets and cities (city, state, first digits of its zips)."""
    rng = w.rng
    city, state, zip3 = rng.choice(DOMAIN.generator_data("cities"))
    street = f"{rng.randint(1, 999)} {rng.choice(DOMAIN.generator_data('streets'))}"
    parts = (street, pick["unit"], city, f"{state} {zip3}{rng.randrange(100):02d}")
    return {"address": ", ".join(p for p in parts if p)}


# Object kinds whose facts come from the domain's catalogue and addresses (generator.products, streets, cities), with
# the lexicon's words for them (dialogue.products, option_words, option_slots): retail's. Banking's are below.
_CATALOGUE_FACTS = {"order": _order_facts, "product": _product_facts, "user": _user_facts}


def _object_facts(w: Writer, intent: str, target: str | None, customer: str) -> dict[str, str]:
    """Slot values naming the object the customer means, pinned for all their turns (the opening included) so the
    answer to "which one?" agrees with the story; empty for intents that act on no object."""
    if target is None:
        return {}
    rng, dlg, slots = w.rng, w.lex["dialogue"], w.lex["slots"]
    options = {**dlg["which_facts"][target], **dlg["which_facts_by_intent"].get(intent, {})}
    pick = {key: rng.choice(values) for key, values in options.items()}
    if target in _CATALOGUE_FACTS:
        return _CATALOGUE_FACTS[target](w, pick)
    if target == "card":  # the form world.described recognises: "<kind> card ending [in] <4 digits>"
        kind, last4 = pick["card_kind"], f"{rng.randrange(10000):04d}"
        return {"card": f"{kind} card ending {last4}", "card_in": f"{kind} card ending in {last4}"}
    if target in ("transfer", "beneficiary"):
        name = customer
        while name == customer:
            name = f"{rng.choice(slots['first_name'])} {rng.choice(slots['surname'])}"
        if target == "beneficiary":
            return {"beneficiary": name}
        return {"counterparty": name, "to_from": pick["to_from"], "amount": w.money(15, 600, cents_p=0.3)}
    if target == "top_up":
        how = rng.choice(dlg["top_up_how"][pick["method"]])
        return {"how": how, "amount": w.money(20, 500, cents_p=0.0, step=10)}
    slot = pick["payee_slot"]
    payee = w.fill("{" + slot + "}")
    amount = w.money(20, 300, cents_p=0.0, step=10) if slot == "atm" else w.money(4, 400, cents_p=0.4)
    same_shop = {"merchant": payee} if slot == "any_merchant" else {}  # an opening's {merchant} names it too
    return {slot: payee, "payee": payee, "amount": amount, **same_shop}


def _dialogue_ctx(w: Writer, intent: str) -> tuple[dict[str, str], str]:
    """One customer identity per dialogue (so every turn that mentions it agrees) and the identity field the
    agent asks for. The name is from the lexicon's slots, or else the domain's world generator's; a domain that
    identifies by zip code gets one of its cities' (generator.cities: city, state, first three digits)."""
    rng, dlg, slots = w.rng, w.lex["dialogue"], w.lex["slots"]
    first = rng.choice(slots.get("first_name") or DOMAIN.generator_data("first_names"))
    last = rng.choice(slots.get("surname") or DOMAIN.generator_data("last_names"))
    ctx = {
        "first_name": first,
        "surname": last,
        "last4": f"{rng.randrange(10000):04d}",
        "dob": f"{rng.randint(1, 28)}/{rng.randint(1, 12)}/{rng.randint(1950, 2006)}",
        "postcode": f"{rng.choice('ENSWLMB')}{rng.randint(1, 20)} {rng.randint(1, 9)}"
        + "".join(rng.choices("ABDEFGHJLNPQRSTUWXYZ", k=2)),
        "email": f"{first.lower()}.{last.lower().replace(chr(39), '')}{rng.randint(1, 99)}@example.com",
        "agent_name": rng.choice(dlg["agent_names"]),
        "summary": w.lex["intents"][intent]["summary"],
        "team": dlg["teams"][load_taxonomy().tool_for(intent)],
    }
    if "zip" in DOMAIN.identity.keys:
        ctx["zip"] = f"{rng.choice(DOMAIN.generator_data('cities'))[2]}{rng.randrange(100):02d}"
    id_field = rng.choice(list(dlg["agent_verify"]))
    ctx["id_detail"] = w.fill(rng.choice(dlg["id_detail"][id_field]), ctx)
    return ctx, id_field


def _dialogue(w: Writer, intent: str, persona: str, outcome: str, max_turns: int) -> list[dict[str, str]]:
    """One synthetic support dialogue's turns.

    Over 60 lines: turn by turn in the order it is spoken."""
    rng = w.rng
    dlg = w.lex["dialogue"]
    tool = load_taxonomy().tool_for(intent)
    ctx, id_field = _dialogue_ctx(w, intent)
    target = INTENT_SPECS[intent].target
    facts = _object_facts(w, intent, target, f"{ctx['first_name']} {ctx['surname']}")
    wrong_summary = w.lex["intents"][rng.choice(_confusable(intent))]["summary"]

    def say(key: str, extra: dict[str, str] | None = None, named: bool = True) -> str:
        complaint = w.fill(rng.choice(dlg["complaint"]))
        lines = [line for line in dlg[key] if named or "{first_name}" not in line]  # unnamed: before verify
        return w.fill(rng.choice(lines), {**ctx, **facts, "complaint": complaint, **(extra or {})})

    def customer(text: str) -> dict[str, str]:
        return {"role": "customer", "text": text}

    def chat(text: str, typos: bool = True, lower_p: float = 0.1) -> str:  # noise for lines not from utterance()
        return w.finish(text, lower_p=lower_p, bare_p=0.1, typos=typos, keep=facts.values())

    def agent(text: str) -> dict[str, str]:
        return {"role": "agent", "text": text}

    def restate() -> str:
        return w.utterance(intent, "cooperative", plain=True, ctx=facts)

    # Impatient and manipulative openings wrap the need in their own lead-ins, so skip the polite opener.
    plain = persona in ("impatient", "social_engineering")
    opening = w.utterance(intent, _PERSONA_STYLE[persona], plain=plain, ctx=facts)
    if persona == "impatient":
        opening = f"{say('impatient_prefix')} {opening} {say('impatient_suffix')}"
    elif persona == "social_engineering":
        opening = (
            f"{say('social_engineering_lead')} {opening}"
            if rng.random() < 0.5
            else f"{end_sentence(opening)} {say('social_engineering_ask')}"
        )
    turns = [{"role": "customer", "text": opening}]

    evasive = persona == "social_engineering" and outcome != "resolved"
    ident_key = (
        "customer_identity_evasive"
        if evasive
        else ("customer_identity_impatient" if persona == "impatient" else "customer_identity")
    )
    impatient = "_impatient" if persona == "impatient" else ""

    def agent_ask(kind: str, named: bool) -> str:
        if kind == "verify":
            return w.fill(rng.choice(dlg["agent_verify"][id_field]), ctx)
        if kind == "which":
            return w.fill(rng.choice(dlg["agent_which"][target]), ctx)
        if kind == "misconfirm":
            return say("agent_confirm", {"summary": wrong_summary}, named)
        return say(_AGENT_LINES[kind], named=named)

    def customer_answer(kind: str) -> str:
        if kind == "clarify":
            return restate()
        if kind == "verify":  # identity details stay typo-free so they can be checked against the account
            # and in their case where the domain reads names case-sensitively (the lexicon's identity_lower_p)
            return chat(say(ident_key), typos=False, lower_p=dlg.get("identity_lower_p", 0.1))
        if kind == "which":
            text = chat(w.fill(rng.choice(dlg["customer_which"][target]), {**ctx, **facts}))
            return f"{text} {say('impatient_suffix')}" if impatient and rng.random() < 0.3 else text
        if kind == "misconfirm":  # an untypo'd no first (the judge reads it), then what they need in plain words
            deny = w.finish(say(f"customer_deny{impatient}"), lower_p=0.1, bare_p=0.0, typos=False)
            again = restate()
            return f"{deny} {decap(again) if deny[-1] in ',—' else again}"
        if kind in ("confirm", "reconfirm"):
            return chat(say(f"customer_confirm{impatient}"), typos=False)
        return chat(say("customer_detail"))

    # Turn budget: opening + k answered questions + closing agent turn (+ the customer's exit when abandoned).
    abandoned = outcome == "abandoned"
    k_max = (max_turns - 1 - (2 if abandoned else 1)) // 2
    k = rng.randint(0 if abandoned else min(1, k_max), k_max)  # some leave straight away
    plan = _plan(rng, persona, None if evasive else target, k + abandoned)  # the abandoned leave one unanswered
    for i, kind in enumerate(plan[:k]):
        turns.append(agent(agent_ask(kind, not evasive and "verify" in plan[:i])))  # named once verified
        turns.append(customer(customer_answer(kind)))
    if abandoned:
        last = agent_ask(plan[k], not evasive and "verify" in plan[:k]) if k < len(plan) else say("agent_hold")
        turns.append(agent(last))
        leave = {"impatient": "customer_leave_impatient", "social_engineering": "customer_leave_evasive"}
        turns.append(customer(chat(say(leave.get(persona, "customer_leave")))))
    elif outcome == "escalated":
        turns.append(agent(say("agent_escalate_security" if evasive else "agent_escalate")))
    else:
        final = w.fill(rng.choice(dlg.get("resolve_by_intent", {}).get(intent) or dlg["resolve"][tool]))
        turns.append(agent(f"{final} {say('agent_close')}" if rng.random() < 0.6 else final))
    if rng.random() < 0.8:  # most agents greet before their first question
        turns[1]["text"] = f"{say('agent_greet')} {turns[1]['text']}"
    return turns


def generate_dialogues(n: int, seed: int, max_turns: int = 6) -> pl.DataFrame:
    """Return ``n`` synthetic support dialogues: ``id``, ``intent``, ``persona``, ``outcome``, ``turns``.

    Intents are balanced (each block of len(taxonomy) dialogues covers every intent once); the outcome is
    drawn from persona-dependent probabilities and shapes the ending (handoff when escalated, customer exit
    when abandoned). ``turns`` alternate customer/agent, start with the customer and never exceed
    ``max_turns``.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if max_turns < 3:
        raise ValueError("max_turns must be >= 3 (an abandoned dialogue needs customer, agent, customer)")
    rng = random.Random(seed)
    writer = Writer(rng, typo_rate=0.03)
    names = load_taxonomy().intent_names
    pool: list[str] = []
    rows: dict[str, list[Any]] = {"id": [], "intent": [], "persona": [], "outcome": [], "turns": []}
    for i in range(n):
        if not pool:
            pool = list(names)
            rng.shuffle(pool)
        intent = pool.pop()
        persona = rng.choice(PERSONAS)
        outcome = rng.choices(OUTCOMES, weights=OUTCOME_WEIGHTS[persona])[0]
        rows["id"].append(f"syn-dlg-{i:06d}")
        rows["intent"].append(intent)
        rows["persona"].append(persona)
        rows["outcome"].append(outcome)
        rows["turns"].append(_dialogue(writer, intent, persona, outcome, max_turns))
    schema = {c: pl.String for c in ("id", "intent", "persona", "outcome")} | {"turns": TURN_DTYPE}
    return pl.DataFrame(rows, schema=schema)
