"""Strategy discovery: find and name the tricks adversarial customers use, from their messages alone.

RL-ADA (arXiv 2609.02902, ../shared/SEEDS.md) named its adversary's "Contextual Camouflage" (the intent buried
in dense, realistic, irrelevant detail: merchant, amount, time of day) by reading transcripts; this module finds
such strategies itself:

1. embed every adversary message with the judge's packaged MiniLM encoder (``sparring.judge.oracle.embed``);
2. cluster them, beside the z-scored style traits of step 3 (MiniLM alone groups by topic), with seeded k-means,
   k in 2..``max_clusters`` chosen by silhouette; fewer than three messages, or no k that splits them, is one;
3. describe each cluster by its distinctive word 1-2 grams (mean TF-IDF inside the cluster minus outside) and
   measured traits, each a mean over its messages: length in words, share of content words outside the goal
   intent's vocabulary, and the share that name one of the intent's keywords, ask a question, hedge, carry a
   number, carry a proper name (``detail_rate``: a number or a name);
4. name it by the first rule of :func:`name_for` its traits meet (thresholds are the constants below), else
   ``"Cluster: <top n-grams>"``. Clusters that meet the same rule are merged into one strategy: every rule bounds
   means, so their union meets it too. Fallback names that collide get " (2)", " (3)", ...;
5. report each strategy's share of every generation's messages and its success rate: the share of its messages
   from episodes the adversary won.

An intent's keywords are the stems of its label's words, less stop words and words many labels share ("card",
"transfer"); its vocabulary adds the taxonomy's description and the synthetic lexicon's plain and vague phrasings
of it. Stems are the first five letters: crude, but "arrived" meets "arrival" and "charged" meets "charge".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import normalize
from threadpoolctl import threadpool_limits

from sparring.judge.oracle import blas_threads, embed
from sparring.metrics import routed_correctly
from sparring.world.taxonomy import load_taxonomy
from sparring.world.vocab import DOMAIN, lexicon

if TYPE_CHECKING:
    from sparring.rollout import Episode

Embedder = Callable[[list[str]], np.ndarray]

CAMOUFLAGE, BURIED, VAGUE = "Contextual Camouflage", "Buried Request", "Vague Hedging"
DEFLECTION, DIRECT = "Question Deflection", "Direct Request"
# "Long" is relative to the median message, clamped: the lexicon's plain requests run ~9 words, so a floor of 8
# keeps a corpus of short replies from calling 6 words long, and the cap keeps an all-camouflage corpus
# (whose median is itself long) from hiding its own camouflage.
REFERENCE_WORDS = (8.0, 12.0)
CAMO_LENGTH_RATIO = 1.75  # camouflage: mean length >= 1.75 x the clamped median (14 to 21 words)
CAMO_MIN_DETAIL = 0.5  # ... at least half its messages carry a number or a name
CAMO_MIN_UNRELATED = 0.5  # ... at least half its content words lie outside the intent's vocabulary
KEYWORDS_ABSENT = 0.5  # keywords "mostly absent": at most half the messages name one (camouflage, vague, deflection)
SHORT_WORDS = 15.0  # vague hedging and direct requests: mean length <= 15 words
HEDGE_MIN = 0.4  # vague hedging: at least 40% hedge
QUESTION_MIN = 0.6  # question deflection: at least 60% are questions
DIRECT_MIN_KEYWORD = 0.6  # direct request: short, at least 60% name a keyword, fewer than 40% hedge
GENERIC_LABEL_WORD = 8  # a label stem shared by this many intents' labels names none of them
STEM = 5
N_NGRAMS, N_EXAMPLES = 5, 3
# MiniLM alone clusters by topic, not by strategy; the style traits beside it split camouflage from plain
# requests (docs/results.md, "Figures moved out of the code").
TRAIT_WEIGHT = 0.4
CLUSTER_TRAITS = ("unrelated", "keyword", "question", "hedge", "detail")  # with log(1 + words)
SILHOUETTE_SAMPLE = 2000  # silhouette is quadratic in the messages; a seeded sample above this

HEDGES = re.compile(
    r"\b(maybe|perhaps|probably|possibly|might|somehow|apparently|dunno|i think|i guess|i suppose|i believe|"
    r"not sure|no idea|don't know|kind of|sort of|could be|something like)\b"
)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z']*|\d[\d.,:]*|[.!?]")
_WORD = re.compile(r"[a-z]{2,}")  # "don't" leaves no "t"
_SLOT = re.compile(r"\{[a-z_0-9]+\}|\[[a-z_0-9]+\]")  # lexicon slots, masked identity facts
_FIRST_PERSON = frozenset({"I", "I'm", "I've", "I'll", "I'd"})
_NGRAM_STOP = sorted(ENGLISH_STOP_WORDS | {"ve", "ll", "re", "don", "didn", "doesn", "isn", "hasn", "haven"})
TRAITS = ("words", "unrelated", "keyword", "question", "hedge", "number", "name", "detail")


@dataclass(frozen=True)
class MessageRecord:
    """One adversary message: its text, the hidden goal intent, the generation that wrote it, and whether the
    adversary won the episode it came from."""

    text: str
    intent: str
    generation: int
    won: bool


def strategy_records(episodes: Sequence[Episode], generation: int, *, opening_only: bool = True) -> list[MessageRecord]:
    """The customer's messages (role ``user`` in the agent's view) of ``episodes``, tagged with ``generation``: its
    opening, or with ``opening_only=False`` every non-empty one; won is the judge's ``adv_won``, or a misroute
    where the episode was never judged.

    Openings by default: over all turns the clusters are turn kinds, not strategies (on 120 held-out scenarios,
    the identity replies, whose problem details carry amounts and dates, were named Contextual Camouflage and
    three clusters were goodbyes). The customer's identity facts are masked to their placeholders
    ("[customer_id]"): a verification reply's names and numbers are not detail the customer chose."""
    out: list[MessageRecord] = []
    for ep in episodes:
        won, facts = _adversary_won(ep), sorted(ep.scenario.identity.items(), key=lambda kv: -len(str(kv[1])))
        texts = [t for m in ep.messages if m.get("role") == "user" and (t := str(m.get("content") or "").strip())]
        for text in texts[:1] if opening_only else texts:
            for key, value in facts:
                text = re.sub(re.escape(str(value)), f"[{key}]", text, flags=re.IGNORECASE) if str(value) else text
            out.append(MessageRecord(text, ep.scenario.intent, generation, won))
    return out


