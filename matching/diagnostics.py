"""Diagnostics of a matching run: is it hard for text-only models and still fair to people?

- answer-only baseline (sees only the choices): per choice, log-odds of "is the answer" for
  its relation and concept words, counted on the *train* items (naive Bayes with add-one
  smoothing), scored on test. Every response is used once as truth and once per round as a
  distractor, so this should sit at chance 1/(k+1).
- text-only baseline (sees the concepts and the choices): the P_rel model trained on train,
  scored on test. Matching optimised against it, so it should be at or below chance.
- share of distractors the relation table marks as equivalent to or entailed by the truth
  (0 by default: the table filter excludes them), duplicate choices (must be 0), and the
  relation distribution of distractors vs. correct answers (total variation distance).

Ties between choices count as a fair coin among the tied ones (expected accuracy).
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from matching.params import SUITE_SAMPLE as SUITE_SAMPLE
from matching.pipeline import Item, MatchResult
from matching.relevance import RelevanceModel
from matching.study_scope import is_equivalent, is_implied, sim_probability


def _expected_hit(scores: Sequence[float], answer: int) -> float:
    best = max(scores)
    top = [i for i, s in enumerate(scores) if math.isclose(s, best, rel_tol=0, abs_tol=1e-9)]
    return 1.0 / len(top) if answer in top else 0.0


def _features(triple: tuple[str, str, str]) -> list[str]:
    return [f"rel={triple[1]}", f"subj={triple[0]}", f"obj={triple[2]}"]


def answer_only_accuracy(train: Sequence[Item], test: Sequence[Item]) -> float | None:
    if not train or not test:
        return None
    pos: Counter[str] = Counter()
    neg: Counter[str] = Counter()
    for it in train:
        for i, t in enumerate(it.triples):
            (pos if i == it.answer_index else neg).update(_features(t))
    n_pos = sum(pos.values()) or 1
    n_neg = sum(neg.values()) or 1

    def score(t: tuple[str, str, str]) -> float:
        return sum(
            math.log((pos[f] + 1) / n_pos) - math.log((neg[f] + 1) / n_neg) for f in _features(t)
        )

    return float(
        np.mean([_expected_hit([score(t) for t in it.triples], it.answer_index) for it in test])
    )


def text_only_scores(
    item: Item, relevance: RelevanceModel, remap: bool, lp: np.ndarray | None = None
) -> list[float]:
    """log P_rel of each choice for the item's concepts (``lp``: its precomputed row)."""
    q = item.query
    if lp is None:
        lp = relevance.log_proba([(q.subj, q.obj)])[0]
    scores = [float(lp[relevance.index[t[1]]]) for t in item.triples]
    if not remap:
        sim_s = relevance.concept_similarity([q.subj], [t[0] for t in item.triples])[0]
        sim_o = relevance.concept_similarity([q.obj], [t[2] for t in item.triples])[0]
        scores = [
            s + math.log(max((1 + a) / 2 * (1 + b) / 2, 1e-12))
            for s, a, b in zip(scores, sim_s, sim_o, strict=True)
        ]
    return scores


def text_only_accuracy(
    test: Sequence[Item], relevance: RelevanceModel, remap: bool
) -> float | None:
    if not test:
        return None
    lps = relevance.log_proba([(it.query.subj, it.query.obj) for it in test])  # one batch
    return float(
        np.mean(
            [
                _expected_hit(text_only_scores(it, relevance, remap, lp), it.answer_index)
                for it, lp in zip(test, lps, strict=True)
            ]
        )
    )


def relation_distribution(items: Sequence[Item]) -> dict[str, Any]:
    correct: Counter[str] = Counter()
    distractor: Counter[str] = Counter()
    for it in items:
        correct[it.triples[it.answer_index][1]] += 1
        distractor.update(t[1] for t in it.distractor_triples)
    nc, nd = sum(correct.values()) or 1, sum(distractor.values()) or 1
    rels = set(correct) | set(distractor)
    tv = 0.5 * sum(abs(correct[r] / nc - distractor[r] / nd) for r in rels)
    return {
        "correct": dict(correct.most_common()),
        "distractor": dict(distractor.most_common()),
        "total_variation": round(tv, 4),
    }


def bounded_sample(items: Sequence[Item], limit: int | None, seed: int) -> list[Item]:
    """At most ``limit`` items drawn without replacement (order kept); all when None/0."""
    if not limit or len(items) <= limit:
        return list(items)
    keep = np.sort(np.random.default_rng([seed, len(items)]).choice(len(items), limit, False))
    return [items[i] for i in keep]


def _item_key(it: Item) -> tuple[str, str, tuple[str, ...]]:
    return (it.query.image, it.query.caption, tuple(it.choices))


