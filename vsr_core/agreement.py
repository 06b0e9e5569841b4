"""Agreement statistics of validation votes (VSR sections 3.2, 4.1 and 4.2). Pure functions, no DB.

Used by the exporter (keep rule, stats.json), the validation queue (``is_decided`` for
adaptive redundancy), matching (only kept Examples take part) and the dashboard.

Vocabulary: an Example has a ``label`` (the caption writer's True/False) and validator
``votes``; a vote *agrees* when it equals the label. Thresholds are proportions and are
compared with exact fractions, so 2/3, 3/4 and 4/6 keep at the default 2/3 and a 1-1 tie
fails (0.6667 read from a settings form is taken as 2/3, see ``as_fraction``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Literal

DEFAULT_THRESHOLD = Fraction(2, 3)
DEFAULT_MIN_VOTES = 3

Threshold = Fraction | float | int
DecideMethod = Literal["next_vote", "exact", "wilson", "beta"]


def as_fraction(threshold: Threshold) -> Fraction:
    """A threshold as an exact fraction; floats snap to the nearest small fraction (0.667 -> 2/3
    only if within 1e-3 of it) so ``2 of 3`` never fails on float rounding."""
    if type(threshold) is Fraction and 0 < threshold.numerator <= threshold.denominator:
        return threshold  # fast path: Fraction comparisons go through slow ABC checks
    if isinstance(threshold, Fraction):
        frac = threshold
    elif isinstance(threshold, int):
        frac = Fraction(threshold)
    else:
        if not math.isfinite(threshold):
            raise ValueError(f"threshold must be a finite number, got {threshold!r}")
        frac = _snapped(float(threshold))
    if not 0 < frac <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    return frac


@lru_cache(maxsize=64)
def _snapped(threshold: float) -> Fraction:
    # Cached: loops call is_kept with the same float setting for every Example, and
    # limit_denominator costs ~50 us (half a minute over a 10x release).
    frac = Fraction(threshold).limit_denominator(100)
    if abs(float(frac) - threshold) > 1e-3:
        frac = Fraction(threshold).limit_denominator(1_000_000)
    return frac


# --- one Example ------------------------------------------------------------------------


def votes_agreeing(label: bool, votes: Sequence[bool]) -> int:
    """How many votes equal the label."""
    return sum(1 for v in votes if bool(v) == bool(label))


def agreement_share(label: bool, votes: Sequence[bool]) -> float | None:
    """Share of votes agreeing with the label; None without votes."""
    return votes_agreeing(label, votes) / len(votes) if votes else None


def is_kept(label: bool, votes: Sequence[bool], threshold: Threshold = DEFAULT_THRESHOLD) -> bool:
    """VSR's keep rule: at least ``threshold`` of the votes agree with the label (no votes: no)."""
    return _kept(votes_agreeing(label, votes), len(votes), as_fraction(threshold))


def _kept(agree: int, n: int, t: Fraction) -> bool:
    # Integer cross-multiplication: exact like Fraction arithmetic, ~20x cheaper per Example.
    return n > 0 and agree * t.denominator >= t.numerator * n


def keep_rule(threshold: Threshold = DEFAULT_THRESHOLD) -> Callable[[int, int], bool]:
    """``kept(n_agree, n_votes)`` for one threshold, for loops over many Examples."""
    t = as_fraction(threshold)
    num, den = t.numerator, t.denominator

    def kept(n_agree: int, n_votes: int) -> bool:
        return n_votes > 0 and n_agree * den >= num * n_votes

    return kept


def is_unanimous(label: bool, votes: Sequence[bool]) -> bool:
    """Every validator agrees with the label (and there is at least one vote)."""
    return bool(votes) and votes_agreeing(label, votes) == len(votes)


@dataclass(frozen=True)
class ExampleAgreement:
    n_votes: int
    n_agree: int
    share: float | None
    kept: bool
    unanimous: bool


