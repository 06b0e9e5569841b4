"""Kept counts: the one definition of "kept" / "rejected" for every figure that reports it.

The dashboard overview, the quality page, stats.json and the dataset card all count
Examples through ``kept_counts`` (in Python) or ``kept_clause`` (in SQL, the same integer
comparison) so they cannot disagree (docs/dashboard.md). An Example is kept when at least
``keep_threshold`` of the votes it has so far agree with its label (the exact-fraction rule
of ``vsr_core.agreement``); rejected when it has votes and the rule fails; unvoted otherwise.
Whether the validation queue still wants more votes for it is a separate figure
(``provisional``): a 2-1 Example waiting for its fourth vote is kept now and may not be after
that vote, exactly as an export built at this moment would treat it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_

from vsr_core.agreement import Threshold, as_fraction, keep_rule


@dataclass(frozen=True)
class KeptCounts:
    examples: int
    voted: int
    kept: int
    rejected: int
    unanimous: int

    @property
    def unvoted(self) -> int:
        return self.examples - self.voted

    @property
    def kept_share(self) -> float | None:
        """Kept among the Examples that have votes (VSR reports 85.6 % on its release)."""
        return self.kept / self.voted if self.voted else None

    @property
    def unanimous_share(self) -> float | None:
        return self.unanimous / self.voted if self.voted else None


def kept_counts(histogram: Iterable[tuple[int, int, int]], threshold: Threshold) -> KeptCounts:
    """Count Examples from ``(n_agree, n_votes, how_many)`` rows (a GROUP BY in SQL, or one
    row per Example with ``how_many`` 1)."""
    kept_rule = keep_rule(threshold)
    examples = voted = kept = unanimous = 0
    for agree, n, count in histogram:
        examples += count
        if n > 0:
            voted += count
            kept += count * kept_rule(agree, n)
            unanimous += count * (agree == n)
    return KeptCounts(examples, voted, kept, voted - kept, unanimous)


def kept_clause(agree: Any, n: Any, threshold: Threshold) -> ColumnElement[bool]:
    """The keep rule as a SQL condition on an agreeing-votes and a votes column: the exact
    integer comparison agree/n >= num/den of ``keep_rule``, so the dashboard's GROUP BYs keep
    the same Examples as the exporter."""
    frac = as_fraction(threshold)
    return and_(n > 0, agree * frac.denominator >= n * frac.numerator)
