"""Baselines a trained agent must beat: TF-IDF + logistic regression on the same splits (its Banking77 accuracy:
docs/results.md, "Figures moved out of the code")."""

from __future__ import annotations

from collections.abc import Sequence

from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression


def tfidf_intent_accuracy(
    train_texts: Sequence[str], train_intents: Sequence[str], test_texts: Sequence[str], test_intents: Sequence[str]
) -> float:
    """Held-out accuracy of word 1–2 gram + char 2–5 gram TF-IDF features with logistic regression."""
    word = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2)
    x_train = hstack([word.fit_transform(train_texts), char.fit_transform(train_texts)]).tocsr()
    x_test = hstack([word.transform(test_texts), char.transform(test_texts)]).tocsr()
    clf = LogisticRegression(C=10.0, max_iter=2000).fit(x_train, list(train_intents))
    predicted = clf.predict(x_test)
    return float(sum(p == t for p, t in zip(predicted, test_intents, strict=True)) / max(1, len(test_intents)))
