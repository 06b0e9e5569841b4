"""AFLite-style filtering (Le Bras et al. 2020) of matched items against answer-only models.

Matching balances what it can (relations, concept pairs, raking's features), but models
that read the options still find patterns in what is left. This step scores every item with
answer-only models that never saw it and drops the items they find predictable:

- train items are scored cross-fitted: ``FOLDS`` random folds, each scored by models fitted
  on the other folds' items;
- dev and test items are scored by models fitted on all train items (never on their own
  split), exactly how the held-out suite (matching.adversaries) is trained;
- an item's *predictability* is the mean, over the models, of the softmax probability its
  answer gets among its options; items at or above ``MatchParams.filter_above`` are dropped.

The models are the per-option TF-IDF regression and the listwise one
(matching.adversaries), the two strongest on VSR. The suite that reports the figures is
fitted afresh on the kept train items; its test items were dropped by models of the same
kind, so the reported figure is the held-out accuracy *after* filtering, as for AFLite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matching.items import Item

FOLDS = 4
Model = Callable[[Sequence["Item"], Sequence["Item"]], np.ndarray]


def _models() -> list[Model]:
    from matching.adversaries import listwise_pairs_lr, tfidf_pair_rel_lr

    return [tfidf_pair_rel_lr, listwise_pairs_lr]


def _answer_probability(items: Sequence[Item], scores: np.ndarray) -> np.ndarray:
    out, at = [], 0
    for it in items:
        n = len(it.triples)
        v = scores[at : at + n]
        e = np.exp(v - v.max())
        out.append(float(e[it.answer_index] / e.sum()))
        at += n
    return np.array(out)


def predictability(
    train: Sequence[Item], others: Sequence[Item], seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean answer probability of each train item (cross-fitted) and of each other item
    (models fitted on all of train)."""
    models = _models()
    p_train = np.zeros(len(train))
    fold = np.random.default_rng([seed, len(train)]).integers(0, FOLDS, len(train))
    for f in range(FOLDS):
        held = np.flatnonzero(fold == f)
        fit = [it for it, g in zip(train, fold, strict=True) if g != f]
        if len(held) == 0 or not fit:
            continue
        part = [train[int(i)] for i in held]
        p_train[held] = np.mean([_answer_probability(part, m(fit, part)) for m in models], axis=0)
    p_other = np.zeros(len(others))
    if others and train:
        p_other = np.mean([_answer_probability(others, m(train, others)) for m in models],
                          axis=0)
    return p_train, p_other


def filter_predictable(
    items: Sequence[Item], above: float, seed: int = 0
) -> tuple[list[Item], dict[str, int]]:
    """The items whose predictability is below ``above`` (0: keep all), and how many each
    split lost."""
    if above <= 0:
        return list(items), {}
    train = [it for it in items if it.split == "train"]
    others = [it for it in items if it.split != "train"]
    if len(train) < 2 * FOLDS:
        return list(items), {}
    p_train, p_other = predictability(train, others, seed)
    drop = {id(it) for it, p in zip(train, p_train, strict=True) if p >= above}
    drop |= {id(it) for it, p in zip(others, p_other, strict=True) if p >= above}
    dropped: dict[str, int] = {}
    for it in items:
        if id(it) in drop:
            dropped[it.split] = dropped.get(it.split, 0) + 1
    return [it for it in items if id(it) not in drop], dropped
