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
- ``<name>_least``: every other model read the other way (the option it rates least
  likely to be the answer wins), as ``pair_counts_least`` reads ``pair_counts``.

Listwise ones, which see all the options of an item together (the models above score each
option alone and cannot see that "on" and "touching" offered together give "touching" away):

- ``listwise_pairs_lr``: a logistic regression over each option's features plus the
  relations offered with it (relation pairs, and relation pairs under the item's subject
  and object).
- ``listwise_stack_gbm``: scikit-learn's histogram gradient boosting over a stack of the
  per-option models' scores (cross-fitted on train in ``STACK_FOLDS`` folds), each score's
  rank and distance inside its item, and how the option stands to the others by the
  relation table (how many it implies or is implied by, the largest P_sim either way).

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
    from matching.items import Item
    from matching.records import Triple
    from matching.relevance import Encoder, RelevanceModel

Z95 = 1.959963984540054
# Hidden layer of the embedding adversary: big enough to learn pair x relation interactions
# of ~80 concepts and ~70 relations, small enough to train in seconds on 2 cores.
MLP_HIDDEN = (128,)
# Fewer training options than this: no early stopping (its held-out tenth would be tiny).
EARLY_STOP_MIN = 200


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


def _word_vectorizer() -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)


def _token_vectorizer(sublinear_tf: bool) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        tokenizer=str.split, token_pattern=None, lowercase=False, sublinear_tf=sublinear_tf
    )


