"""AFLite-style filtering (Le Bras et al. 2020) of matched items against answer-only models.

Matching balances what it can (relations, concept pairs, raking's features), but models
that read the options still find patterns in what is left. This step scores every item with
answer-only models that never saw it and drops the items they find predictable:

- train items are scored cross-fitted: ``FOLDS`` random folds, each scored by models fitted
  on the other folds' items;
- dev and test items are scored by models fitted on all train items (never on their own
  split), exactly how the held-out suite (matching.adversaries) is trained;
- an item's *predictability* is the mean, over the per-option TF-IDF regression and the
  listwise one (the two strongest linear models on VSR), of the softmax probability its
  answer gets among its options; items at or above ``MatchParams.filter_above`` are dropped.

Dropping the items those models rank the answer first leaves items where they rank it low,
and a stack that reads the per-option scores and their in-item ranks learns that inverted
signal (matching.adversaries.listwise_stack_gbm). So a second pass, a stack of the same
kind, is fitted on the train items the first pass kept: a gradient-boosted model over the
*same* cross-fitted scores (plus pair_counts, the in-item ranks and the relation-table
features), no nested cross-fitting, a handful of ~1 s fits. Its probability is normalised
within the item (p / sum p); dev and test items it gives the answer at least
``MatchParams.filter_stack_above`` are dropped. Train items are not: their cross-fitted
scores carry a leave-fold-out artifact (an item's answer is a distractor of other items of
its split, so models that never saw the item learn it as a distractor and rank it low),
which the stack reads on train, and on a small split it would drop most of train.

The suite that reports the figures is fitted afresh on the kept train items; its test items
were dropped by models of the same kind, so the reported figure is the held-out accuracy
*after* filtering, as for AFLite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matching.adversaries import OptionCounts
    from matching.items import Item

FOLDS = 4
# The first models are averaged for the first pass; all of them feed the stack.
FIRST_PASS_MODELS = 2
# matching.adversaries.RowModel: scores the items at the second indices, fitted on the first.
Model = Callable[["OptionCounts", Sequence["Item"], np.ndarray, np.ndarray], np.ndarray]


def _models() -> list[Model]:
    from matching.adversaries import row_models

    by_name = row_models()
    return [by_name[n] for n in ("tfidf_pair_rel_lr", "listwise_pairs_lr", "pair_counts")]


def _answer_probability(
    items: Sequence[Item], scores: np.ndarray, softmax: bool = True
) -> np.ndarray:
    """The answer's share of its item: softmax of scores, or p / sum p of probabilities
    (a softmax of four values in [0, 1] never reaches 0.5)."""
    out, at = [], 0
    for it in items:
        n = len(it.triples)
        v = scores[at : at + n]
        e = np.exp(v - v.max()) if softmax else np.maximum(v, 1e-12)
        out.append(float(e[it.answer_index] / e.sum()))
        at += n
    return np.array(out)


# What forked workers of ``_scores`` read (set just before the pool starts, like
# matching.folds): the items are inherited, not pickled.
_SHARED: dict[str, Any] = {}


def _fit_job(job: tuple[int, int], shared: dict[str, Any] | None = None) -> np.ndarray:
    """One model's scores: fold ``f``'s held-out train options from a fit on the other
    folds, or (``f`` = -1) the other splits' options from a fit on all of train."""
    s = _SHARED if shared is None else shared
    model: Model = _models()[job[0]]
    opts, items, fold, f = s["opts"], s["items"], s["fold"], job[1]
    n_train = len(fold)
    if f < 0:
        if len(items) == n_train:
            return np.zeros(0)
        return model(opts, items, np.arange(n_train), np.arange(n_train, len(items)))
    held = np.flatnonzero(fold == f)
    fit = np.flatnonzero(fold != f)
    if len(held) == 0 or not len(fit):
        return np.zeros(0)
    return model(opts, items, fit, held)


