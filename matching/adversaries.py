"""Held-out answer-only adversaries: can a model that never sees the image pick the answer?

Each adversary is trained on the train items of a matching run and scored on the test items;
it sees only the item's options (k + 1 captions, their concepts and relations). The suite:

- ``tfidf_pair_rel_lr``: TF-IDF of the caption words plus one-hot relation, subject x
  relation, object x relation and concept-pair x relation features; a logistic regression
  of "is the answer" per option, the option with the highest probability wins.
- ``pair_counts``: how often each (concept pair, relation) was the answer vs a distractor in
  train (add-one smoothed log-odds), backing off to (subject, relation), (object, relation)
  and relation alone when the pair was never seen.
- ``embedding_mlp``: MiniLM embeddings of every option's caption with a small MLP head
  (scikit-learn), so unseen pairs that look like seen ones are scored too.
- ``p_rel_least`` / ``p_rel_most``: pick the option P_rel (the relevance model of the
  run, trained on the train split's True captions) rates least / most plausible.

Each reports accuracy on test with a 95 % Wilson interval; the headline is the strongest
adversary (highest accuracy), so the figure a user reads is the worst one. Ties between
options count as a fair coin among the tied ones (expected accuracy).

torch is never imported here at module level: the encoder arrives already loaded.
"""

from __future__ import annotations

import math
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matching.pipeline import Item
    from matching.relevance import Encoder, RelevanceModel

Z95 = 1.959963984540054
# Hidden layer of the embedding adversary: big enough to learn pair x relation interactions
# of ~80 concepts and ~70 relations, small enough to train in seconds on 2 cores.
MLP_HIDDEN = (128,)


