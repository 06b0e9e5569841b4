"""Tokenising once (matching.doc_counts) gives the numbers a vectorizer fitted per subset gave,
to the last bit: the AFLite filter's items must not change with it."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfTransformer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from matching.adversaries import (
    OptionCounts,
    _options,
    _tokens,
    _with_tokens,
    listwise_pairs_lr_rows,
    tfidf_pair_rel_lr_rows,
)
from matching.doc_counts import DocCounts
from matching.filtering import FOLDS, predictability
from matching.items import Item
from matching.records import Record

WORDS = ["the", "cat", "dog", "is", "on", "under", "left", "of", "right", "near", "touching"]
KINDS: list[dict[str, Any]] = [
    {"ngram_range": (1, 2), "sublinear_tf": True},
    {"tokenizer": str.split, "token_pattern": None, "lowercase": False},
    {"tokenizer": str.split, "token_pattern": None, "lowercase": False, "sublinear_tf": True},
]


def _docs(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + "." for _ in range(n)]


def _same(a: object, b: object) -> None:
    assert type(a) is type(b)
    for name in ("indptr", "indices", "data"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.has_sorted_indices == b.has_sorted_indices  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", range(len(KINDS)))
def test_fit_and_transform_of_rows_equal_a_vectorizer_on_their_texts(kind: int) -> None:
    kw = KINDS[kind]
    docs = _docs(1200)
    docs += docs[::4]  # repeated texts, as options repeat captions
    y = np.array([i % 3 == 0 for i in range(len(docs))], dtype=int)
    counts = DocCounts(TfidfVectorizer(**kw).build_analyzer(), docs)
    for trial in range(3):
        perm = np.random.default_rng(trial).permutation(len(docs))
        fit = np.sort(perm[:1000]) if trial % 2 else perm[:1000]
        rest = perm[1000:]
        vec = TfidfVectorizer(**kw)
        a_fit = vec.fit_transform([docs[i] for i in fit])
        a_rest = vec.transform([docs[i] for i in rest])
        c_fit, vocab = counts.fit(fit)
        tf = TfidfTransformer(sublinear_tf=bool(kw.get("sublinear_tf"))).fit(c_fit)
        b_fit = tf.transform(c_fit, copy=False)
        b_rest = tf.transform(counts.transform(rest, vocab), copy=False)
        _same(a_fit, b_fit)
        _same(a_rest, b_rest)
        lr = LogisticRegression(C=4.0, max_iter=2000)
        d_a = lr.fit(a_fit, y[fit]).decision_function(a_rest)
        d_b = lr.fit(b_fit, y[fit]).decision_function(b_rest)
        assert np.array_equal(d_a, d_b)


def _items(n: int, seed: int = 0) -> list[Item]:
    rng = random.Random(seed)
    nouns = ["cat", "dog", "bed", "table", "car", "teddy bear", "person", "oven"]
    rels = ["on", "under", "left of", "right of", "near", "touching", "far away from", "in"]
    out = []
    for i in range(n):
        triples = [(rng.choice(nouns), rng.choice(rels), rng.choice(nouns)) for _ in range(4)]
        rec = Record(i, f"{i}.jpg", *triples[0], f"The {triples[0][0]} ...", True)
        out.append(
            Item(
                query=rec,
                split="train" if i < 0.7 * n else "test",
                choices=[f"The {s} is {r} the {o}." for s, r, o in triples],
                triples=triples,
                answer_index=rng.randrange(4),
                source_ids=[i, i, i, i],
            )
        )
    return out


def _old_tfidf_pair_rel_lr(train: list[Item], test: list[Item]) -> np.ndarray:
    """tfidf_pair_rel_lr as it was before the counts were shared (a vectorizer per fit)."""
    tr_t, tr_x, y = _options(train)
    te_t, te_x, _ = _options(test)
    words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    inter = TfidfVectorizer(tokenizer=str.split, token_pattern=None, lowercase=False)
    x_tr = hstack(
        [words.fit_transform(tr_x), inter.fit_transform([" ".join(_tokens(t)) for t in tr_t])]
    ).tocsr()
    x_te = hstack(
        [words.transform(te_x), inter.transform([" ".join(_tokens(t)) for t in te_t])]
    ).tocsr()
    clf = LogisticRegression(C=4.0, max_iter=2000).fit(x_tr, y)
    return np.asarray(clf.decision_function(x_te))


def _old_listwise_pairs_lr(train: list[Item], test: list[Item]) -> np.ndarray:
    y = _options(train)[2]
    vec = TfidfVectorizer(
        tokenizer=str.split, token_pattern=None, lowercase=False, sublinear_tf=True
    )
    x_tr = vec.fit_transform([" ".join(t) for it in train for t in _with_tokens(it)])
    x_te = vec.transform([" ".join(t) for it in test for t in _with_tokens(it)])
    clf = LogisticRegression(C=4.0, max_iter=2000).fit(x_tr, y)
    return np.asarray(clf.decision_function(x_te))


def test_models_on_rows_score_as_the_per_fit_vectorizers_did() -> None:
    items = _items(400)
    opts = OptionCounts(items)
    fold = np.random.default_rng(1).integers(0, FOLDS, len(items))
    for f in range(FOLDS):
        fit, held = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        fit_items, held_items = [items[i] for i in fit], [items[i] for i in held]
        assert np.array_equal(
            tfidf_pair_rel_lr_rows(opts, fit, held), _old_tfidf_pair_rel_lr(fit_items, held_items)
        )
        assert np.array_equal(
            listwise_pairs_lr_rows(opts, fit, held), _old_listwise_pairs_lr(fit_items, held_items)
        )


def test_filter_scores_do_not_depend_on_workers() -> None:
    items = _items(300, seed=2)
    train = [it for it in items if it.split == "train"]
    others = [it for it in items if it.split != "train"]
    one = predictability(train, others, 0, 0.4, workers=1)
    two = predictability(train, others, 0, 0.4, workers=2)
    for a, b in zip(one, two, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