class OptionCounts:
    """Every option of ``items`` tokenised once for the TF-IDF models (caption words,
    interaction features, listwise features), so fits on many subsets of the same items
    (cross-fitting folds) count each caption once; see matching.doc_counts for why a fit on
    a subset gives the numbers a vectorizer fitted on that subset's texts would."""

    def __init__(self, items: Sequence[Item]) -> None:
        from matching.doc_counts import DocCounts

        triples, texts, y = _options(items)
        self.y = y
        sizes = np.array([len(it.triples) for it in items], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.words = DocCounts(_word_vectorizer().build_analyzer(), texts)
        self.inter = DocCounts(
            _token_vectorizer(False).build_analyzer(), [" ".join(_tokens(t)) for t in triples]
        )
        self.listwise = DocCounts(
            _token_vectorizer(True).build_analyzer(),
            [" ".join(t) for it in items for t in _with_tokens(it)],
        )

    def rows(self, item_index: np.ndarray) -> np.ndarray:
        """The option rows of the items at ``item_index`` (in that order)."""
        idx = np.asarray(item_index, dtype=np.int64)
        starts, ends = self.starts[idx], self.starts[idx + 1]
        lengths = ends - starts
        at = np.concatenate([[0], np.cumsum(lengths)])[:-1]
        return np.repeat(starts - at, lengths) + np.arange(int(lengths.sum()))


def _tfidf(counts: Any, fit_rows: np.ndarray, rows: np.ndarray, sublinear: bool) -> tuple[Any, Any]:
    """TF-IDF of ``fit_rows`` (vocabulary and idf fitted on them) and of ``rows``."""
    from sklearn.feature_extraction.text import TfidfTransformer

    x_fit, vocab = counts.fit(fit_rows)
    tf = TfidfTransformer(sublinear_tf=sublinear).fit(x_fit)
    return tf.transform(x_fit, copy=False), tf.transform(counts.transform(rows, vocab), copy=False)


def tfidf_pair_rel_lr_rows(opts: OptionCounts, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """``tfidf_pair_rel_lr`` of the items at indices ``train`` and ``test`` of ``opts``."""
    from scipy.sparse import hstack
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    tr, te = opts.rows(train), opts.rows(test)
    y = opts.y[tr]
    w_tr, w_te = _tfidf(opts.words, tr, te, True)
    i_tr, i_te = _tfidf(opts.inter, tr, te, False)
    x_tr = hstack([w_tr, i_tr]).tocsr()
    x_te = hstack([w_te, i_te]).tocsr()
    if not _two_classes(y):
        return np.zeros(len(te))
    with threadpool_limits(limits=1):
        clf = LogisticRegression(C=4.0, max_iter=2000).fit(x_tr, y)
        return np.asarray(clf.decision_function(x_te))


def _both(
    train: Sequence[Item], test: Sequence[Item]
) -> tuple[OptionCounts, np.ndarray, np.ndarray]:
    n = len(train)
    return OptionCounts([*train, *test]), np.arange(n), np.arange(n, n + len(test))


def tfidf_pair_rel_lr(train: Sequence[Item], test: Sequence[Item]) -> np.ndarray:
    return tfidf_pair_rel_lr_rows(*_both(train, test))


def pair_counts(train: Sequence[Item], test: Sequence[Item]) -> np.ndarray:
    pos: Counter[str] = Counter()
    neg: Counter[str] = Counter()
    tr_t, _, y = _options(train)
    # Counted per distinct (triple, is answer) and scored per distinct triple: options
    # repeat triples, and a count or score depends on nothing else.
    for (t, is_answer), n in Counter(zip(tr_t, y.tolist(), strict=True)).items():
        side = pos if is_answer else neg
        for f in _tokens(t):
            side[f] += n
    k = max(1, round(len(tr_t) / max(1, len(train))) - 1)

    def score(t: tuple[str, str, str]) -> float:
        # The most specific feature seen in train decides (back-off order: pair, subj,
        # obj, relation); k times as many distractors as answers is the neutral ratio.
        for f in reversed(_tokens(t)):
            if pos[f] + neg[f]:
                return math.log((pos[f] + 1) * k / (neg[f] + 1))
        return 0.0

    te_t = _options(test)[0]
    scores = {t: score(t) for t in dict.fromkeys(te_t)}
    return np.array([scores[t] for t in te_t])


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
    # Early stopping holds out a tenth of the options: only when that has both classes.
    clf = MLPClassifier(
        hidden_layer_sizes=MLP_HIDDEN,
        alpha=1e-3,
        max_iter=100,
        batch_size=256,
        early_stopping=len(y) >= EARLY_STOP_MIN,
        random_state=seed,
    )
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # early stop is enough here
        clf.fit(emb[: len(tr_t)], y)
        return np.asarray(clf.predict_proba(emb[len(tr_t) :])[:, 1])


def _with_tokens(item: Item) -> list[list[str]]:
    """Per option: its own features plus what is offered with it (relation pairs, and the
    relation pairs under the item's subject and object), as a listwise model sees them."""
    out = []
    for i, t in enumerate(item.triples):
        s, r, o = (x.replace(" ", "_") for x in t)
        toks = _tokens(t)
        for j, u in enumerate(item.triples):
            if j != i:
                other = u[1].replace(" ", "_")
                toks += [
                    f"with:{r}|{other}",
                    f"subj_with:{s}|{r}|{other}",
                    f"obj_with:{o}|{r}|{other}",
                ]
        out.append(toks)
    return out


def listwise_pairs_lr_rows(opts: OptionCounts, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """``listwise_pairs_lr`` of the items at indices ``train`` and ``test`` of ``opts``."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    tr, te = opts.rows(train), opts.rows(test)
    y = opts.y[tr]
    if not _two_classes(y):
        return np.zeros(len(te))
    x_tr, x_te = _tfidf(opts.listwise, tr, te, True)
    with threadpool_limits(limits=1):
        clf = LogisticRegression(C=4.0, max_iter=2000).fit(x_tr, y)
        return np.asarray(clf.decision_function(x_te))


def listwise_pairs_lr(train: Sequence[Item], test: Sequence[Item]) -> np.ndarray:
    """A logistic regression over each option's features and the relations offered with
    it: learns "when 'on' and 'touching' are offered together, 'touching' is the answer"."""
    return listwise_pairs_lr_rows(*_both(train, test))


# Folds of the cross-fitted per-option scores the stack is trained on.
STACK_FOLDS = 4


def _in_item_ranks(items: Sequence[Item], scores: np.ndarray) -> np.ndarray:
    """Each option's score as rank in its item (0 = lowest, ties averaged, scaled to 0..1)
    and its distance to the item's best and mean."""
    from scipy.stats import rankdata

    sizes = {len(it.triples) for it in items}
    if len(sizes) == 1:  # every item has k + 1 options: one vectorised pass, same figures
        n = sizes.pop()
        v2 = np.asarray(scores, dtype=float).reshape(len(items), n)
        rk2 = (rankdata(v2, axis=1) - 1) / max(1, n - 1)
        return np.column_stack(
            [
                rk2.reshape(-1),
                (v2 - v2.max(axis=1, keepdims=True)).reshape(-1),
                (v2 - v2.mean(axis=1, keepdims=True)).reshape(-1),
            ]
        )
    out, at = [], 0
    for it in items:
        n = len(it.triples)
        v = scores[at : at + n]
        rk = (rankdata(v) - 1) / max(1, n - 1)
        out.append(np.column_stack([rk, v - v.max(), v - v.mean()]))
        at += n
    return np.vstack(out) if out else np.zeros((0, 3))


def _relation_features(items: Sequence[Item]) -> np.ndarray:
    """Per option, how it stands to the other options by the relation-semantics table:
    how many it implies, how many imply it, the largest P(it | other) and P(other | it)."""
    from matching.study_scope import is_implied, sim_probability

    # Options repeat (concept pair, relation) triples: each ordered pair is looked up once.
    memo: dict[tuple[Triple, Triple], tuple[bool, float]] = {}

    def link(a: Triple, b: Triple) -> tuple[bool, float]:
        got = memo.get((a, b))
        if got is None:
            got = memo[(a, b)] = (is_implied(a, b), sim_probability(a, b))
        return got

    rows = []
    for it in items:
        for i, t in enumerate(it.triples):
            others = [u for j, u in enumerate(it.triples) if j != i]
            rows.append(
                [
                    sum(link(t, u)[0] for u in others),
                    sum(link(u, t)[0] for u in others),
                    max((link(u, t)[1] for u in others), default=0.0),
                    max((link(t, u)[1] for u in others), default=0.0),
                ]
            )
    return np.array(rows, dtype=float).reshape(-1, 4)


# A per-option model on rows: scores the options of the items at the second indices of
# ``items``, fitted on those at the first (``opts``: the same items, tokenised once).
RowModel = Callable[["OptionCounts", Sequence["Item"], np.ndarray, np.ndarray], np.ndarray]


def _at(items: Sequence[Item], index: np.ndarray) -> list[Item]:
    return [items[int(i)] for i in index]


def row_models(relevance: RelevanceModel | None = None) -> dict[str, RowModel]:
    """The per-option models the stacks read, by name, in the stack's column order."""
    models: dict[str, RowModel] = {
        "tfidf_pair_rel_lr": lambda opts, _items, fit, score: tfidf_pair_rel_lr_rows(
            opts, fit, score
        ),
        "pair_counts": lambda _opts, items, fit, score: pair_counts(
            _at(items, fit), _at(items, score)
        ),
        "listwise_pairs_lr": lambda opts, _items, fit, score: listwise_pairs_lr_rows(
            opts, fit, score
        ),
    }
    if relevance is not None:
        models["p_rel"] = lambda _opts, items, _fit, score: p_rel_scores(
            _at(items, score), relevance, 1.0
        )
    return models


class _SuiteFits:
    """A suite's train and test items tokenised once, and each model's train -> test
    scores computed once (the suite reports them and the stack reads them too)."""

    def __init__(self, train: Sequence[Item], test: Sequence[Item]) -> None:
        self.items = [*train, *test]
        self.train = np.arange(len(train))
        self.test = np.arange(len(train), len(self.items))
        self.opts = OptionCounts(self.items)
        self._full: dict[str, np.ndarray] = {}

    def full(self, name: str, model: RowModel) -> np.ndarray:
        if name not in self._full:
            self._full[name] = model(self.opts, self.items, self.train, self.test)
        return self._full[name]


def _stack_features(
    train: Sequence[Item],
    test: Sequence[Item],
    relevance: RelevanceModel | None,
    seed: int,
    fits: _SuiteFits | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each per-option model's score (cross-fitted on train: every train item is scored by
    a model that did not see it), with its in-item ranks, plus the table features."""
    fits = fits or _SuiteFits(train, test)
    fold = np.random.default_rng(seed).integers(0, STACK_FOLDS, len(train))
    sizes = np.array([len(it.triples) for it in train])
    starts = np.concatenate([[0], np.cumsum(sizes)])
    tr_cols, te_cols = [], []
    for name, model in row_models(relevance).items():
        col = np.zeros(int(sizes.sum()))
        for f in range(STACK_FOLDS):
            held = np.flatnonzero(fold == f)
            if not len(held):
                continue
            got = model(fits.opts, fits.items, np.flatnonzero(fold != f), held)
            at = 0
            for i in held:
                col[starts[i] : starts[i + 1]] = got[at : at + sizes[i]]
                at += sizes[i]
        te = fits.full(name, model)
        tr_cols += [col[:, None], _in_item_ranks(train, col)]
        te_cols += [te[:, None], _in_item_ranks(test, te)]
    tr_cols.append(_relation_features(train))
    te_cols.append(_relation_features(test))
    return np.hstack(tr_cols), np.hstack(te_cols)


def listwise_stack_gbm(
    train: Sequence[Item],
    test: Sequence[Item],
    relevance: RelevanceModel | None = None,
    seed: int = 0,
    fits: _SuiteFits | None = None,
) -> np.ndarray:
    """Gradient boosting (non-linear) over a stack of the per-option models' cross-fitted
    scores, their ranks inside the item, and how each option stands to the others."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    y = _options(train)[2]
    if not _two_classes(y) or len(train) < 2 * STACK_FOLDS:
        return np.zeros(sum(len(it.triples) for it in test))
    x_tr, x_te = _stack_features(train, test, relevance, seed, fits)
    with threadpool_limits(limits=1):
        clf = HistGradientBoostingClassifier(
            max_iter=200,
            learning_rate=0.05,
            max_leaf_nodes=15,
            l2_regularization=1.0,
            early_stopping=len(y) >= EARLY_STOP_MIN,
            random_state=seed,
        ).fit(x_tr, y)
        return np.asarray(clf.predict_proba(x_te)[:, 1])


def p_rel_scores(test: Sequence[Item], relevance: RelevanceModel, sign: float) -> np.ndarray:
    lps = relevance.log_proba([(it.query.subj, it.query.obj) for it in test])
    out = []
    for it, lp in zip(test, lps, strict=True):
        out += [sign * float(lp[relevance.index[t[1]]]) for t in it.triples]
    return np.array(out)


# Random answer draws behind the chance level of the strongest reading (strongest_null).
NULL_DRAWS = 2000


def hit_matrix(items: Sequence[Item], option_scores: np.ndarray) -> np.ndarray | None:
    """Per item, the expected hit of a reading were option j the answer (ties shared):
    n items x options; None when the items differ in their number of options."""
    sizes = {len(it.triples) for it in items}
    if len(sizes) != 1:
        return None
    v = np.asarray(option_scores, dtype=float).reshape(len(items), sizes.pop())
    top = v >= v.max(axis=1, keepdims=True) - 1e-9
    return np.asarray(top / top.sum(axis=1, keepdims=True), dtype=float)


def strongest_null(hits: dict[str, np.ndarray], seed: int = 0) -> dict[str, float] | None:
    """What the strongest of these readings scores by chance alone: the answers drawn at
    random (one draw shared by every reading, so their correlations are kept), the best
    reading's accuracy per draw; its mean and 95th percentile. The strongest of many
    readings is a maximum and sits above chance even when none of them sees anything."""
    mats = list(hits.values())
    if not mats or len({m.shape for m in mats}) != 1:
        return None
    n, k = mats[0].shape
    rng = np.random.default_rng([seed, n, len(mats)])
    answers = rng.integers(0, k, size=(NULL_DRAWS, n))
    rows = np.arange(n)[None, :]
    best = np.max([m[rows, answers].mean(axis=1) for m in mats], axis=0)
    return {"mean": round(float(best.mean()), 4), "p95": round(float(np.quantile(best, 0.95)), 4)}


def run_suite(
    train: Sequence[Item],
    test: Sequence[Item],
    relevance: RelevanceModel | None = None,
    encoder: Encoder | None = None,
    seed: int = 0,
    hits_out: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Every adversary's accuracy on ``test`` (trained on ``train``), with the strongest
    and the strongest's chance level (``strongest_null``). ``hits_out``: filled with each
    reading's hit matrix (a caller pooling several suites computes their null)."""
    if not train or not test:
        return {"n_test": len(test), "adversaries": {}, "strongest": None}
    fits = _SuiteFits(train, test)  # the stack reuses the per-option models' scores
    per_option = row_models()
    suite: dict[str, Callable[[], np.ndarray]] = {
        "tfidf_pair_rel_lr": lambda: fits.full(
            "tfidf_pair_rel_lr", per_option["tfidf_pair_rel_lr"]
        ),
        # Read the other way too (pair_counts_least, as every model below): balancing can
        # push the truth's features below the neutral odds, which that reading exploits.
        "pair_counts": lambda: fits.full("pair_counts", per_option["pair_counts"]),
        # Listwise: models that see the four options together.
        "listwise_pairs_lr": lambda: fits.full(
            "listwise_pairs_lr", per_option["listwise_pairs_lr"]
        ),
        "listwise_stack_gbm": lambda: listwise_stack_gbm(train, test, relevance, seed, fits),
    }
    if encoder is not None:
        suite["embedding_mlp"] = lambda: embedding_mlp(train, test, encoder, seed)
    if relevance is not None:
        suite["p_rel_least"] = lambda: p_rel_scores(test, relevance, -1.0)
        suite["p_rel_most"] = lambda: p_rel_scores(test, relevance, 1.0)
    results: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    hit_mats: dict[str, np.ndarray] = {}
    for name, fn in suite.items():
        t0 = time.perf_counter()
        scores = fn()
        readings = {name: scores}
        if not name.endswith(("_least", "_most")):
            # The inverted reading: distractors made to look likelier than the truth would
            # put the truth at the bottom, which "pick the least likely" exploits.
            readings[f"{name}_least"] = -scores
        for reading, values in readings.items():
            mat = hit_matrix(test, values)
            if mat is not None:
                hit_mats[reading] = mat
            hits = _per_item(test, values)
            acc = float(np.mean(hits))
            lo, hi = wilson(sum(hits), len(hits))
            results[reading] = {"accuracy": round(acc, 4), "ci95": [round(lo, 4), round(hi, 4)]}
        seconds[name] = round(time.perf_counter() - t0, 2)
    out = {
        "n_test": len(test),
        "chance": round(float(np.mean([1 / len(it.triples) for it in test])), 4),
        "adversaries": results,
        "strongest": strongest_of(results),
        "strongest_null": strongest_null(hit_mats, seed) if len(hit_mats) == len(results) else None,
        "seconds": seconds,
    }
    if hits_out is not None:
        hits_out.update(hit_mats)
    return out


def strongest_of(results: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The adversary with the highest accuracy (the figure a user reads is the worst one)."""
    if not results:
        return None
    worst = max(results, key=lambda n: results[n]["accuracy"])
    return {"name": worst, **results[worst]}


def format_suite(suite: dict[str, Any]) -> list[str]:
    where = {"mc": "mc/, validated", "mc_unvalidated": "mc_unvalidated/, not validated"}.get(
        suite.get("measured_on", ""), ""
    )
    on = f", the items of {where}" if where else ""
    lines = [f"  answer-only adversaries (train -> test, n={suite['n_test']}{on}):"]
    if suite.get("sampled_from"):  # a bounded sample (matching.diagnostics.SUITE_SAMPLE)
        f = suite["sampled_from"]
        lines[0] = (
            f"  answer-only adversaries (sample: {f['n_train']} of {f['train']} train"
            f" -> {suite['n_test']} of {f['test']} test items):"
        )
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
    null = suite.get("strongest_null")
    if null:
        lines.append(
            f"  the strongest of these readings by chance alone (random answers): "
            f"{null['mean']:.3f} on average, 95th percentile {null['p95']:.3f}"
        )
    return lines