def wilson(hits: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion (works for expected hits from ties too)."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def expected_hit(scores: Sequence[float], answer: int) -> float:
    best = max(scores)
    top = [i for i, s in enumerate(scores) if math.isclose(s, best, rel_tol=0, abs_tol=1e-9)]
    return 1.0 / len(top) if answer in top else 0.0


def _tokens(triple: tuple[str, str, str]) -> list[str]:
    s, r, o = (x.replace(" ", "_") for x in triple)
    return [f"rel:{r}", f"subj_rel:{s}|{r}", f"obj_rel:{o}|{r}", f"pair_rel:{s}|{o}|{r}"]


def _options(items: Sequence[Item]) -> tuple[list[tuple[str, str, str]], list[str], np.ndarray]:
    triples, texts, y = [], [], []
    for it in items:
        for i, (t, c) in enumerate(zip(it.triples, it.choices, strict=True)):
            triples.append(t)
            texts.append(c)
            y.append(int(i == it.answer_index))
    return triples, texts, np.array(y)


def _per_item(items: Sequence[Item], option_scores: np.ndarray) -> list[float]:
    hits, at = [], 0
    for it in items:
        n = len(it.triples)
        hits.append(expected_hit(list(option_scores[at : at + n]), it.answer_index))
        at += n
    return hits


def _two_classes(y: np.ndarray) -> bool:
    return len(np.unique(y)) == 2


def tfidf_pair_rel_lr(train: Sequence[Item], test: Sequence[Item]) -> np.ndarray:
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    tr_t, tr_x, y = _options(train)
    te_t, te_x, _ = _options(test)
    words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    inter = TfidfVectorizer(tokenizer=str.split, token_pattern=None, lowercase=False)
    x_tr = hstack([words.fit_transform(tr_x),
                   inter.fit_transform([" ".join(_tokens(t)) for t in tr_t])]).tocsr()
    x_te = hstack([words.transform(te_x),
                   inter.transform([" ".join(_tokens(t)) for t in te_t])]).tocsr()
    if not _two_classes(y):
        return np.zeros(len(te_t))
    with threadpool_limits(limits=1):
        clf = LogisticRegression(C=4.0, max_iter=2000).fit(x_tr, y)
        return np.asarray(clf.decision_function(x_te))


def pair_counts(train: Sequence[Item], test: Sequence[Item]) -> np.ndarray:
    pos: Counter[str] = Counter()
    neg: Counter[str] = Counter()
    tr_t, _, y = _options(train)
    for t, is_answer in zip(tr_t, y, strict=True):
        (pos if is_answer else neg).update(_tokens(t))
    k = max(1, round(len(tr_t) / max(1, len(train))) - 1)

    def score(t: tuple[str, str, str]) -> float:
        # The most specific feature seen in train decides (back-off order: pair, subj,
        # obj, relation); k times as many distractors as answers is the neutral ratio.
        for f in reversed(_tokens(t)):
            if pos[f] + neg[f]:
                return math.log((pos[f] + 1) * k / (neg[f] + 1))
        return 0.0

    return np.array([score(t) for t in _options(test)[0]])


def _embed_triples(encoder: Encoder, triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
    """[subject, relation, object] MiniLM embeddings per option.

    Every VSR caption is the template "The <subj> is <relation> the <obj>." (remapped
    distractors are rendered with it too), so the three parts carry all the caption says;
    embedding ~150 distinct phrases instead of ~20,000 captions keeps this adversary to
    seconds inside ``vsr match --report``.
    """
    phrases = sorted({x for t in triples for x in t})
    vecs = np.asarray(encoder.encode(phrases, batch_size=256), dtype=np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    row = {p: i for i, p in enumerate(phrases)}
    idx = np.array([[row[x] for x in t] for t in triples], dtype=int).reshape(-1, 3)
    return np.hstack([vecs[idx[:, 0]], vecs[idx[:, 1]], vecs[idx[:, 2]]])


def embedding_mlp(
    train: Sequence[Item], test: Sequence[Item], encoder: Encoder, seed: int = 0
) -> np.ndarray:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    tr_t, _, y = _options(train)
    te_t, _, _ = _options(test)
    if not _two_classes(y):
        return np.zeros(len(te_t))
    emb = _embed_triples(encoder, list(tr_t) + list(te_t))
    clf = MLPClassifier(hidden_layer_sizes=MLP_HIDDEN, alpha=1e-3, max_iter=100, batch_size=256,
                        early_stopping=True, random_state=seed)
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # early stop is enough here
        clf.fit(emb[: len(tr_t)], y)
        return np.asarray(clf.predict_proba(emb[len(tr_t):])[:, 1])


def p_rel_scores(test: Sequence[Item], relevance: RelevanceModel, sign: float) -> np.ndarray:
    lps = relevance.log_proba([(it.query.subj, it.query.obj) for it in test])
    out = []
    for it, lp in zip(test, lps, strict=True):
        out += [sign * float(lp[relevance.index[t[1]]]) for t in it.triples]
    return np.array(out)


def run_suite(
    train: Sequence[Item],
    test: Sequence[Item],
    relevance: RelevanceModel | None = None,
    encoder: Encoder | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Every adversary's accuracy on ``test`` (trained on ``train``), with the strongest."""
    if not train or not test:
        return {"n_test": len(test), "adversaries": {}, "strongest": None}
    suite: dict[str, Callable[[], np.ndarray]] = {
        "tfidf_pair_rel_lr": lambda: tfidf_pair_rel_lr(train, test),
        "pair_counts": lambda: pair_counts(train, test),
        # The same counts read the other way: balancing can push the truth's features
        # below the neutral odds (pair_counts under chance), which this one would exploit.
        "pair_counts_least": lambda: -pair_counts(train, test),
    }
    if encoder is not None:
        suite["embedding_mlp"] = lambda: embedding_mlp(train, test, encoder, seed)
    if relevance is not None:
        suite["p_rel_least"] = lambda: p_rel_scores(test, relevance, -1.0)
        suite["p_rel_most"] = lambda: p_rel_scores(test, relevance, 1.0)
    results: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    for name, fn in suite.items():
        t0 = time.perf_counter()
        hits = _per_item(test, fn())
        seconds[name] = round(time.perf_counter() - t0, 2)
        acc = float(np.mean(hits))
        lo, hi = wilson(sum(hits), len(hits))
        results[name] = {"accuracy": round(acc, 4), "ci95": [round(lo, 4), round(hi, 4)]}
    worst = max(results, key=lambda n: results[n]["accuracy"])
    return {
        "n_test": len(test),
        "chance": round(float(np.mean([1 / len(it.triples) for it in test])), 4),
        "adversaries": results,
        "strongest": {"name": worst, **results[worst]},
        "seconds": seconds,
    }


def format_suite(suite: dict[str, Any]) -> list[str]:
    lines = [f"  answer-only adversaries (train -> test, n={suite['n_test']}):"]
    if suite.get("sampled_from"):  # a bounded sample (matching.diagnostics.SUITE_SAMPLE)
        f = suite["sampled_from"]
        lines[0] = (f"  answer-only adversaries (sample: {f['n_train']} of {f['train']} train"
                    f" -> {suite['n_test']} of {f['test']} test items):")
    for name, r in suite.get("adversaries", {}).items():
        lo, hi = r["ci95"]
        lines.append(f"    {name:<20} {r['accuracy']:.3f}  [{lo:.3f}, {hi:.3f}]")
    s = suite.get("strongest")
    if s:
        lo, hi = s["ci95"]
        lines.append(
            f"  STRONGEST answer-only adversary: {s['name']} {s['accuracy']:.3f} "
            f"[{lo:.3f}, {hi:.3f}] (chance {suite['chance']})"
        )
    return lines