def _adversary_won(ep: Episode) -> bool:
    if isinstance(ep.rewards, Mapping) and "adv_won" in ep.rewards:
        return bool(ep.rewards["adv_won"])
    return not routed_correctly(ep)


def _stems(text: str) -> list[str]:
    low = _SLOT.sub(" ", text.lower().replace("\u2019", "'"))
    return [w[:STEM] for w in _WORD.findall(low) if w not in ENGLISH_STOP_WORDS]


@cache
def _lexicon() -> dict[str, Any]:
    return lexicon()


@cache
def _label_stem_counts() -> Counter[str]:
    return Counter(s for name in load_taxonomy().intent_names for s in set(_stems(name.replace("_", " "))))


@cache
def intent_keywords(intent: str) -> frozenset[str]:
    """Stems of the intent label's distinctive words: ``lost_or_stolen_card`` -> {lost, stole}."""
    stems = _stems(intent.replace("_", " "))
    distinctive = [s for s in stems if _label_stem_counts()[s] < GENERIC_LABEL_WORD]
    return frozenset(distinctive or stems)


@cache
def intent_vocabulary(intent: str) -> frozenset[str]:
    """Stems a customer with this goal plainly uses: label, description, the lexicon's plain and vague phrasings."""
    spec, lex = load_taxonomy().intents.get(intent), _lexicon()["intents"].get(intent, {})
    texts = [intent.replace("_", " "), spec.description if spec else "", lex.get("summary", "")]
    texts += [*lex.get("core", []), *lex.get("vague", [])]
    return frozenset(s for t in texts for s in _stems(t))


@cache
def _known_names() -> frozenset[str]:
    lists = [
        *(
            [n[0] if isinstance(n, list) else n for n in DOMAIN.generator_data(k)]
            for k in ("first_names", "last_names", "cities")
        ),
        *(_lexicon().get("slots", {}).get(k, []) for k in ("first_name", "surname", "city")),
    ]  # a city may be [city, state, ...]: its name
    return frozenset(w for names in lists for name in names for w in name.split())


def _has_name(tokens: Sequence[str]) -> bool:
    """A capitalised word that does not open a sentence (acronyms and "I" aside), or a known name anywhere."""
    initial = True
    for t in tokens:
        if t in ".!?":
            initial = True
            continue
        if t[0].isupper() and not t.isupper() and t not in _FIRST_PERSON and (not initial or t in _known_names()):
            return True
        initial = False
    return False