def example_agreement(
    label: bool, votes: Sequence[bool], threshold: Threshold = DEFAULT_THRESHOLD
) -> ExampleAgreement:
    agree = votes_agreeing(label, votes)
    n = len(votes)
    return ExampleAgreement(
        n_votes=n,
        n_agree=agree,
        share=agree / n if n else None,
        kept=_kept(agree, n, as_fraction(threshold)),
        unanimous=n > 0 and agree == n,
    )


def is_decided(
    n_agree: int,
    n_votes: int,
    *,
    max_votes: int,
    min_votes: int = DEFAULT_MIN_VOTES,
    threshold: Threshold = DEFAULT_THRESHOLD,
    method: DecideMethod = "next_vote",
    confidence: float = 0.95,
) -> bool:
    """Whether an Example needs no more votes (adaptive redundancy for the validation queue).

    Never before ``min_votes`` votes; always at ``max_votes``. In between:

    - ``next_vote`` (default): one more vote, whichever way it goes, cannot flip
      kept/not-kept. With VSR's 3 votes and 2/3 this serves a 4th vote only to a 2-1 in
      favour of the label (2/3 kept, 2/4 not) and a 5th to a 3-1; unanimous and minority
      labels stop at 3. It asks for extra votes exactly where they can matter, at about a
      tenth of the cost of ``exact`` (which sends even 3-0 to a 5th vote when max is 5).
    - ``exact``: no sequence of further votes up to ``max_votes`` can flip kept/not-kept.
      Kept stays kept iff ``agree >= t * max_votes`` (all remaining votes disagree); not-kept
      stays not-kept iff ``agree + remaining < t * max_votes`` (all remaining agree).
    - ``wilson``: the Wilson score interval of the agreement rate at ``confidence`` lies
      wholly on one side of the threshold.
    - ``beta``: the posterior (uniform Beta(1, 1) prior) puts more than ``confidence`` of its
      mass on one side of the threshold.

    The bound variants ask "would more validators change the answer?" statistically rather
    than in the worst case; they stop earlier on large ``max_votes`` and later on small ones.
    """
    if n_agree < 0 or n_votes < n_agree:
        raise ValueError(f"need 0 <= n_agree <= n_votes, got {n_agree}/{n_votes}")
    if max_votes < 1 or min_votes < 0:
        raise ValueError("max_votes must be >= 1 and min_votes >= 0")
    if n_votes < min(min_votes, max_votes):
        return False
    if n_votes >= max_votes:
        return True
    t = as_fraction(threshold)
    if method == "next_vote":
        kept = _kept(n_agree, n_votes, t)
        return kept == _kept(n_agree, n_votes + 1, t) == _kept(n_agree + 1, n_votes + 1, t)
    if method == "exact":
        remaining = max_votes - n_votes
        if _kept(n_agree, n_votes, t):
            return n_agree >= t * max_votes
        return n_agree + remaining < t * max_votes
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if method == "wilson":
        lo, hi = wilson_interval(n_agree, n_votes, confidence)
        return lo >= t or hi < t
    if method == "beta":
        from scipy.stats import beta  # scipy is a dependency; imported lazily to keep core light

        p_below = float(beta.cdf(float(t), n_agree + 1, n_votes - n_agree + 1))
        return p_below < 1 - confidence or p_below > confidence
    raise ValueError(f"unknown method {method!r}: use next_vote, exact, wilson or beta")


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Wilson score interval for a binomial proportion."""
    if n == 0:
        return 0.0, 1.0
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


# --- a whole dataset --------------------------------------------------------------------


@dataclass(frozen=True)
class ItemVotes:
    """One Example's label and its votes, as (worker key, value) pairs in vote order."""

    item: Hashable
    label: bool
    votes: tuple[tuple[Hashable, bool], ...] = ()
    relation: str | None = None

    @property
    def values(self) -> list[bool]:
        return [v for _, v in self.votes]

    @cached_property
    def n_true(self) -> int:
        return sum(1 for _, v in self.votes if v)

    @property
    def n_false(self) -> int:
        return len(self.votes) - self.n_true


