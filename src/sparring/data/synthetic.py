# Over 400 lines: one generator of utterances and dialogues over one lexicon.
"""Embedded, deterministic generator of synthetic banking-support customer utterances and dialogues.

The phrase material (``synthetic_lexicon.json`` beside this file) is hand-written for every intent in the
taxonomy; this module combines it with slot values, openers, distractors, casing noise and typos so that a
model has to generalise rather than memorise templates. All randomness flows from one explicit
``random.Random(seed)``: no global state, and iteration order never depends on hash seeds.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import INTENT_SPECS

STYLES = ("cooperative", "vague", "multi_part", "camouflaged")
PERSONAS = ("cooperative", "vague", "impatient", "camouflaging", "social_engineering")
OUTCOMES = ("resolved", "escalated", "abandoned")

DEFAULT_STYLE_WEIGHTS: dict[str, float] = {
    "cooperative": 0.4,
    "vague": 0.2,
    "multi_part": 0.2,
    "camouflaged": 0.2,
}

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

TURN_DTYPE = pl.List(pl.Struct({"role": pl.String, "text": pl.String}))

_ALT = re.compile(r"\[([^\[\]]*)\]")
_SLOT = re.compile(r"\{(\w+)\}")
_TYPO_WORD = re.compile(r"[A-Za-z]{4,}")
_SENTENCE_START = re.compile(r"(^|[.!?]\s+)([a-z])")
_VAGUE_LEADS = ("hey ", "hi ", "hello, ", "um ", "so ", "ok so ", "erm ", "right so ", "quick one: ", "hmm ")
_CURRENCY_WORDS = {"£": ("pounds", "quid", "GBP"), "€": ("euros", "EUR"), "$": ("dollars", "USD")}


@cache
def _lexicon() -> dict[str, Any]:
    raw = resources.files("sparring.data").joinpath("synthetic_lexicon.json").read_text("utf-8")
    return json.loads(raw)


_SHARED_POOLS = (
    "openers",
    "closers",
    "context",
    "extras",
    "extra_leads",
    "camo_prefix",
    "camo_connect",
    "camo_suffix",
    "vague_tails",
)


def _subset(rng: random.Random, items: list[str], keep: float) -> list[str]:
    k = min(len(items), max(2, round(keep * len(items))))
    return rng.sample(items, k)


def _decap(text: str) -> str:
    """Lower-case the first letter so a phrase can continue a sentence; keep 'I' and slot-led phrases."""
    if not text or text.startswith(("I ", "I'", "{")) or text[:2].isupper():
        return text
    return text[0].lower() + text[1:]


def _end(text: str) -> str:
    return text if text[-1:] in ".!?:,;" else text + "."


class _Writer:
    """Renders templates with one RNG; slot values are pinned per utterance so repeats stay consistent."""

    def __init__(self, rng: random.Random, typo_rate: float, keep: float = 1.0) -> None:
        self.rng = rng
        self.typo_rate = typo_rate
        self.lex = _lexicon()
        self._pinned: dict[str, str] = {}
        # Each seed sees its own subset of the hand-written phrasings (like a different population of
        # customers), so a model trained on one seed is tested on wording it has never seen.
        pool_rng = random.Random(rng.getrandbits(64))
        self.pools = {key: _subset(pool_rng, self.lex[key], keep) for key in _SHARED_POOLS}
        self.intent_pools = {
            intent: {key: _subset(pool_rng, spec[key], keep) for key in ("core", "vague", "camo")}
            for intent, spec in self.lex["intents"].items()
        }

    def pick(self, key: str) -> str:
        return self.alt(self.rng.choice(self.pools[key]))

    def alt(self, template: str) -> str:
        return _ALT.sub(lambda m: self.rng.choice(m.group(1).split("|")), template)

    def fill(self, template: str, ctx: dict[str, str] | None = None) -> str:
        self._pinned = dict(ctx or {})
        return _SLOT.sub(self._slot, self.alt(template))

    def _slot(self, m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in self._pinned:
            if name == "amount":
                value = self._money(4, 400, cents_p=0.4)
            elif name == "small_amount":
                value = self._money(0.3, 9.99, cents_p=0.85)
            elif name == "big_amount":
                value = self._money(1500, 25000, cents_p=0.0, step=50)
            else:
                value = _SLOT.sub(self._slot, self.rng.choice(self.lex["slots"][name]))
            self._pinned[name] = value
        return self._pinned[name]

    def _money(self, lo: float, hi: float, cents_p: float, step: int = 1) -> str:
        symbol = self.rng.choices(("£", "€", "$"), weights=(6, 3, 1))[0]
        value = self.rng.uniform(lo, hi)
        if self.rng.random() < cents_p:
            number = f"{value:,.2f}"
        else:
            number = f"{max(step, round(value / step) * step):,}"
        if self.rng.random() < 0.75:
            return symbol + number
        return f"{number} {self.rng.choice(_CURRENCY_WORDS[symbol])}"

    # -- surface noise ----------------------------------------------------------------------------------
    def finish(
        self, text: str, lower_p: float = 0.12, bare_p: float = 0.15, typos: bool = True, keep: Iterable[str] = ()
    ) -> str:
        """Normalise spacing, capitalise sentences, then add chat-like casing, punctuation and typos (none inside
        the ``keep`` phrases: facts a customer reads off their app, which the world must recognise)."""
        text = re.sub(r"\s+", " ", text).strip()
        text = _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), text)
        r = self.rng.random()
        if r < lower_p:
            text = text.lower()
        elif r < lower_p + bare_p and text[-1:] in ".?":
            text = text[:-1]
        elif r > 0.95 and text[-1:] == "?":
            text += "?"
        if typos and self.typo_rate > 0:
            facts = sorted({k for k in keep if k}, key=len, reverse=True)
            if not facts:
                return _TYPO_WORD.sub(self._typo, text)
            pattern = rf"((?<!\w)(?:{'|'.join(map(re.escape, facts))})(?!\w))"
            pieces = re.split(pattern, text, flags=re.IGNORECASE)
            text = "".join(p if i % 2 else _TYPO_WORD.sub(self._typo, p) for i, p in enumerate(pieces))
        return text

    def _typo(self, m: re.Match[str]) -> str:
        word = m.group(0)
        if self.rng.random() >= self.typo_rate:
            return word
        i = self.rng.randrange(1, len(word) - 1)
        op = self.rng.randrange(3)
        if op == 0:  # swap two neighbouring letters
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        if op == 1:  # drop a letter
            return word[:i] + word[i + 1 :]
        return word[:i] + word[i] + word[i:]  # double a letter

    # -- styles -----------------------------------------------------------------------------------------
    def utterance(self, intent: str, style: str, plain: bool = False, ctx: dict[str, str] | None = None) -> str:
        """One customer message; ``plain`` drops openers and closers (for dialogues that add their own), ``ctx``
        pins slot values (a dialogue's object facts, kept free of typos)."""
        spec = self.intent_pools[intent]
        keep = tuple((ctx or {}).values())
        rng = self.rng
        core = self.alt(rng.choice(spec["core"]))
        parts: list[str] = []
        if style == "cooperative" and plain:
            return self.finish(self.fill(_end(core), ctx), keep=keep)
        if style == "cooperative":
            parts = self._with_opener(core, 0.55)
            if rng.random() < 0.15:
                parts.insert(rng.choice((len(parts) - 1, len(parts))), self.pick("context"))  # after opener
            if rng.random() < 0.35:
                closer = self.pick("closers")
                parts.append(closer if closer[-1] in ".!?" else closer + rng.choice(("", "", ".", "!", " :)")))
            return self.finish(self.fill(" ".join(parts), ctx), keep=keep)
        if style == "vague":
            line = self.alt(rng.choice(spec["vague"]))
            if rng.random() < 0.35:
                line = rng.choice(_VAGUE_LEADS) + line
            if rng.random() < 0.5:
                sep = " " if line[-1] in "?!." else rng.choice((" ", ", ", "... ", ". "))
                line += sep + self.pick("vague_tails")
            return self.finish(self.fill(line, ctx), lower_p=0.5, bare_p=0.0, keep=keep)
        if style == "multi_part":
            r = rng.random()
            if r < 0.45:
                parts = [*self._with_opener(core, 0.35), self.pick("extras")]
            elif r < 0.7:
                parts = [self.pick("extra_leads"), _end(core), self.pick("extras")]
            elif r < 0.85:
                parts = [_end(core), self.pick("context"), self.pick("extras")]
            else:
                parts = [
                    self.pick("extras"),
                    rng.choice(("But mainly:", "More importantly,", "The main thing:")),
                    _decap(core),
                ]
            return self.finish(self.fill(" ".join(parts), ctx), keep=keep)
        if style == "camouflaged":
            camo = self.alt(rng.choice(spec["camo"]))
            r = rng.random()
            body = camo
            if r >= 0.4:  # bury the core phrasing (or the camo story) after an irrelevant life-story prefix
                body = core if r < 0.75 else camo
                prefix = self.pick("camo_prefix")
                prefix = self.fill(prefix) if ctx else prefix  # the story's own values, not the pinned facts
                if body.endswith("?") and prefix.endswith((" and", ",")):  # "..., and how do I?" reads badly
                    prefix = prefix.removesuffix(" and").rstrip(",") + "."
                if not (prefix[-1] in ",:" or prefix.endswith(" and")):
                    prefix = f"{prefix} {self.pick('camo_connect')}"
                body = f"{prefix} {_decap(body)}"
            text = self.fill(_end(body), ctx)
            if rng.random() < 0.4:  # filled on its own so the aside does not echo the story's slot values
                text += " " + self.fill(self.pick("camo_suffix"))
            return self.finish(text, keep=keep)
        raise ValueError(f"unknown style {style!r}; expected one of {STYLES}")

    def _with_opener(self, core: str, p: float) -> list[str]:
        if self.rng.random() >= p:
            return [_end(core)]
        opener = self.pick("openers")
        if opener[-1] in ".!?:":
            return [opener, _end(core)]
        if opener[-1] == ",":
            return [opener, _end(_decap(core))]
        sep = self.rng.choice((",", ",", "!", ".", " -"))
        return [opener + sep, _end(_decap(core)) if sep == "," else _end(core)]


def _style_weights(style_weights: dict[str, float] | None) -> list[float]:
    weights = dict(DEFAULT_STYLE_WEIGHTS if style_weights is None else style_weights)
    unknown = sorted(set(weights) - set(STYLES))
    if unknown:
        raise ValueError(f"unknown styles {unknown}; expected a subset of {STYLES}")
    out = [float(weights.get(s, 0.0)) for s in STYLES]  # iterate STYLES, not the dict: order-independent
    if min(out) < 0 or sum(out) <= 0:
        raise ValueError("style weights must be non-negative and not all zero")
    return out


def generate_utterances(
    n_per_intent: int,
    seed: int,
    style_weights: dict[str, float] | None = None,
    typo_rate: float = 0.05,
    phrase_keep: float = 0.8,
) -> pl.DataFrame:
    """Return exactly ``n_per_intent`` utterances per intent, with columns ``text``, ``intent``, ``style``.

    Rows are grouped by intent in taxonomy order; duplicates are possible and left to the caller to drop.
    """
    if n_per_intent < 0:
        raise ValueError("n_per_intent must be >= 0")
    if not 0.0 <= typo_rate <= 1.0:
        raise ValueError("typo_rate must be in [0, 1]")
    weights = _style_weights(style_weights)
    names = load_taxonomy().intent_names
    missing = [i for i in names if i not in _lexicon()["intents"]]
    if missing:
        raise KeyError(f"synthetic_lexicon.json has no phrases for intents {missing}")
    if not 0.0 < phrase_keep <= 1.0:
        raise ValueError("phrase_keep must be in (0, 1]")
    writer = _Writer(random.Random(seed), typo_rate, phrase_keep)
    texts: list[str] = []
    intents: list[str] = []
    styles: list[str] = []
    for intent in names:
        for style in writer.rng.choices(STYLES, weights=weights, k=n_per_intent):
            texts.append(writer.utterance(intent, style))
            intents.append(intent)
            styles.append(style)
    return pl.DataFrame(
        {"text": texts, "intent": intents, "style": styles},
        schema={"text": pl.String, "intent": pl.String, "style": pl.String},
    )


def utterance_frame(per_intent: int, seed: int) -> pl.DataFrame:
    """``generate_utterances`` with the columns scenarios are sampled from (id, text, intent, tool, style,
    source): a small utterance set for tests and benchmarks, without running ingestion."""
    tools = {name: spec.tool for name, spec in load_taxonomy().intents.items()}
    frame = generate_utterances(per_intent, seed)
    return frame.with_columns(
        id=pl.format("syn-{}-{}", pl.lit(seed), pl.int_range(pl.len())),
        tool=pl.col("intent").replace_strict(tools),
        source=pl.lit("synthetic"),
    ).select("id", "text", "intent", "tool", "style", "source")


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


def _object_facts(w: _Writer, intent: str, target: str | None, customer: str) -> dict[str, str]:
    """Slot values naming the object the customer means, pinned for all their turns (the opening included) so the
    answer to "which one?" agrees with the story; empty for intents that act on no object."""
    if target is None:
        return {}
    rng, dlg, slots = w.rng, w.lex["dialogue"], w.lex["slots"]
    options = {**dlg["which_facts"][target], **dlg["which_facts_by_intent"].get(intent, {})}
    pick = {key: rng.choice(values) for key, values in options.items()}
    if target == "card":  # the form world.described recognises: "<kind> card ending [in] <4 digits>"
        kind, last4 = pick["card_kind"], f"{rng.randrange(10000):04d}"
        return {"card": f"{kind} card ending {last4}", "card_in": f"{kind} card ending in {last4}"}
    if target in ("transfer", "beneficiary"):
        name = customer
        while name == customer:
            name = f"{rng.choice(slots['first_name'])} {rng.choice(slots['surname'])}"
        if target == "beneficiary":
            return {"beneficiary": name}
        return {"counterparty": name, "to_from": pick["to_from"], "amount": w._money(15, 600, cents_p=0.3)}
    if target == "top_up":
        how = rng.choice(dlg["top_up_how"][pick["method"]])
        return {"how": how, "amount": w._money(20, 500, cents_p=0.0, step=10)}
    slot = pick["payee_slot"]
    payee = w.fill("{" + slot + "}")
    amount = w._money(20, 300, cents_p=0.0, step=10) if slot == "atm" else w._money(4, 400, cents_p=0.4)
    same_shop = {"merchant": payee} if slot == "any_merchant" else {}  # an opening's {merchant} names it too
    return {slot: payee, "payee": payee, "amount": amount, **same_shop}


def _dialogue_ctx(w: _Writer, intent: str) -> tuple[dict[str, str], str]:
    """One customer identity per dialogue (so every turn that mentions it agrees) and the identity field the
    agent asks for."""
    rng, dlg = w.rng, w.lex["dialogue"]
    first, last = rng.choice(w.lex["slots"]["first_name"]), rng.choice(w.lex["slots"]["surname"])
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
    id_field = rng.choice(list(dlg["agent_verify"]))
    ctx["id_detail"] = w.fill(rng.choice(dlg["id_detail"][id_field]), ctx)
    return ctx, id_field


# Over 60 lines: one synthetic support dialogue, turn by turn in the order it is spoken.
def _dialogue(w: _Writer, intent: str, persona: str, outcome: str, max_turns: int) -> list[dict[str, str]]:
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

    def chat(text: str, typos: bool = True) -> str:  # customer-side noise for lines not from utterance()
        return w.finish(text, lower_p=0.1, bare_p=0.1, typos=typos, keep=facts.values())

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
            else f"{_end(opening)} {say('social_engineering_ask')}"
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
            return chat(say(ident_key), typos=False)
        if kind == "which":
            text = chat(w.fill(rng.choice(dlg["customer_which"][target]), {**ctx, **facts}))
            return f"{text} {say('impatient_suffix')}" if impatient and rng.random() < 0.3 else text
        if kind == "misconfirm":  # an untypo'd no first (the judge reads it), then what they need in plain words
            deny = w.finish(say(f"customer_deny{impatient}"), lower_p=0.1, bare_p=0.0, typos=False)
            again = restate()
            return f"{deny} {_decap(again) if deny[-1] in ',—' else again}"
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
        final = w.fill(rng.choice(dlg["resolve"][tool]))
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
    writer = _Writer(rng, typo_rate=0.03)
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
