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
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from sparring.world.taxonomy import load_taxonomy

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
    def finish(self, text: str, lower_p: float = 0.12, bare_p: float = 0.15, typos: bool = True) -> str:
        """Normalise spacing, capitalise sentences, then add chat-like casing, punctuation and typos."""
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
            text = _TYPO_WORD.sub(self._typo, text)
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
    def utterance(self, intent: str, style: str, plain: bool = False) -> str:
        """One customer message; ``plain`` drops openers and closers (for dialogues that add their own)."""
        spec = self.intent_pools[intent]
        rng = self.rng
        core = self.alt(rng.choice(spec["core"]))
        parts: list[str] = []
        if style == "cooperative" and plain:
            return self.finish(self.fill(_end(core)))
        if style == "cooperative":
            parts = self._with_opener(core, 0.55)
            if rng.random() < 0.15:
                parts.insert(rng.choice((len(parts) - 1, len(parts))), self.pick("context"))  # after opener
            if rng.random() < 0.35:
                closer = self.pick("closers")
                parts.append(closer if closer[-1] in ".!?" else closer + rng.choice(("", "", ".", "!", " :)")))
            return self.finish(self.fill(" ".join(parts)))
        if style == "vague":
            line = self.alt(rng.choice(spec["vague"]))
            if rng.random() < 0.35:
                line = rng.choice(_VAGUE_LEADS) + line
            if rng.random() < 0.5:
                sep = " " if line[-1] in "?!." else rng.choice((" ", ", ", "... ", ". "))
                line += sep + self.pick("vague_tails")
            return self.finish(self.fill(line), lower_p=0.5, bare_p=0.0)
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
            return self.finish(self.fill(" ".join(parts)))
        if style == "camouflaged":
            camo = self.alt(rng.choice(spec["camo"]))
            r = rng.random()
            body = camo
            if r >= 0.4:  # bury the core phrasing (or the camo story) after an irrelevant life-story prefix
                body = core if r < 0.75 else camo
                prefix = self.pick("camo_prefix")
                if body.endswith("?") and prefix.endswith((" and", ",")):  # "..., and how do I?" reads badly
                    prefix = prefix.removesuffix(" and").rstrip(",") + "."
                if not (prefix[-1] in ",:" or prefix.endswith(" and")):
                    prefix = f"{prefix} {self.pick('camo_connect')}"
                body = f"{prefix} {_decap(body)}"
            text = self.fill(_end(body))
            if rng.random() < 0.4:  # filled on its own so the aside does not echo the story's slot values
                text += " " + self.fill(self.pick("camo_suffix"))
            return self.finish(text)
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


# Over 60 lines: one synthetic support dialogue, turn by turn in the order it is spoken.
def _dialogue(w: _Writer, intent: str, persona: str, outcome: str, max_turns: int) -> list[dict[str, str]]:
    rng = w.rng
    dlg = w.lex["dialogue"]
    tool = load_taxonomy().tool_for(intent)
    # One customer identity per dialogue, so every turn that mentions it agrees.
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
        "team": dlg["teams"][tool],
    }
    id_field = rng.choice(list(dlg["agent_verify"]))
    ctx["id_detail"] = w.fill(rng.choice(dlg["id_detail"][id_field]), ctx)

    def say(key: str) -> str:
        return w.fill(rng.choice(dlg[key]), {**ctx, "complaint": w.fill(rng.choice(dlg["complaint"]))})

    def customer(text: str) -> dict[str, str]:
        return {"role": "customer", "text": text}

    def chat(text: str, typos: bool = True) -> str:  # customer-side noise for lines not from utterance()
        return w.finish(text, lower_p=0.1, bare_p=0.1, typos=typos)

    def agent(text: str) -> dict[str, str]:
        return {"role": "agent", "text": text}

    # Impatient and manipulative openings wrap the need in their own lead-ins, so skip the polite opener.
    opening = w.utterance(intent, _PERSONA_STYLE[persona], plain=persona in ("impatient", "social_engineering"))
    if persona == "impatient":
        opening = f"{say('impatient_prefix')} {opening} {say('impatient_suffix')}"
    elif persona == "social_engineering":
        opening = (
            f"{say('social_engineering_lead')} {opening}"
            if rng.random() < 0.5
            else f"{_end(opening)} {say('social_engineering_ask')}"
        )
    turns = [{"role": "customer", "text": opening}]

    exchanges = (["clarify"] if persona == "vague" else []) + ["verify", "confirm", "detail"]
    evasive = persona == "social_engineering" and outcome != "resolved"
    ident_key = (
        "customer_identity_evasive"
        if evasive
        else ("customer_identity_impatient" if persona == "impatient" else "customer_identity")
    )
    confirm_key = "customer_confirm_impatient" if persona == "impatient" else "customer_confirm"
    agent_lines = {
        "clarify": "agent_clarify",
        "verify": "agent_verify",
        "confirm": "agent_confirm",
        "detail": "agent_detail",
    }

    def agent_ask(kind: str) -> str:
        if kind == "verify":
            return w.fill(rng.choice(dlg["agent_verify"][id_field]), ctx)
        return say(agent_lines[kind])

    def customer_answer(kind: str) -> str:
        if kind == "clarify":
            return w.utterance(intent, "cooperative", plain=True)
        if kind == "verify":  # identity details stay typo-free so they can be checked against the account
            return chat(say(ident_key), typos=False)
        if kind == "confirm":
            return chat(say(confirm_key))
        return chat(say("customer_detail"))

    # Turn budget: opening + k exchanges + closing agent turn (+ the customer's exit when abandoned).
    closing = 2 if outcome == "abandoned" else 1
    k_max = min(len(exchanges), (max_turns - 1 - closing) // 2)
    k = rng.randint(0 if outcome == "abandoned" else min(1, k_max), k_max)  # some leave straight away
    for kind in exchanges[:k]:
        turns.append(agent(agent_ask(kind)))
        turns.append(customer(customer_answer(kind)))
    if outcome == "abandoned":
        turns.append(agent(agent_ask(exchanges[k]) if k < len(exchanges) else say("agent_hold")))
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
