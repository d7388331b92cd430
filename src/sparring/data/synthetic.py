"""Embedded, deterministic generator of the active domain's synthetic customer utterances (dialogues:
``dialogues.py``).

The phrase material (the domain's lexicon, e.g. ``sparring/domains/banking_lexicon.json``) is hand-written for every
intent in the taxonomy; this module combines it with slot values, openers, distractors, casing noise and typos so that a
model has to generalise rather than memorise templates. All randomness flows from one explicit
``random.Random(seed)``: no global state, and iteration order never depends on hash seeds.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

import polars as pl

from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import DOMAIN, lexicon

STYLES = ("cooperative", "vague", "multi_part", "camouflaged")
OUTCOMES = ("resolved", "escalated", "abandoned")

DEFAULT_STYLE_WEIGHTS: dict[str, float] = {
    "cooperative": 0.4,
    "vague": 0.2,
    "multi_part": 0.2,
    "camouflaged": 0.2,
}

TURN_DTYPE = pl.List(pl.Struct({"role": pl.String, "text": pl.String}))

_ALT = re.compile(r"\[([^\[\]]*)\]")
_SLOT = re.compile(r"\{(\w+)\}")
_TYPO_WORD = re.compile(r"[A-Za-z]{4,}")
_SENTENCE_START = re.compile(r"(^|[.!?]\s+)([a-z])")
_VAGUE_LEADS = ("hey ", "hi ", "hello, ", "um ", "so ", "ok so ", "erm ", "right so ", "quick one: ", "hmm ")
# The amounts made in code ({amount}, {small_amount}, {big_amount}): each currency symbol's weight and the words that
# may follow a bare number. These are banking's; a lexicon's "currencies" ({symbol: {weight, words}}) replaces them.
_CURRENCIES: dict[str, tuple[float, tuple[str, ...]]] = {
    "£": (6, ("pounds", "quid", "GBP")),
    "€": (3, ("euros", "EUR")),
    "$": (1, ("dollars", "USD")),
}


@cache
def _lexicon() -> dict[str, Any]:
    return lexicon()


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


def decap(text: str) -> str:
    """Lower-case the first letter so a phrase can continue a sentence; keep 'I' and slot-led phrases."""
    if not text or text.startswith(("I ", "I'", "{")) or text[:2].isupper():
        return text
    return text[0].lower() + text[1:]


def end_sentence(text: str) -> str:
    return text if text[-1:] in ".!?:,;" else text + "."


class Writer:
    """Renders templates with one RNG; slot values are pinned per utterance so repeats stay consistent."""

    def __init__(self, rng: random.Random, typo_rate: float, keep: float = 1.0) -> None:
        self.rng = rng
        self.typo_rate = typo_rate
        self.lex = _lexicon()
        self._pinned: dict[str, str] = {}
        own = self.lex.get("currencies")
        self.currencies = {s: (c["weight"], tuple(c["words"])) for s, c in own.items()} if own else _CURRENCIES
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
                value = self.money(4, 400, cents_p=0.4)
            elif name == "small_amount":
                value = self.money(0.3, 9.99, cents_p=0.85)
            elif name == "big_amount":
                value = self.money(1500, 25000, cents_p=0.0, step=50)
            else:
                value = _SLOT.sub(self._slot, self.rng.choice(self.lex["slots"][name]))
            self._pinned[name] = value
        return self._pinned[name]

    def money(self, lo: float, hi: float, cents_p: float, step: int = 1) -> str:
        symbol = self.rng.choices(tuple(self.currencies), weights=[w for w, _ in self.currencies.values()])[0]
        value = self.rng.uniform(lo, hi)
        if self.rng.random() < cents_p:
            number = f"{value:,.2f}"
        else:
            number = f"{max(step, round(value / step) * step):,}"
        if self.rng.random() < 0.75:
            return symbol + number
        return f"{number} {self.rng.choice(self.currencies[symbol][1])}"

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
            return self.finish(self.fill(end_sentence(core), ctx), keep=keep)
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
                parts = [self.pick("extra_leads"), end_sentence(core), self.pick("extras")]
            elif r < 0.85:
                parts = [end_sentence(core), self.pick("context"), self.pick("extras")]
            else:
                parts = [
                    self.pick("extras"),
                    rng.choice(("But mainly:", "More importantly,", "The main thing:")),
                    decap(core),
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
                body = f"{prefix} {decap(body)}"
            text = self.fill(end_sentence(body), ctx)
            if rng.random() < 0.4:  # filled on its own so the aside does not echo the story's slot values
                text += " " + self.fill(self.pick("camo_suffix"))
            return self.finish(text, keep=keep)
        raise ValueError(f"unknown style {style!r}; expected one of {STYLES}")

    def _with_opener(self, core: str, p: float) -> list[str]:
        if self.rng.random() >= p:
            return [end_sentence(core)]
        opener = self.pick("openers")
        if opener[-1] in ".!?:":
            return [opener, end_sentence(core)]
        if opener[-1] == ",":
            return [opener, end_sentence(decap(core))]
        sep = self.rng.choice((",", ",", "!", ".", " -"))
        return [opener + sep, end_sentence(decap(core)) if sep == "," else end_sentence(core)]


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
        raise KeyError(f"{DOMAIN.lexicon.name} has no phrases for intents {missing}")
    if not 0.0 < phrase_keep <= 1.0:
        raise ValueError("phrase_keep must be in (0, 1]")
    writer = Writer(random.Random(seed), typo_rate, phrase_keep)
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
