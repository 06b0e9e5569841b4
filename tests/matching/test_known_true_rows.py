"""The known-true filter on all (query, confirmed caption) pairs at once strikes out exactly
what the per-pair loop it replaced did."""

from __future__ import annotations

import numpy as np
import pytest

from matching.option_conflicts import Conflicts, table_conflicts
from matching.params import MatchParams
from matching.pipeline import _known_true_rows
from matching.similarity import table_lookup, table_matrices


def _one_row(
    i: int,
    kt: tuple[int, int, int],
    cand: tuple[np.ndarray, np.ndarray, np.ndarray],
    params: MatchParams,
    conflicts: Conflicts | None,
) -> np.ndarray:
    """The per-pair filter as it was (matching.pipeline._known_true_row)."""
    c_rel, c_s, c_o = cand
    k_rel, k_s, k_o = kt
    row_s = c_s[i] if params.remap else c_s[0]
    row_o = c_o[i] if params.remap else c_o[0]
    kt_ids = (np.array(k_rel), np.array(k_s), np.array(k_o))
    row = (c_rel[0], row_s, row_o)
    fwd = table_lookup(*kt_ids, *row, implied=True)
    bad = fwd & table_lookup(*row, *kt_ids, implied=True)
    bad |= (c_rel[0] == k_rel) & (row_s == k_s) & (row_o == k_o)
    if params.table_filter:
        bad |= fwd
    if conflicts is not None:
        bad |= conflicts.lookup(*kt_ids, *row)
    return np.asarray(bad)


@pytest.mark.parametrize(("remap", "table_filter"), [(True, True), (False, True), (True, False)])
def test_known_true_rows_equal_the_per_pair_filter(remap: bool, table_filter: bool) -> None:
    rng = np.random.default_rng(0)
    n_rel = len(table_matrices()[0])
    n, g, concepts = 60, 40, 5
    params = MatchParams(remap=remap, table_filter=table_filter)
    conflicts = table_conflicts() if table_filter else None
    c_rel = rng.integers(0, n_rel, g)[None, :]
    if remap:  # candidates take the query's concepts
        c_s, c_o = rng.integers(0, concepts, (n, 1)), rng.integers(0, concepts, (n, 1))
    else:
        c_s, c_o = rng.integers(0, concepts, (1, g)), rng.integers(0, concepts, (1, g))
    cand = (c_rel, c_s, c_o)
    rows = np.sort(rng.integers(0, n, 300))
    kts = np.column_stack(
        [
            rng.integers(0, n_rel, 300),
            rng.integers(0, concepts, 300),
            rng.integers(0, concepts, 300),
        ]
    )
    got = _known_true_rows(rows, kts, cand, params, conflicts)
    want = np.array(
        [
            _one_row(int(i), (int(a), int(b), int(c)), cand, params, conflicts)
            for i, (a, b, c) in zip(rows, kts, strict=True)
        ]
    )
    assert got.shape == (300, g)
    assert np.array_equal(got, want)
    assert got.any() and not got.all()
