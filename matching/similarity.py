"""P_sim: the probability that a candidate caption is true whenever another one is.

Two implementations behind one interface:
- ``TableSimilarity`` (offline default): the relation-semantics table of the study being
  matched (``matching.study_scope``; VSR's hand-written one by default), vectorised over
  relation indices so a whole weight matrix is a few numpy gathers.
- ``CrossEncoderSimilarity``: a sentence-transformers CrossEncoder NLI model (by name or
  path); P_sim is its entailment probability for (truth caption, candidate caption).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from matching.study_scope import active_table, render_caption
from vsr_core.relation_semantics import OTHER_OBJECTS_P, SemanticsTable

Triple = tuple[str, str, str]


class SimilarityScorer(Protocol):
    name: str

    def score(self, premises: Sequence[Triple], hypotheses: Sequence[Triple]) -> np.ndarray:
        """Elementwise P(hypothesis true | premise true)."""
        ...


def table_matrices() -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Relation index; P for same and swapped objects; "implied" (same, equivalent or
    entailed) for same and swapped objects. Rows: premise relation, columns: candidate.
    By the active study's table (matching.study_scope)."""
    return _matrices(active_table())


@lru_cache(maxsize=4)
def _matrices(
    table: SemanticsTable,
) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    link = table.link
    names = list(table.names)
    index = {n: i for i, n in enumerate(names)}
    r = len(names)
    p_same, p_swap = np.zeros((r, r)), np.zeros((r, r))
    imp_same, imp_swap = np.zeros((r, r), bool), np.zeros((r, r), bool)
    implied = ("same", "equivalent", "entails")
    for a in names:
        for b in names:
            same, swap = link(a, b), link(a, b, swapped=True)
            p_same[index[a], index[b]] = same.p
            p_swap[index[a], index[b]] = swap.p
            imp_same[index[a], index[b]] = same.kind in implied
            imp_swap[index[a], index[b]] = swap.kind in implied
    return index, p_same, p_swap, imp_same, imp_swap


def table_lookup(
    t_rel: np.ndarray,
    t_s: np.ndarray,
    t_o: np.ndarray,
    c_rel: np.ndarray,
    c_s: np.ndarray,
    c_o: np.ndarray,
    *,
    implied: bool = False,
) -> np.ndarray:
    """Broadcasting table lookup on integer arrays (relation and concept ids).

    Returns P(candidate | truth), or with ``implied`` whether the truth implies the candidate.
    """
    _, p_same, p_swap, imp_same, imp_swap = table_matrices()
    same = (t_s == c_s) & (t_o == c_o)
    swap = (t_s == c_o) & (t_o == c_s) & ~same
    if implied:
        return np.where(same, imp_same[t_rel, c_rel], np.where(swap, imp_swap[t_rel, c_rel], False))
    other = np.float64(OTHER_OBJECTS_P)
    return np.where(same, p_same[t_rel, c_rel], np.where(swap, p_swap[t_rel, c_rel], other))


class TableSimilarity:
    """The offline default: ``vsr_core.relation_semantics`` (see its entries for the reasoning)."""

    name = "table"
    vectorised = True

    def score(self, premises: Sequence[Triple], hypotheses: Sequence[Triple]) -> np.ndarray:
        index = table_matrices()[0]
        concepts: dict[str, int] = {}

        def ids(triples: Sequence[Triple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            s = np.array([concepts.setdefault(t[0], len(concepts)) for t in triples], dtype=int)
            rel = np.array([index[t[1]] for t in triples], dtype=int)
            o = np.array([concepts.setdefault(t[2], len(concepts)) for t in triples], dtype=int)
            return rel, s, o

        return table_lookup(*ids(premises), *ids(hypotheses))


class CrossEncoderSimilarity:
    """An NLI CrossEncoder: P_sim = P(entailment | truth caption, candidate caption)."""

    vectorised = False

    def __init__(self, name_or_path: str, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from matching import model_libraries

        CrossEncoder: Any = model_libraries.load("sentence_transformers").CrossEncoder  # noqa: N806

        self.name = str(name_or_path)
        self.batch_size = batch_size
        self.model: Any = CrossEncoder(str(name_or_path), device="cpu")
        self.entail_col = _entailment_column(self.model)
        self._cache: dict[tuple[str, str], float] = {}

    def score(self, premises: Sequence[Triple], hypotheses: Sequence[Triple]) -> np.ndarray:
        texts = [
            (render_caption(*p), render_caption(*h))
            for p, h in zip(premises, hypotheses, strict=True)
        ]
        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            if self.entail_col is None:  # one output: a relevance/entailment logit
                out = np.asarray(self.model.predict(todo, batch_size=self.batch_size))
                probs = 1.0 / (1.0 + np.exp(-out.reshape(-1)))
            else:
                out = np.asarray(
                    self.model.predict(todo, batch_size=self.batch_size, apply_softmax=True)
                )
                probs = out[:, self.entail_col]
            self._cache.update(zip(todo, (float(p) for p in probs), strict=True))
        return np.array([self._cache[t] for t in texts], dtype=np.float64)


def _entailment_column(model: Any) -> int | None:
    config = getattr(getattr(model, "model", None), "config", None)
    labels = getattr(config, "id2label", None) or {}
    n = int(getattr(config, "num_labels", len(labels) or 1))
    if n == 1:
        return None
    for idx, label in labels.items():
        if "entail" in str(label).lower():
            return int(idx)
    raise ValueError(
        f"NLI model has {n} outputs but none is labelled 'entailment' (id2label={labels})"
    )


def load_similarity(spec: str | None) -> SimilarityScorer:
    """'table' (default) or a CrossEncoder NLI model name/path."""
    if spec in (None, "", "table"):
        return TableSimilarity()
    return CrossEncoderSimilarity(spec)
