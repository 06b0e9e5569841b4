"""pair_counts and the stack's relation features, computed per distinct triple, give what
the per-option loops they replaced gave."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from matching.adversaries import _options, _relation_features, _tokens, pair_counts
from matching.items import Item
from matching.study_scope import is_implied, sim_probability
from tests.matching.test_doc_counts import _items


def _old_pair_counts(train: Sequence[Item], test: Sequence[Item]) -> np.ndarray:
    pos: Counter[str] = Counter()
    neg: Counter[str] = Counter()
    tr_t, _, y = _options(train)
    for t, is_answer in zip(tr_t, y, strict=True):
        (pos if is_answer else neg).update(_tokens(t))
    k = max(1, round(len(tr_t) / max(1, len(train))) - 1)

    def score(t: tuple[str, str, str]) -> float:
        for f in reversed(_tokens(t)):
            if pos[f] + neg[f]:
                return math.log((pos[f] + 1) * k / (neg[f] + 1))
        return 0.0

    return np.array([score(t) for t in _options(test)[0]])


def _old_relation_features(items: Sequence[Item]) -> np.ndarray:
    rows = []
    for it in items:
        for i, t in enumerate(it.triples):
            others = [u for j, u in enumerate(it.triples) if j != i]
            rows.append(
                [
                    sum(is_implied(t, u) for u in others),
                    sum(is_implied(u, t) for u in others),
                    max((sim_probability(u, t) for u in others), default=0.0),
                    max((sim_probability(t, u) for u in others), default=0.0),
                ]
            )
    return np.array(rows, dtype=float).reshape(-1, 4)


def test_pair_counts_and_relation_features_are_unchanged() -> None:
    items = _items(600, seed=4)
    train, test = items[:400], items[400:]
    assert np.array_equal(pair_counts(train, test), _old_pair_counts(train, test))
    got = _relation_features(items)
    assert np.array_equal(got, _old_relation_features(items))
    assert got[:, :2].any()  # some options imply others: the table is exercised
