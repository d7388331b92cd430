"""The realism discriminator: how likely customer text is to come from a real customer, not a simulator.

Positives are real utterances; negatives are what a bad simulator writes, made from the real ones by
`corrupt` (shuffled words, the intent label said outright, loops, token salad, cut-off fragments, template
boilerplate), plus any simulator outputs the caller has. A simulator is ideal when the discriminator's AUC
between real and simulated text is 0.5.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score

from sparring.judge.oracle import (
    ENCODER_NAME,
    LinearHead,
    TfidfFeatures,
    embed,
    read_model_dir,
    write_model_dir,
)
from sparring.world.taxonomy import load_taxonomy

CORRUPTIONS = ("shuffle", "label", "loop", "salad", "truncate", "template")

_LABEL_TEMPLATES = (
    "I have a {label} issue",
    "my intent is {words}",
    "Intent: {label}",
    "{text} [{label}]",
    "I need help with {words}.",
    "{words}",
    "My problem is {label}, please help.",
    "{text} My intent is {words}.",
    "Category: {words}. {text}",
    "{label}",
)
_TEMPLATES = (
    "Hello, I am a customer of this bank. {text} Thank you for your assistance.",
    "Dear Support Team, {text} Kind regards, John Doe",
    "I am writing to inquire about the following matter: {text}",
    "Customer: {text}",
    "{text} {other}",
    "{text} Also, {other}",
    "As a valued customer, I would like to ask: {text} I look forward to your prompt response.",
    "User query: {text} Please respond.",
)
_WORD = re.compile(r"[A-Za-z0-9']+")


def _words(text: str) -> list[str]:
    return text.split()


def _label_words(intent: str) -> str:
    return intent.replace("_", " ").lower()


def _one(rng: random.Random, kind: str, text: str, pool: Sequence[str], vocab: Sequence[str]) -> str:
    words = _words(text)
    if kind == "shuffle":
        shuffled = words[:]
        for _ in range(5):  # a permutation that happens to be the identity would be a real text labelled fake
            rng.shuffle(shuffled)
            if shuffled != words:
                break
        return " ".join(shuffled)
    if kind == "label":
        intent = rng.choice(load_taxonomy().intent_names)
        tpl = rng.choice(_LABEL_TEMPLATES)
        return tpl.format(text=text, label=intent if rng.random() < 0.5 else intent.lower(), words=_label_words(intent))
    if kind == "loop":
        content = [w for w in words if len(w) > 3] or words
        mode = rng.random()
        if mode < 0.4:  # the whole turn again and again
            return " ".join([text] * rng.randint(2, 4))
        if mode < 0.8:  # a few words stuck on repeat: "card card card please please"
            picks = rng.sample(content, min(len(content), rng.randint(1, 3)))
            tail = ["please"] * rng.randint(0, 3)
            return " ".join([w for w in picks for _ in range(rng.randint(2, 5))] + tail)
        k = rng.randint(1, max(1, min(4, len(words))))  # a phrase echoed at the end
        return " ".join(words + words[-k:] * rng.randint(2, 4))
    if kind == "salad":
        return " ".join(rng.choices(vocab, k=max(3, len(words) + rng.randint(-2, 3))))
    if kind == "truncate":
        cut = max(3, int(len(text) * rng.uniform(0.2, 0.6)))  # often mid-word: generation stopped short
        return text[:cut].rstrip()
    if kind == "template":
        other = rng.choice(pool)
        other = other[:1].lower() + other[1:]
        return rng.choice(_TEMPLATES).format(text=text, other=other)
    raise ValueError(f"unknown corruption {kind!r}; known: {CORRUPTIONS}")


def corrupt(texts: Sequence[str], seed: int, kinds: Sequence[str] = CORRUPTIONS) -> tuple[list[str], list[str]]:
    """One simulated-looking text per real text, the kinds spread evenly; returns (texts, kinds)."""
    if not texts:
        return [], []
    rng = random.Random(seed)
    order = [kinds[i % len(kinds)] for i in range(len(texts))]
    rng.shuffle(order)
    counts = Counter(w for t in texts for w in _words(t))
    vocab = list(counts)
    out_texts: list[str] = []
    out_kinds: list[str] = []
    for text, kind in zip(texts, order, strict=True):
        if kind == "shuffle" and len(set(_words(text))) < 3:
            kind = "loop"  # too short to shuffle into anything different
        fake = _one(rng, kind, text, texts, vocab)
        if fake.strip() == text.strip():
            fake = _one(rng, "salad", text, texts, vocab)
        out_texts.append(fake)
        out_kinds.append(kind)
    return out_texts, out_kinds


@cache
def _any_label_pattern() -> re.Pattern[str]:
    names = sorted(load_taxonomy().intent_names, key=len, reverse=True)
    parts = [r"[\s_\-]+".join(map(re.escape, n.lower().split("_"))) for n in names]
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(parts) + r")(?![a-z0-9])")


STAT_NAMES = (
    "log_words",
    "log_chars",
    "type_token_ratio",
    "top_word_share",
    "adjacent_repeat_share",
    "repeated_bigram_share",
    "has_underscore_token",
    "ends_with_punct",
    "starts_upper",
    "alpha_token_share",
    "names_a_label",
    "names_label_with_underscores",
)


def style_stats(texts: Sequence[str]) -> np.ndarray:
    """Surface statistics that the n-gram features see poorly: loops, length, casing, labels in the text."""
    label = _any_label_pattern()
    rows = []
    for text in texts:
        low = [w.lower() for w in _WORD.findall(text)] or [""]
        n = len(low)
        counts = Counter(low)
        bigrams = list(zip(low, low[1:], strict=False))
        rows.append(
            [
                np.log1p(n),
                np.log1p(len(text)),
                len(counts) / n,
                max(counts.values()) / n,
                sum(a == b for a, b in bigrams) / max(1, len(bigrams)),
                (len(bigrams) - len(set(bigrams))) / max(1, len(bigrams)),
                float(bool(re.search(r"[A-Za-z]_[A-Za-z]", text))),
                float(text.rstrip()[-1:] in ".?!"),
                float(text.lstrip()[:1].isupper()),
                sum(w.isalpha() for w in low) / n,
                float(bool(label.search(text.lower()))),
                float(bool(re.search(r"[a-z]+(?:_[a-z]+)+", text.lower()))),
            ]
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(texts), len(STAT_NAMES))


@dataclass
class RealismConfig:
    """n-grams + style statistics at C=3; embeddings off by default (they add a little AUC for a fit ~17x
    slower, since every real and fake text is embedded): docs/results.md, "Figures moved out of the code"."""

    c: float = 3.0
    use_embeddings: bool = False
    emb_weight: float = 1.0
    stats_weight: float = 1.0


class RealismDiscriminator:
    """Logistic regression, real (1) vs simulated (0), over word + char n-grams and style statistics."""

    KIND = "sparring.realism_discriminator/1"

    def __init__(
        self,
        config: RealismConfig,
        words: TfidfFeatures,
        chars: TfidfFeatures,
        stats_mean: np.ndarray,
        stats_std: np.ndarray,
        head: LinearHead,
    ) -> None:
        self.config = config
        self.words = words
        self.chars = chars
        self.stats_mean = stats_mean
        self.stats_std = stats_std
        self.head = head

    def _features(self, texts: Sequence[str]) -> sp.csr_matrix:
        stats = (style_stats(texts) - self.stats_mean) / self.stats_std * self.config.stats_weight
        blocks = [self.words.transform(texts), self.chars.transform(texts), sp.csr_matrix(stats)]
        if self.config.use_embeddings:
            blocks.append(sp.csr_matrix(embed(texts) * self.config.emb_weight))
        return sp.hstack(blocks).tocsr()

    @classmethod
    def fit(
        cls,
        real_texts: Sequence[str],
        seed: int,
        negatives: Sequence[str] | None = None,
        config: RealismConfig | None = None,
    ) -> RealismDiscriminator:
        """Fit on real texts against their corruptions (seeded) and any extra simulated `negatives`."""
        config = config or RealismConfig()
        real = [t for t in real_texts if t and t.strip()]
        if len(real) < 2:
            raise ValueError("need at least two non-empty real texts")
        fakes, _ = corrupt(real, seed)
        fakes += [t for t in (negatives or []) if t and t.strip()]
        texts = real + fakes
        labels = np.r_[np.ones(len(real), dtype=int), np.zeros(len(fakes), dtype=int)]
        # Vocabularies from the real texts only: a fake's unseen word then weighs nothing either way, rather
        # than letting the model memorise the salad of this particular draw.
        words = TfidfFeatures.fit(real, "word", (1, 2), min_df=2)
        chars = TfidfFeatures.fit(real, "char_wb", (2, 4), min_df=2)
        raw = style_stats(texts)
        mean, std = raw.mean(axis=0), raw.std(axis=0) + 1e-6
        model = cls(config, words, chars, mean, std, LinearHead(np.zeros((0, 0)), np.zeros(0), np.zeros(0)))
        # Balanced: extra negatives must not teach the model that "most text is fake".
        model.head = LinearHead.fit(model._features(texts), labels, config.c, seed, balanced=True)
        return model

    def prob_real(self, texts: Sequence[str]) -> np.ndarray:
        """P(real customer) per text."""
        if len(texts) == 0:
            return np.zeros(0)
        proba = self.head.proba(self._features(texts))
        return proba[:, list(self.head.classes).index(1)]

    def prob_real_turns(self, customers: Sequence[Sequence[str]]) -> np.ndarray:
        """Mean P(real) over each customer's turns, scored one turn at a time as the model was trained on
        single utterances; a customer with no turns gets 0."""
        flat = [t for turns in customers for t in turns]
        probs = self.prob_real(flat) if flat else np.zeros(0)
        out, start = np.zeros(len(customers)), 0
        for i, turns in enumerate(customers):
            if turns:
                out[i] = probs[start : start + len(turns)].mean()
            start += len(turns)
        return out

    def auc(self, real_texts: Sequence[str], simulated_texts: Sequence[str]) -> float:
        """ROC AUC of telling real (positive) from simulated texts: 0.5 means indistinguishable."""
        if not real_texts or not simulated_texts:
            raise ValueError("auc needs both real and simulated texts")
        scores = self.prob_real(list(real_texts) + list(simulated_texts))
        labels = np.r_[np.ones(len(real_texts)), np.zeros(len(simulated_texts))]
        return float(roc_auc_score(labels, scores))

    def save(self, path: str | Path) -> None:
        """Save to a folder (config.json + arrays.npz), atomically."""
        wmeta, warr = self.words.state("words_")
        cmeta, carr = self.chars.state("chars_")
        meta: dict[str, Any] = {
            "kind": self.KIND,
            "encoder": ENCODER_NAME if self.config.use_embeddings else None,
            "config": asdict(self.config),
            "words": wmeta,
            "chars": cmeta,
            "stat_names": list(STAT_NAMES),
        }
        arrays = {
            **warr,
            **carr,
            "stats_mean": self.stats_mean,
            "stats_std": self.stats_std,
            "coef": self.head.coef,
            "intercept": self.head.intercept,
            "classes": np.asarray(self.head.classes, dtype=np.int64),
        }
        write_model_dir(Path(path), meta, arrays)

    @classmethod
    def load(cls, path: str | Path) -> RealismDiscriminator:
        """Load what `save` wrote."""
        meta, arrays = read_model_dir(Path(path), cls.KIND)
        if meta["stat_names"] != list(STAT_NAMES):
            raise ValueError(f"{path}: saved with style statistics {meta['stat_names']}, code has {STAT_NAMES}")
        return cls(
            RealismConfig(**meta["config"]),
            TfidfFeatures.from_state(meta["words"], arrays, "words_"),
            TfidfFeatures.from_state(meta["chars"], arrays, "chars_"),
            arrays["stats_mean"],
            arrays["stats_std"],
            LinearHead(arrays["coef"], arrays["intercept"], arrays["classes"]),
        )