def _scores(
    train: Sequence[Item], others: Sequence[Item], fold: np.ndarray, workers: int = 1
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per model: each train option's cross-fitted score, each other option's score.
    The fits are independent, so ``workers`` processes share them; the scores are the
    same for any number. Every option is tokenised once, before the fits."""
    from matching.adversaries import OptionCounts

    sizes = np.array([len(it.triples) for it in train])
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    n_models = len(_models())
    jobs = [(m, f) for m in range(n_models) for f in (*range(FOLDS), -1)]
    items = [*train, *others]
    shared = {"opts": OptionCounts(items), "items": items, "fold": fold}
    if workers > 1:
        import multiprocessing

        _SHARED.update(shared)
        try:
            with multiprocessing.get_context("fork").Pool(min(workers, len(jobs))) as pool:
                got = pool.map(_fit_job, jobs, chunksize=1)
        finally:
            _SHARED.clear()
    else:
        got = [_fit_job(j, shared) for j in jobs]
    results = dict(zip(jobs, got, strict=True))
    tr_cols, ot_cols = [], []
    for m in range(n_models):
        col = np.zeros(int(sizes.sum()))
        for f in range(FOLDS):
            held = np.flatnonzero(fold == f)
            scores, at = results[(m, f)], 0
            if not len(scores):
                continue
            for i in held:
                col[starts[i] : starts[i + 1]] = scores[at : at + sizes[i]]
                at += sizes[i]
        tr_cols.append(col)
        ot_cols.append(results[(m, -1)])
    return tr_cols, ot_cols


def _stack_features(items: Sequence[Item], cols: list[np.ndarray]) -> np.ndarray:
    from matching.adversaries import _in_item_ranks, _relation_features

    parts = [np.column_stack([c, _in_item_ranks(items, c)]) for c in cols]
    return np.hstack([*parts, _relation_features(items)])


def _rows(items: Sequence[Item], keep: np.ndarray) -> np.ndarray:
    """The option rows of the kept items."""
    return np.repeat(keep, [len(it.triples) for it in items])


def _stack_probability(
    train: Sequence[Item],
    others: Sequence[Item],
    x_tr: np.ndarray,
    x_ot: np.ndarray,
    seed: int,
) -> np.ndarray:
    """The answer's share (p / sum p) of each other item under a gradient-boosted stack
    fitted on the train items' features, as matching.adversaries.listwise_stack_gbm."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    from matching.adversaries import EARLY_STOP_MIN, _options

    y = _options(train)[2]
    if len(np.unique(y)) < 2 or not len(x_ot):
        return np.zeros(len(others))
    clf: Any = HistGradientBoostingClassifier(
        max_iter=200,
        learning_rate=0.05,
        max_leaf_nodes=15,
        l2_regularization=1.0,
        early_stopping=len(y) >= EARLY_STOP_MIN,
        random_state=seed,
    )
    with threadpool_limits(limits=1):
        p = clf.fit(x_tr, y).predict_proba(x_ot)[:, 1]
    return _answer_probability(others, p, softmax=False)


def predictability(
    train: Sequence[Item],
    others: Sequence[Item],
    seed: int,
    above: float,
    stack: bool = True,
    workers: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first pass's mean answer probability of each train item (cross-fitted) and each
    other item (models fitted on all of train); with ``stack``, the second pass's answer
    share of each other item the first pass keeps (below ``above``; NaN for the rest)."""
    fold = np.random.default_rng([seed, len(train)]).integers(0, FOLDS, len(train))
    tr_cols, ot_cols = _scores(train, others, fold, workers)
    first = slice(0, FIRST_PASS_MODELS)
    p_tr = np.mean([_answer_probability(train, c) for c in tr_cols[first]], axis=0)
    p_ot = np.zeros(len(others))
    if others:
        p_ot = np.mean([_answer_probability(others, c) for c in ot_cols[first]], axis=0)
    s_ot = np.full(len(others), np.nan)
    keep_tr, keep_ot = p_tr < above, p_ot < above
    if stack and keep_tr.sum() >= 2 * FOLDS and keep_ot.any():
        s_ot[keep_ot] = _stack_probability(
            [it for it, k in zip(train, keep_tr, strict=True) if k],
            [it for it, k in zip(others, keep_ot, strict=True) if k],
            _stack_features(train, tr_cols)[_rows(train, keep_tr)],
            _stack_features(others, ot_cols)[_rows(others, keep_ot)],
            seed,
        )
    return p_tr, p_ot, s_ot


def filter_predictable(
    items: Sequence[Item],
    above: float,
    seed: int = 0,
    stack_above: float = 0.0,
    workers: int = 1,
) -> tuple[list[Item], dict[str, int]]:
    """The items the first pass finds below ``above`` (0: keep all) and, with
    ``stack_above`` > 0, whose dev / test answer the stack gives less than that; and how
    many each split lost."""
    if above <= 0:
        return list(items), {}
    train = [it for it in items if it.split == "train"]
    others = [it for it in items if it.split != "train"]
    if len(train) < 2 * FOLDS:
        return list(items), {}
    p_tr, p_ot, s_ot = predictability(train, others, seed, above, stack_above > 0, workers)
    # NaN (not scored by the stack) compares False: only the first pass decides.
    keep_ot = (p_ot < above) & ~(s_ot >= stack_above)
    kept = {id(it) for it, p in zip(train, p_tr, strict=True) if p < above}
    kept |= {id(it) for it, k in zip(others, keep_ot, strict=True) if k}
    dropped: dict[str, int] = {}
    for it in items:
        if id(it) not in kept:
            dropped[it.split] = dropped.get(it.split, 0) + 1
    return [it for it in items if id(it) in kept], dropped
