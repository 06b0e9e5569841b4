"""Chance-corrected agreement of True/False votes, from per-Example vote counts.

Fleiss' kappa is ``core.agreement.fleiss_kappa`` (which allows unequal vote counts).
Krippendorff's alpha comes from the ``krippendorff`` package fed the same counts in its
``value_counts`` form; ``core.agreement.krippendorff_alpha`` does the same from per-vote
objects, which the dashboard does not load (it aggregates in SQL).
"""

from __future__ import annotations

from collections.abc import Sequence

from core.agreement import fleiss_kappa as _fleiss


def fleiss_kappa(counts: Sequence[tuple[int, int]]) -> float | None:
    """Fleiss' kappa; ``counts`` = (n True, n False) per Example."""
    return _fleiss([list(c) for c in counts])


def krippendorff_alpha(counts: Sequence[tuple[int, int]]) -> float | None:
    import krippendorff
    import numpy as np

    arr = np.asarray([c for c in counts if sum(c) >= 2], dtype=float)
    if len(arr) == 0 or arr[:, 0].sum() == 0 or arr[:, 1].sum() == 0:
        return None
    return float(krippendorff.alpha(value_counts=arr, level_of_measurement="nominal"))