def message_traits(text: str, intent: str) -> dict[str, float]:
    """One message's measured traits (``TRAITS``): words, unrelated-word share, and 0/1 flags for the rest."""
    tokens = _TOKEN.findall(_SLOT.sub(" ", text.replace("\u2019", "'")))
    words = [t for t in tokens if t not in ".!?"]
    stems, vocab = _stems(text), intent_vocabulary(intent)
    number, name = any(t[0].isdigit() for t in words) or "£" in text, _has_name(tokens)
    return {
        "words": float(len(words)),
        "unrelated": sum(s not in vocab for s in stems) / len(stems) if stems else 0.0,
        "keyword": float(bool(set(stems) & intent_keywords(intent))),
        "question": float("?" in text),
        "hedge": float(bool(HEDGES.search(text.lower().replace("\u2019", "'")))),
        "number": float(number),
        "name": float(name),
        "detail": float(number or name),
    }


def name_for(traits: Mapping[str, float], reference_words: float) -> str | None:
    """The first rule ``traits`` (a cluster's means) meet, or None; ``reference_words``: the clamped median length.

    Contextual Camouflage: long, dense with concrete detail, mostly unrelated words, keywords mostly absent;
    Buried Request: the same with keywords mostly present (the scripted camouflaging customer: a story, then its
    plain request). Vague Hedging: short, hedging, keywords mostly absent. Question Deflection: mostly questions,
    keywords mostly absent. Direct Request: short, keywords mostly present, little hedging."""
    words, keyword, short = traits["mean_words"], traits["keyword_rate"], traits["mean_words"] <= SHORT_WORDS
    if (
        words >= CAMO_LENGTH_RATIO * reference_words
        and traits["detail_rate"] >= CAMO_MIN_DETAIL
        and traits["unrelated_share"] >= CAMO_MIN_UNRELATED
    ):
        return CAMOUFLAGE if keyword <= KEYWORDS_ABSENT else BURIED
    if short and traits["hedge_rate"] >= HEDGE_MIN and keyword <= KEYWORDS_ABSENT:
        return VAGUE
    if traits["question_rate"] >= QUESTION_MIN and keyword <= KEYWORDS_ABSENT:
        return DEFLECTION
    if short and keyword >= DIRECT_MIN_KEYWORD and traits["hedge_rate"] < HEDGE_MIN:
        return DIRECT
    return None


def _summary(per_message: Sequence[Mapping[str, float]], group: np.ndarray) -> dict[str, float]:
    keys = dict(zip(TRAITS, ("mean_words", "unrelated_share", *(f"{t}_rate" for t in TRAITS[2:])), strict=True))
    return {keys[t]: round(float(np.mean([per_message[i][t] for i in group])), 4) for t in TRAITS}


def _features(x: np.ndarray, per_message: Sequence[Mapping[str, float]]) -> np.ndarray:
    """The unit embeddings beside the z-scored style traits, that block scaled to norm ~``TRAIT_WEIGHT``."""
    f = np.array([[np.log1p(t["words"]), *(t[k] for k in CLUSTER_TRAITS)] for t in per_message])
    std = f.std(axis=0)
    z = (f - f.mean(axis=0)) / np.where(std > 0, std, 1.0)
    return np.hstack([x, TRAIT_WEIGHT / np.sqrt(f.shape[1]) * z])


def _cluster(x: np.ndarray, seed: int, max_clusters: int) -> np.ndarray:
    """k-means labels for the k in 2..max_clusters of best silhouette (ties: the smaller k); all 0 if none."""
    best, best_score = np.zeros(len(x), dtype=int), -np.inf
    n_distinct = len(np.unique(x.round(6), axis=0))  # k-means cannot split identical points further
    sample = SILHOUETTE_SAMPLE if len(x) > SILHOUETTE_SAMPLE else None
    for k in range(2, min(max_clusters, n_distinct, len(x) - 1) + 1):
        labels = KMeans(n_clusters=k, random_state=seed, n_init=10).fit_predict(x)
        if len(set(labels.tolist())) < 2:
            continue
        score = float(silhouette_score(x, labels, sample_size=sample, random_state=seed))
        if score > best_score + 1e-9:
            best, best_score = labels, score
    return best


