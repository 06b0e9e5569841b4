"""Adversarial filtering inside selection (issue 12): aim distractors at what an answer-only
model learned from the train items, so that model cannot tell the truth from them.

The held-out adversaries of ``matching.adversaries`` are trained on the train items and
scored on the test items. What they can learn is how often an option's (relation), (subject,
relation), (object, relation) and (concept pair, relation) were the answer rather than a
distractor in train. Balance within a split cannot remove that signal for pairs too rare to
balance; so after train is matched, ``OptionOdds`` (a cheap count model of exactly that
signal, with hierarchical back-off) is fitted on the train items, and dev and test distractors
are aimed at the truth's score under it: weight ``-strength * |S(distractor) - S(truth)|``
on top of the usual ones. The truth is then neither the option the model likes most nor the
one it likes least.

Train items are filtered too, cross-fitted: the train queries are cut into folds by concept
pair; each fold is scored by an ``OptionOdds`` fitted on the other folds' items only, and
train is matched again with the aimed weights (``rounds`` times). A model never scores the
items it was fitted on, and the test figure stays held out: the suite trains its adversaries
on train items and scores test items that ``OptionOdds`` never saw as training data.

``OptionOdds`` is the only model selection uses besides P_rel; the suite keeps models
selection never uses (TF-IDF words with logistic regression, the MiniLM MLP, counts that
pick the least-answered option), so the headline figure is not the filter grading itself.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matching.pipeline import Item
    from matching.records import Record, Triple

# Pseudo-items of each back-off level: a feature seen m times is trusted as much as its
# parent level. 4 = one item's worth of options at k = 3.
PRIOR_ITEMS = 4.0
# Folds of the cross-fitted train filter (by concept pair, so a pair's items are scored by a
# model that never saw that pair's answers).
FOLDS = 5

Adjust = Callable[[Sequence["Record"], Sequence[str]], np.ndarray]


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


class OptionOdds:
    """log-odds that an option is the answer, from answer / distractor counts of its
    relation, (subject, relation), (object, relation) and (pair, relation) in some items.

    Each level is smoothed towards its parent (pair -> mean of subject and object in logit
    space -> relation -> 1/(k+1)), so rare features say little and unseen ones inherit.
    """

    def __init__(self, prior_items: float = PRIOR_ITEMS) -> None:
        self.m = prior_items
        self.ans: Counter[tuple[str, ...]] = Counter()
        self.all: Counter[tuple[str, ...]] = Counter()
        self.p0 = 0.25

    def fit(self, items: Sequence[Item]) -> OptionOdds:
        n_opt = 0
        for it in items:
            for i, (s, r, o) in enumerate(it.triples):
                n_opt += 1
                for key in (("r", r), ("sr", s, r), ("or", o, r), ("pr", s, o, r)):
                    self.all[key] += 1
                    if i == it.answer_index:
                        self.ans[key] += 1
        if items:
            self.p0 = len(items) / n_opt
        return self

    def _smooth(self, key: tuple[str, ...], prior: float) -> float:
        return (self.ans[key] + self.m * prior) / (self.all[key] + self.m)

    def views(self, triples: Sequence[Triple]) -> np.ndarray:
        """n x 4 log-odds of the option by relation, (subject, relation), (object,
        relation) and (pair, relation) alone, each smoothed towards the relation's."""
        out = np.empty((len(triples), 4))
        for n, (s, r, o) in enumerate(triples):
            p_r = self._smooth(("r", r), self.p0)
            out[n] = [p_r, self._smooth(("sr", s, r), p_r), self._smooth(("or", o, r), p_r),
                      self._smooth(("pr", s, o, r), p_r)]
        return _logit(out)

    def score(self, triples: Sequence[Triple]) -> np.ndarray:
        """One log-odds per option: the pair's, backing off to the mean of the subject's
        and object's views (what an additive model of the four would say)."""
        out = np.empty(len(triples))
        for n, (s, r, o) in enumerate(triples):
            p_r = self._smooth(("r", r), self.p0)
            l_s = _logit(np.array(self._smooth(("sr", s, r), p_r)))
            l_o = _logit(np.array(self._smooth(("or", o, r), p_r)))
            prior = float(1 / (1 + np.exp(-(l_s + l_o) / 2)))
            out[n] = float(_logit(np.array(self._smooth(("pr", s, o, r), prior))))
        return out


def aim_penalty(model: OptionOdds, strength: float) -> Adjust:
    """Extra weight of each (query, candidate relation): -strength |S(cand) - S(truth)|
    (remapped candidates: the query's subject and object with the group's relation)."""

    def adjust(queries: Sequence[Record], relations: Sequence[str]) -> np.ndarray:
        pairs = sorted({(q.subj, q.obj) for q in queries})
        row = {p: i for i, p in enumerate(pairs)}
        # pairs x relations x views
        table = np.array([
            model.views([(s, r, o) for r in relations]) for s, o in pairs
        ]).reshape(len(pairs), len(relations), -1)
        out = np.empty((len(queries), len(relations)))
        for i, q in enumerate(queries):
            cand = table[row[(q.subj, q.obj)]]
            truth = model.views([q.triple])[0]
            out[i] = -strength * np.abs(cand - truth[None, :]).sum(axis=1)
        return out

    return adjust


def fold_of(pair: tuple[str, str], folds: int = FOLDS) -> int:
    """A concept pair's fold, as a stable hash (the same in every process)."""
    digest = hashlib.sha256(f"{pair[0]}|{pair[1]}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % folds


def cross_fitted_penalty(items: Sequence[Item], strength: float, folds: int = FOLDS) -> Adjust:
    """As ``aim_penalty`` for the split ``items`` came from, each query scored by a model
    fitted on the items of the other folds only."""
    by_fold: dict[int, list[Item]] = {}
    for it in items:
        by_fold.setdefault(fold_of((it.query.subj, it.query.obj), folds), []).append(it)
    per_fold = {
        f: aim_penalty(
            OptionOdds().fit([it for g, its in by_fold.items() if g != f for it in its]),
            strength,
        )
        for f in range(folds)
    }

    def adjust(queries: Sequence[Record], relations: Sequence[str]) -> np.ndarray:
        out = np.empty((len(queries), len(relations)))
        for f, fn in per_fold.items():
            rows = [i for i, q in enumerate(queries) if fold_of((q.subj, q.obj), folds) == f]
            if rows:
                out[rows] = fn([queries[i] for i in rows], relations)
        return out

    return adjust
