"""Token counts of documents, tokenised once, sliced per fit as scikit-learn would count them.

The AFLite filter (matching.filtering) fits the same TF-IDF models on 15 subsets of the same
option texts; re-tokenising every caption for each fit was a third of its time. Here each
document is analysed once and a fit on any subset of rows gets the count matrix that
``CountVectorizer(...).fit_transform`` of those documents returns, down to the order of the
entries inside each row, which sets the order floating-point sums run in (the TF-IDF row
norms, the logistic regression's products), so the scores are the same to the last bit:

- a fitted vocabulary is the features the fit's rows contain, numbered alphabetically;
- ``fit_transform`` stores each row's entries by the order its features were first met in
  the fit's documents (scikit-learn sorts by that id, then renumbers alphabetically without
  re-sorting);
- ``transform`` with a fitted vocabulary stores them by column (alphabetically), dropping
  features the fit never met.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp

Analyzer = Callable[[str], list[str]]


class DocCounts:
    """Every document's features (numbered alphabetically over all documents) and counts,
    each row in the order its features first occur in the document."""

    def __init__(self, analyze: Analyzer, docs: Sequence[str]) -> None:
        seen: dict[str, int] = {}
        cols: list[int] = []
        vals: list[int] = []
        indptr = [0]
        # Options repeat captions (a distractor is another query's caption, remapped): each
        # distinct text is analysed once; a repeat brings no new feature, so ids stay put.
        done: dict[str, tuple[list[int], list[int]]] = {}
        for doc in docs:
            row = done.get(doc)
            if row is None:
                counter: dict[int, int] = {}
                for feature in analyze(doc):
                    j = seen.setdefault(feature, len(seen))
                    counter[j] = counter.get(j, 0) + 1
                row = done[doc] = (list(counter), list(counter.values()))
            cols.extend(row[0])
            vals.extend(row[1])
            indptr.append(len(cols))
        order = sorted(seen, key=seen.__getitem__)  # features by first-seen id
        alpha = np.empty(len(order), dtype=np.int64)  # first-seen id -> alphabetical id
        alpha[np.argsort(np.array(order, dtype=object), kind="stable")] = np.arange(len(order))
        self.n_features = len(order)
        self.indices = alpha[np.asarray(cols, dtype=np.int64)] if cols else np.zeros(0, int)
        self.data = np.asarray(vals, dtype=np.float64)
        self.indptr = np.asarray(indptr, dtype=np.int64)

    def _take(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The entries of ``rows`` (in that order): flat positions, row lengths, indptr."""
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        lengths = ends - starts
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        pos = np.repeat(starts - indptr[:-1], lengths) + np.arange(int(indptr[-1]))
        return pos, lengths, indptr

    def fit(self, rows: np.ndarray) -> tuple[sp.csr_array, np.ndarray]:
        """What ``CountVectorizer.fit_transform`` returns for these rows' documents, and the
        fitted vocabulary as the alphabetical ids of its features (ascending)."""
        rows = np.asarray(rows, dtype=np.int64)
        pos, lengths, indptr = self._take(rows)
        col = self.indices[pos]
        vocab, first = np.unique(col, return_index=True)
        if not len(vocab):
            raise ValueError("empty vocabulary; perhaps the documents only contain stop words")
        # The fit's own ids: features numbered by first occurrence over its rows.
        seen_rank = np.empty(len(vocab), dtype=np.int64)
        seen_rank[np.argsort(first, kind="stable")] = np.arange(len(vocab))
        local = np.searchsorted(vocab, col)
        row_of = np.repeat(np.arange(len(rows)), lengths)
        order = np.lexsort((seen_rank[local], row_of))  # each row sorted by first-seen id
        return self._csr(self.data[pos][order], local[order], indptr, len(vocab)), vocab

    def transform(self, rows: np.ndarray, vocab: np.ndarray) -> sp.csr_array:
        """What ``CountVectorizer.transform`` (fitted on ``vocab``) returns for these rows."""
        rows = np.asarray(rows, dtype=np.int64)
        pos, lengths, _ = self._take(rows)
        col = self.indices[pos]
        local = np.searchsorted(vocab, col)
        hit = local < len(vocab)
        hit[hit] = vocab[local[hit]] == col[hit]
        row_of = np.repeat(np.arange(len(rows)), lengths)[hit]
        order = np.lexsort((local[hit], row_of))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(row_of, minlength=len(rows)))])
        return self._csr(self.data[pos][hit][order], local[hit][order], indptr, len(vocab))

    def _csr(
        self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, width: int
    ) -> sp.csr_array:
        # int32 index arrays and float64 counts, as scikit-learn builds them.
        return sp.csr_array(
            (data, indices.astype(np.int32), np.asarray(indptr, dtype=np.int32)),
            shape=(len(indptr) - 1, width),
        )
