"""Kept counts: the one definition of "kept" / "rejected" / "excluded" for every figure that
reports it.

The dashboard overview, the quality page, the data browser, stats.json, the dataset card,
the export's splits and matching all decide an Example through ``verdict`` (in Python) or
``kept_clause`` / ``verdict_clause`` (in SQL, the same comparisons) and count through
``kept_counts``, so they cannot disagree (docs/dashboard.md, docs/validation.md).

In order:

1. An adjudicated Example (vsr_core.adjudication) follows its adjudication: a final label
   keeps it (with that label), ``excluded`` leaves it out, whatever its votes say.
2. Otherwise, without votes it is unvoted.
3. Otherwise, when the study's keep rule is a label model (``dawid-skene``, ``mace``) and
   that model's last fit labelled it (vsr_core.label_fit), it is kept when the model's label
   equals its own and rejected when not. An Example voted on after the fit has no fitted
   label yet and falls back to 4 until the next fit (the pages say how stale the fit is).
4. Otherwise the agreement rule: kept when at least ``keep_threshold`` of its votes agree
   with its label (the exact-fraction rule of ``vsr_core.agreement``), rejected when not.

Whether the validation queue still wants more votes for it is a separate figure
(``provisional``): a 2-1 Example waiting for its fourth vote is kept now and may not be after
that vote, exactly as an export built at this moment would treat it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, and_, case, literal, or_

from vsr_core.agreement import Threshold, as_fraction, keep_rule
from vsr_core.models import AdjudicationDecision, KeepRule

EXCLUDED = AdjudicationDecision.excluded.value
FINAL_LABELS = (AdjudicationDecision.true.value, AdjudicationDecision.false.value)


class Verdict(StrEnum):
    kept = "kept"
    rejected = "rejected"
    excluded = "excluded"
    unvoted = "unvoted"


def verdict(
    agree: int,
    n: int,
    threshold: Threshold,
    *,
    adjudication: str | None = None,
    model_agrees: bool | None = None,
) -> Verdict:
    """One Example's verdict (the module's rule): ``adjudication`` its AdjudicationDecision
    value, ``model_agrees`` whether the keep rule's label model labelled it as its label
    (None: no model in the rule, or not in the model's last fit)."""
    if adjudication == EXCLUDED:
        return Verdict.excluded
    if adjudication in FINAL_LABELS:
        return Verdict.kept
    if n <= 0:
        return Verdict.unvoted
    if model_agrees is not None:
        return Verdict.kept if model_agrees else Verdict.rejected
    return Verdict.kept if keep_rule(threshold)(agree, n) else Verdict.rejected


def final_label(label: bool, adjudication: str | None) -> bool:
    """The label an Example carries into the dataset: the adjudicated one, else its own."""
    if adjudication in FINAL_LABELS:
        return adjudication == AdjudicationDecision.true.value
    return label


@dataclass(frozen=True)
class KeptCounts:
    examples: int
    voted: int
    kept: int
    rejected: int
    unanimous: int
    excluded: int = 0  # adjudicated as excluded
    adjudicated: int = 0  # settled by an adjudication (kept or excluded)
    by_model: int = 0  # decided by the keep rule's label model (not adjudicated)

    @property
    def unvoted(self) -> int:
        return self.examples - self.voted

    @property
    def judged(self) -> int:
        """Examples with a verdict: kept, rejected or excluded (the voted ones, plus any
        adjudicated before its first vote)."""
        return self.kept + self.rejected + self.excluded

    @property
    def kept_share(self) -> float | None:
        """Kept among the judged Examples (VSR reports 85.6 % on its release)."""
        return self.kept / self.judged if self.judged else None

    @property
    def unanimous_share(self) -> float | None:
        return self.unanimous / self.voted if self.voted else None


def kept_counts(histogram: Iterable[tuple[Any, ...]], threshold: Threshold) -> KeptCounts:
    """Count Examples from rows ``(n_agree, n_votes, how_many)`` or ``(n_agree, n_votes,
    how_many, adjudication, model_agrees)`` (a GROUP BY in SQL, or one row per Example with
    ``how_many`` 1); the last two as ``verdict`` takes them."""
    rule = keep_rule(threshold)
    examples = voted = kept = rejected = excluded = unanimous = adjudicated = by_model = 0
    for row in histogram:
        agree, n, count = int(row[0]), int(row[1]), int(row[2])
        adj = row[3] if len(row) > 3 else None
        model = row[4] if len(row) > 4 else None
        examples += count
        if n > 0:
            voted += count
            unanimous += count * (agree == n)
        if adj is not None:
            adjudicated += count
            if adj == EXCLUDED:
                excluded += count
            else:
                kept += count
        elif n > 0:
            if model is not None:
                by_model += count
                ok = bool(model)
            else:
                ok = rule(agree, n)
            kept += count * ok
            rejected += count * (not ok)
    return KeptCounts(examples, voted, kept, rejected, unanimous, excluded, adjudicated, by_model)


def kept_clause(
    agree: Any,
    n: Any,
    threshold: Threshold,
    *,
    adjudication: Any = None,
    model_agrees: Any = None,
) -> ColumnElement[bool]:
    """The keep rule as a SQL condition: ``verdict`` == kept, with the agreement rule as the
    exact integer comparison agree/n >= num/den of ``keep_rule``, so the dashboard's GROUP
    BYs keep the same Examples as the exporter. ``adjudication``: a column of the Example's
    adjudication decision (NULL: none); ``model_agrees``: a 0/1 column, NULL without a label."""
    frac = as_fraction(threshold)
    by_votes = and_(n > 0, agree * frac.denominator >= n * frac.numerator)
    if model_agrees is not None:
        by_votes = or_(and_(model_agrees.is_(None), by_votes), and_(n > 0, model_agrees == 1))
    if adjudication is None:
        return by_votes
    return or_(adjudication.in_(FINAL_LABELS), and_(adjudication.is_(None), by_votes))


def verdict_clause(
    agree: Any,
    n: Any,
    threshold: Threshold,
    *,
    adjudication: Any = None,
    model_agrees: Any = None,
) -> ColumnElement[str]:
    """``verdict`` as a SQL CASE giving the Verdict's value."""
    kept = kept_clause(agree, n, threshold, adjudication=adjudication, model_agrees=model_agrees)
    whens: list[tuple[Any, Any]] = []
    if adjudication is not None:
        whens.append((adjudication == EXCLUDED, literal(Verdict.excluded.value)))
    whens += [
        (kept, literal(Verdict.kept.value)),
        (n > 0, literal(Verdict.rejected.value)),
    ]
    return case(*whens, else_=literal(Verdict.unvoted.value))


def model_of(rule: str) -> str | None:
    """The label model a keep rule reads (None: the agreement rule)."""
    return None if rule == KeepRule.agreement.value else rule