def category_counts(items: Iterable[ItemVotes], include_label: bool = False) -> list[list[int]]:
    """Per item [n_true, n_false] (Fleiss' table); with ``include_label`` the caption writer's
    label counts as one more rater (as the VSR paper's kappa among annotation and humans)."""
    table = []
    for it in items:
        t, f = it.n_true, it.n_false
        if include_label:
            t, f = t + int(it.label), f + int(not it.label)
        table.append([t, f])
    return table


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa (Fleiss 1971) for items x categories counts, allowing unequal rater counts.

    With equal counts per item this is exactly Fleiss (1971) (statsmodels' ``fleiss_kappa``).
    With unequal counts n_i it uses the standard generalisation (Fleiss, Levin & Paik 2003,
    sec. 18.1; the form used by Gwet 2014 for missing ratings): per-item agreement
    P_i = sum_j n_ij (n_ij - 1) / (n_i (n_i - 1)) averaged over items with n_i >= 2, and
    chance agreement from the pooled category shares p_j = sum_i n_ij / sum_i n_i.
    statsmodels refuses unequal counts, hence our own few lines. None if undefined.
    """
    import numpy as np

    if len(table) == 0:
        return None
    counts = np.asarray(table, dtype=float)
    if counts.ndim != 2:
        raise ValueError("table must be items x categories")
    n_i = counts.sum(axis=1)
    counts, n_i = counts[n_i >= 2], n_i[n_i >= 2]
    if len(n_i) == 0:
        return None
    p_cat = counts.sum(axis=0) / n_i.sum()
    p_bar = float(((counts * (counts - 1)).sum(axis=1) / (n_i * (n_i - 1))).mean())
    p_e = float((p_cat * p_cat).sum())
    if p_e >= 1:
        return None  # every rating in one category: kappa is undefined
    return (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha(items: Sequence[ItemVotes]) -> float | None:
    """Krippendorff's alpha (nominal) over validators x items, via the ``krippendorff`` package.

    Repeated votes of one worker on one item (possible in imported releases only) count once
    each in the value-count form, which is what alpha's coincidence matrix uses anyway.
    """
    import krippendorff
    import numpy as np

    counts = np.array([[it.n_true, it.n_false] for it in items if len(it.votes) >= 2], dtype=float)
    if counts.size == 0 or counts.sum(axis=0).min() == 0:
        return None
    return float(krippendorff.alpha(value_counts=counts, level_of_measurement="nominal"))


def pair_disagreement(n_true: int, n_false: int) -> float | None:
    """Probability that two distinct votes drawn at random disagree (VSR Figure 7)."""
    n = n_true + n_false
    if n < 2:
        return None
    return 2 * n_true * n_false / (n * (n - 1))


def per_relation_disagreement(
    items: Iterable[ItemVotes], include_label: bool = False
) -> dict[str, dict[str, float | int]]:
    """Per relation: number of Examples and the mean pair-disagreement probability.

    VSR Figure 7 plots "the probability of two randomly chosen annotators disagreeing with
    each other" per relation; we average the per-Example probability over the relation's
    Examples (validators only, or with the caption writer's label as one more annotator).
    """
    acc: dict[str, list[float]] = defaultdict(list)
    for it in items:
        t, f = it.n_true, it.n_false
        if include_label:
            t, f = t + int(it.label), f + int(not it.label)
        p = pair_disagreement(t, f)
        if p is not None and it.relation is not None:
            acc[it.relation].append(p)
    return {
        rel: {"n": len(ps), "disagreement": sum(ps) / len(ps)} for rel, ps in sorted(acc.items())
    }


@dataclass
class WorkerAgreement:
    n_votes: int = 0
    agree_label: int = 0
    n_majority: int = 0  # votes on items where the other votes had a strict majority
    agree_majority: int = 0

    @property
    def label_share(self) -> float | None:
        return self.agree_label / self.n_votes if self.n_votes else None

    @property
    def majority_share(self) -> float | None:
        return self.agree_majority / self.n_majority if self.n_majority else None


def per_worker_agreement(items: Iterable[ItemVotes]) -> dict[Hashable, WorkerAgreement]:
    """Per validator: agreement with the label and with the majority of the *other* votes.

    Leave-one-out majority so a validator is not compared with themselves; items where the
    other votes tie (or there are none) do not count towards the majority share.
    """
    out: dict[Hashable, WorkerAgreement] = defaultdict(WorkerAgreement)
    for it in items:
        n_true, n = it.n_true, len(it.votes)
        for worker, value in it.votes:
            w = out[worker]
            w.n_votes += 1
            w.agree_label += value == it.label
            others_true = n_true - int(value)
            others_false = (n - 1) - others_true
            if others_true != others_false:
                w.n_majority += 1
                w.agree_majority += value == (others_true > others_false)
    return dict(out)


@dataclass(frozen=True)
class DatasetAgreement:
    n_items: int
    n_votes: int
    n_kept: int
    n_unanimous: int
    kept_share: float | None
    unanimous_share: float | None
    fleiss_kappa: float | None
    krippendorff_alpha: float | None
    votes_per_item: dict[int, int] = field(default_factory=dict)
    threshold: str = "2/3"


def dataset_agreement(
    items: Sequence[ItemVotes], threshold: Threshold = DEFAULT_THRESHOLD
) -> DatasetAgreement:
    """The numbers VSR section 4.1 reports, plus Fleiss' kappa and Krippendorff's alpha."""
    t = as_fraction(threshold)
    n = len(items)
    kept = unanimous = votes = 0
    dist: dict[int, int] = defaultdict(int)
    for it in items:
        k = len(it.votes)
        agree = votes_agreeing(it.label, it.values)
        votes += k
        dist[k] += 1
        kept += _kept(agree, k, t)
        unanimous += k > 0 and agree == k
    return DatasetAgreement(
        n_items=n,
        n_votes=votes,
        n_kept=kept,
        n_unanimous=unanimous,
        kept_share=kept / n if n else None,
        unanimous_share=unanimous / n if n else None,
        fleiss_kappa=fleiss_kappa(category_counts(items)),
        krippendorff_alpha=krippendorff_alpha(items),
        votes_per_item=dict(sorted(dist.items())),
        threshold=f"{t.numerator}/{t.denominator}",
    )


# --- model-based aggregation ------------------------------------------------------------

LabelModel = Literal["majority", "dawid-skene", "mace"]


@dataclass(frozen=True)
class AggregateLabel:
    label: bool
    confidence: float  # posterior probability of ``label`` (majority: share of votes)


def aggregate_labels(
    items: Sequence[ItemVotes], model: LabelModel = "dawid-skene", seed: int = 0
) -> dict[Hashable, AggregateLabel]:
    """An alternative label per item from the votes alone (crowd-kit), ignoring the caption
    writer's label: ``majority`` (ties -> None, left out), ``dawid-skene`` (Dawid & Skene 1979)
    or ``mace`` (Hovy et al. 2013). Items without votes are left out."""
    if model not in ("majority", "dawid-skene", "mace"):
        raise ValueError(f"unknown label model {model!r}: use majority, dawid-skene or mace")
    voted = [it for it in items if it.votes]
    if model == "majority":
        out = {}
        for it in voted:
            t, f = it.n_true, it.n_false
            if t != f:
                out[it.item] = AggregateLabel(t > f, max(t, f) / (t + f))
        return out
    if not voted:
        return {}
    import pandas as pd
    from crowdkit.aggregation import MACE, DawidSkene

    rows = [(i, str(w), int(v)) for i, it in enumerate(voted) for w, v in it.votes]
    df = pd.DataFrame(rows, columns=["task", "worker", "label"]).drop_duplicates(
        ["task", "worker"]  # crowd-kit wants one label per (task, worker)
    )
    if model == "dawid-skene":
        fitted = DawidSkene(n_iter=100).fit(df).probas_
    else:
        fitted = MACE(n_restarts=3, n_iter=50, random_state=seed).fit(df).probas_
    if fitted is None:
        return {}
    proba = fitted
    proba = proba.reindex(columns=[0, 1], fill_value=0.0)
    out = {}
    for task, p0, p1 in zip(proba.index, proba[0], proba[1], strict=True):
        lab = bool(p1 > p0) if p1 != p0 else bool(voted[int(task)].label)
        out[voted[int(task)].item] = AggregateLabel(lab, float(max(p0, p1)))
    return out