def measured_suite(
    train: Sequence[Item],
    test: Sequence[Item],
    encoder: Any,
    seed: int,
    suite_sample: int | None = SUITE_SAMPLE,
    hits_out: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """The held-out adversary suite (matching.adversaries) on exactly these items, as
    `vsr match --report` and build-dataset's stats.json and card compute it: P_rel fitted
    anew on the train items' answers (so the figure depends on the items alone, not on the
    queries that found no item), at most ``suite_sample`` items of each side."""
    from matching.adversaries import run_suite

    # One order whatever order the items come in (build-dataset shuffles its files): the
    # same items give the same figure.
    train = sorted(train, key=_item_key)
    test = sorted(test, key=_item_key)
    suite_train = bounded_sample(train, suite_sample, seed)
    suite_test = bounded_sample(test, suite_sample, seed + 1)
    relevance = None
    if encoder is not None and train:
        relevance = RelevanceModel(encoder, seed=seed).fit([it.query for it in train])
    suite = run_suite(suite_train, suite_test, relevance, encoder, seed, hits_out)
    if (len(suite_train), len(suite_test)) != (len(train), len(test)):
        suite["sampled_from"] = {
            "train": len(train),
            "test": len(test),
            "n_train": len(suite_train),
        }
    return suite


# Names of the adversaries fitted on dev instead of train start with this.
DEV_FITTED = "dev_fit:"


def measured_suites(
    train: Sequence[Item],
    dev: Sequence[Item],
    test: Sequence[Item],
    encoder: Any,
    seed: int,
    suite_sample: int | None = SUITE_SAMPLE,
) -> dict[str, Any]:
    """:func:`measured_suite` fitted on train, plus the same suite fitted on dev alone
    (names ``dev_fit:...``), both scored on test: dev is filtered like test and train is
    not, so a model of dev sees what the filter leaves in test. ``strongest`` is over both."""
    from matching.adversaries import strongest_null, strongest_of

    hits: dict[str, np.ndarray] = {}
    suite = (
        measured_suite(train, test, encoder, seed, suite_sample, hits)
        if train
        else {"n_test": len(test), "adversaries": {}, "strongest": None}
    )
    if dev and test:
        with warnings.catch_warnings():
            # A small dev (a few dozen items) makes scikit-learn warn about its size; the
            # interval already says how little such a figure means.
            warnings.simplefilter("ignore", UserWarning)
            dev_hits: dict[str, np.ndarray] = {}
            on_dev = measured_suite(dev, test, encoder, seed, suite_sample, dev_hits)
        for name, figure in on_dev["adversaries"].items():
            suite["adversaries"][DEV_FITTED + name] = figure
        hits.update({DEV_FITTED + name: m for name, m in dev_hits.items()})
        suite["chance"] = on_dev["chance"]
        suite["n_dev"] = len(dev)
        suite["strongest"] = strongest_of(suite["adversaries"])
        pooled = len(hits) == len(suite["adversaries"])
        suite["strongest_null"] = strongest_null(hits, seed) if pooled else None
    return suite


def diagnose(
    result: MatchResult,
    relevance: RelevanceModel,
    adversaries: bool = True,
    suite_sample: int | None = SUITE_SAMPLE,
    published: Callable[[Item], bool] | None = None,
) -> dict[str, Any]:
    """All figures of a run, JSON-ready (stored in MatchRun.diagnostics). ``adversaries``:
    run the held-out answer-only suite (matching.adversaries) on train -> test, on at most
    ``suite_sample`` items of each (None or 0: all); ``published``: which dev and test items
    the export writes (the suite is fitted on those dev items and measured on those test
    items)."""
    p = result.params
    items = result.items
    n_distractors = sum(len(it.triples) - 1 for it in items)
    implied = duplicates = equivalent_pairs = known_true = 0
    p_sims: list[float] = []
    for it in items:
        truth = it.triples[it.answer_index]
        texts = [c.strip().lower() for c in it.choices]
        duplicates += int(len(set(texts)) < len(texts))
        for a in range(len(it.triples)):
            for b in range(a + 1, len(it.triples)):
                equivalent_pairs += int(is_equivalent(it.triples[a], it.triples[b]))
        for d in it.distractor_triples:
            implied += int(is_implied(truth, d))
            p_sims.append(sim_probability(truth, d))
            known = result.known_true.get(it.query.image, ())
            known_true += int(any(is_implied(kt, d) for kt in known if kt != truth))
    train, dev, test = result.items_in("train"), result.items_in("dev"), result.items_in("test")
    if published is not None:
        dev = [it for it in dev if published(it)]
        test = [it for it in test if published(it)]
    suite = (
        measured_suites(train, dev, test, relevance.encoder, p.seed, suite_sample)
        if adversaries
        else {"n_test": len(test), "adversaries": {}, "strongest": None}
    )
    # Nothing is validated when a run is made: its items are what build-dataset writes to
    # mc_unvalidated/ (mc/ takes them one by one as validators reject every distractor).
    suite["measured_on"] = "mc_unvalidated"
    strongest = suite.get("strongest") or {}
    return {
        "answer_only_adversaries": suite,
        "strongest_adversary": strongest.get("name"),
        "strongest_adversary_accuracy": strongest.get("accuracy"),
        "strongest_adversary_ci95": strongest.get("ci95"),
        "params": p.as_dict(),
        "queries": result.queries,
        "items": {s: len(result.items_in(s)) for s in result.queries},
        "unmatched": result.unmatched,
        "filtered_predictable": result.filtered,
        "chance": round(1 / (p.k + 1), 4),
        "answer_only_accuracy": _r(answer_only_accuracy(train, test)),
        "text_only_accuracy": _r(text_only_accuracy(test, relevance, p.remap)),
        "implied_by_truth_share": _r(implied / n_distractors if n_distractors else 0.0),
        "known_true_distractors": known_true,
        "duplicate_choice_items": duplicates,
        "equivalent_choice_pairs": equivalent_pairs,
        "mean_p_sim_table": _r(float(np.mean(p_sims)) if p_sims else None),
        "relation_distribution": relation_distribution(items),
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
    }


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


SUMMARY_KEYS = (
    "chance",
    "strongest_adversary_accuracy",
    "answer_only_accuracy",
    "text_only_accuracy",
    "implied_by_truth_share",
    "duplicate_choice_items",
    "mean_p_sim_table",
)


def summary_row(diag: dict[str, Any]) -> dict[str, Any]:
    row = {k: diag[k] for k in SUMMARY_KEYS}
    row["h"] = diag["params"]["h"]
    row["items"] = sum(diag["items"].values())
    row["relation_tv"] = diag["relation_distribution"]["total_variation"]
    return row


def format_report(diag: dict[str, Any]) -> str:
    """A few readable lines for the terminal."""
    from matching.adversaries import format_suite

    p = diag["params"]

    def shown(key: str) -> str:
        # A figure that needs test items is None without them: said in words.
        value = diag.get(key)
        return "not measured (no test items)" if value is None else _cell(value)

    lines = [
        f"adversarial matching: h={p['h']} k={p['k']} remap={p['remap']} "
        f"table_filter={p['table_filter']} balance={p.get('balance') or 'off'}",
        "  items per split: "
        + ", ".join(f"{s}={n}" for s, n in diag["items"].items())
        + "  (queries without k distractors: "
        + ", ".join(f"{s}={n}" for s, n in diag["unmatched"].items())
        + "; dropped as predictable: "
        + (
            ", ".join(f"{s}={n}" for s, n in (diag.get("filtered_predictable") or {}).items())
            or "none"
        )
        + ")",
        f"  chance                      {shown('chance')}",
        *format_suite(diag.get("answer_only_adversaries") or {"n_test": 0}),
        f"  answer-only accuracy (test) {shown('answer_only_accuracy')}  (naive Bayes, "
        "relation/subject/object separately; the suite above is the honest figure)",
        f"  text-only accuracy (test)   {shown('text_only_accuracy')}",
        f"  distractors implied by truth (table) {shown('implied_by_truth_share')}",
        f"  distractors known true for the image {shown('known_true_distractors')}",
        f"  items with duplicate choices {diag['duplicate_choice_items']}, "
        f"equivalent choice pairs {diag['equivalent_choice_pairs']}",
        f"  mean table P_sim(truth, distractor) {shown('mean_p_sim_table')}",
        f"  relation distribution distractor vs correct: total variation "
        f"{_cell(diag['relation_distribution']['total_variation'])}",
    ]
    return "\n".join(lines)


def format_sweep(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        "h",
        "items",
        "chance",
        "strongest",
        "answer_only",
        "text_only",
        "implied",
        "dup",
        "p_sim",
        "rel_tv",
    )
    keys = (
        "h",
        "items",
        "chance",
        "strongest_adversary_accuracy",
        "answer_only_accuracy",
        "text_only_accuracy",
        "implied_by_truth_share",
        "duplicate_choice_items",
        "mean_p_sim_table",
        "relation_tv",
    )
    out = ["  ".join(f"{h:>11}" for h in head)]
    for row in rows:
        out.append("  ".join(f"{_cell(row[k]):>11}" for k in keys))
    return "\n".join(out)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def sweep(
    records: Sequence[Any],
    relevance: RelevanceModel,
    similarity: Any,
    params: Any,
    hs: Sequence[float],
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Re-run matching for each h (P_rel already trained) and summarise each run."""
    from dataclasses import replace

    from matching.pipeline import run_matching

    rows = []
    for h in hs:
        res = run_matching(
            records, relevance, similarity, replace(params, h=float(h)), fit=False, **kwargs
        )
        rows.append(summary_row(diagnose(res, relevance)))
    return rows