def _distinctive_ngrams(texts: Sequence[str], groups: Sequence[np.ndarray]) -> list[list[str]]:
    """Top word 1-2 grams per group by mean TF-IDF inside it minus outside it (stop words dropped)."""
    try:
        tfidf = TfidfVectorizer(ngram_range=(1, 2), stop_words=_NGRAM_STOP, sublinear_tf=True).fit(texts)
    except ValueError:  # nothing but stop words: no vocabulary to rank
        return [[] for _ in groups]
    m, terms = tfidf.transform(texts), tfidf.get_feature_names_out()
    out = []
    for g in groups:
        inside = np.zeros(len(texts), dtype=bool)
        inside[g] = True
        score = np.asarray(m[inside].mean(axis=0)).ravel()
        if (~inside).any():
            score = score - np.asarray(m[~inside].mean(axis=0)).ravel()
        order = np.argsort(-score, kind="stable")[:N_NGRAMS]
        out.append([str(terms[i]) for i in order if score[i] > 0])
    return out


def _examples(x: np.ndarray, texts: Sequence[str], group: np.ndarray) -> list[str]:
    """Up to three distinct messages nearest the group's centre in the clustering space."""
    picked: list[str] = []
    for i in group[np.argsort(np.linalg.norm(x[group] - x[group].mean(axis=0), axis=1), kind="stable")]:
        if texts[i] not in picked and len(picked) < N_EXAMPLES:
            picked.append(texts[i])
    return picked


def _entry(records: Sequence[MessageRecord], group: np.ndarray, n_gen: int, traits: dict[str, float]) -> dict:
    """A strategy's counts: its share of each generation's messages (0.0 for a generation with none), its success
    rate overall and per generation (None where it has no message of that generation)."""
    totals = Counter(r.generation for r in records)
    mine = Counter(records[i].generation for i in group)
    wins = Counter(records[i].generation for i in group if records[i].won)
    return {
        "share_by_cycle": [round(mine[g] / totals[g], 4) if totals[g] else 0.0 for g in range(n_gen)],
        "traits": traits,
        "size": int(len(group)),
        "share": round(len(group) / len(records), 4),
        "success_rate": round(sum(wins.values()) / len(group), 4),
        "success_by_cycle": [round(wins[g] / mine[g], 4) if mine[g] else None for g in range(n_gen)],
    }


def discover_strategies(
    records: Sequence[MessageRecord],
    *,
    n_generations: int | None = None,
    embedder: Embedder | None = None,
    seed: int = 0,
    max_clusters: int = 6,
) -> list[dict[str, Any]]:
    """The strategies in ``records``, largest first, as METRICS.md's ``strategies`` entries (plain JSON types).

    ``generation`` is a 0-based index into ``share_by_cycle``, which has ``n_generations`` entries (default: the
    largest generation + 1); ``embedder`` maps texts to vectors (default: the judge's MiniLM)."""
    records = [r for r in records if r.text.strip()]
    if not records:
        return []
    n_gen = max(r.generation for r in records) + 1 if n_generations is None else n_generations
    if any(not 0 <= r.generation < n_gen for r in records):
        raise ValueError(f"a record's generation lies outside 0..{n_gen - 1}")
    texts = [r.text for r in records]
    per_message = [message_traits(r.text, r.intent) for r in records]
    x = _features(normalize(np.asarray((embedder or embed)(texts), dtype=np.float64)), per_message)
    with threadpool_limits(blas_threads()):  # the project's thread policy (judge.oracle.blas_threads)
        labels = _cluster(x, seed, max_clusters)
    reference = float(np.clip(np.median([t["words"] for t in per_message]), *REFERENCE_WORDS))
    merged: dict[str, list[np.ndarray]] = {}  # rule name (or "?label" for none) -> its clusters
    for c in sorted(set(labels.tolist())):
        group = np.flatnonzero(labels == c)
        merged.setdefault(name_for(_summary(per_message, group), reference) or f"?{c}", []).append(group)
    groups = {name: np.sort(np.concatenate(parts)) for name, parts in merged.items()}
    ngrams = dict(zip(groups, _distinctive_ngrams(texts, list(groups.values())), strict=True))
    out, used = [], Counter[str]()
    for key, group in sorted(groups.items(), key=lambda kv: (-len(kv[1]), int(kv[1][0]))):
        name = key if not key.startswith("?") else "Cluster: " + (" / ".join(ngrams[key][:2]) or "misc")
        used[name] += 1
        traits = _summary(per_message, group)
        traits["length_vs_median"] = round(traits["mean_words"] / reference, 4)
        out.append(
            {
                "name": name if used[name] == 1 else f"{name} ({used[name]})",
                **_entry(records, group, n_gen, traits),
                "examples": _examples(x, texts, group),
                "ngrams": ngrams[key],
            }
        )
    return out
