"""Caption-only models of a binary evaluation file: what a model that reads the caption and
never the image scores, fitted on the train file of the same split scheme.

- ``caption_tfidf_lr``: TF-IDF of the caption's words and word pairs, logistic regression.
- ``caption_tfidf_mlp``: the same features through a small MLP (non-linear: it can learn
  "this relation with these concepts" interactions the linear model cannot).

Each predicts True when its probability is at least one half; the figure is accuracy with
its Wilson 95 % interval (vsr_dataset.leak_audit). Fitting takes seconds on the VSR release.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Small enough to fit ~8,000 captions in seconds on one core, as a build should.
MLP_HIDDEN = (64,)
MLP_MAX_ITER = 60
# Fewer train captions than this: no early stopping (its held-out tenth would be tiny).
EARLY_STOP_MIN = 200


@dataclass(frozen=True)
class CaptionModels:
    """The fitted models of one train file: name -> predict(captions) -> labels (0/1)."""

    vectorizer: Any
    models: dict[str, Any]

    def predict(self, captions: Sequence[str]) -> dict[str, np.ndarray]:
        x = self.vectorizer.transform(captions)
        return {name: np.asarray(m.predict(x)).astype(int) for name, m in self.models.items()}


def fit(captions: Sequence[str], labels: Sequence[int], seed: int = 0) -> CaptionModels | None:
    """Both models fitted on a train file's captions; None when it holds one label only."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    y = np.asarray(labels, dtype=int)
    if len(np.unique(y)) < 2:
        return None
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    x = vec.fit_transform(captions)
    mlp = MLPClassifier(
        hidden_layer_sizes=MLP_HIDDEN,
        alpha=1e-3,
        max_iter=MLP_MAX_ITER,
        early_stopping=len(y) >= EARLY_STOP_MIN,
        random_state=seed,
    )
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # early stop is enough here
        lr = LogisticRegression(C=4.0, max_iter=2000).fit(x, y)
        mlp.fit(x, y)
    return CaptionModels(vec, {"caption_tfidf_lr": lr, "caption_tfidf_mlp": mlp})
