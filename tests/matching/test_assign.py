"""The matching solvers (matching.assign) against brute force and against each other."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from matching.assign import solve


def _expand(weights: np.ndarray, cap: np.ndarray) -> np.ndarray:
    return weights[:, np.repeat(np.arange(len(cap)), cap)]


def _brute_force(weights: np.ndarray, cap: np.ndarray) -> tuple[int, float]:
    """(most rows matched, best total weight among those) over every assignment."""
    n, g = weights.shape
    best = (-1, -np.inf)
    for choice in itertools.product(range(-1, g), repeat=n):
        counts = np.bincount([c for c in choice if c >= 0], minlength=g)
        if (counts > cap).any():
            continue
        if any(c >= 0 and not np.isfinite(weights[i, c]) for i, c in enumerate(choice)):
            continue
        matched = sum(c >= 0 for c in choice)
        total = sum(weights[i, c] for i, c in enumerate(choice) if c >= 0)
        best = max(best, (matched, total))
    return best


def _score(weights: np.ndarray, cap: np.ndarray, out: np.ndarray) -> tuple[int, float]:
    assert out.shape == (weights.shape[0],)
    counts = np.bincount(out[out >= 0], minlength=len(cap))
    assert (counts <= cap).all(), "a group is used more often than it has responses"
    for i, c in enumerate(out):
        if c >= 0:
            assert np.isfinite(weights[i, c]), "a forbidden pair was matched"
    return int((out >= 0).sum()), float(sum(weights[i, c] for i, c in enumerate(out) if c >= 0))


@pytest.mark.parametrize("seed", range(12))
def test_all_solvers_find_the_brute_force_optimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, g = 5, 3
    weights = np.log(rng.uniform(0.01, 1.0, size=(n, g)))
    weights[rng.uniform(size=(n, g)) < 0.3] = -np.inf  # forbidden pairs
    cap = rng.integers(0, 3, size=g)
    best = _brute_force(weights, cap)
    for method in ("dense", "grouped", "grouped_full", "sparse"):
        got = _score(weights, cap, solve(weights, cap, method=method, top_k=50))
        assert got[0] == best[0], method
        assert got[1] == pytest.approx(best[1], abs=1e-9), method


def test_plain_assignment_uses_every_response_once() -> None:
    # Without groups (capacity 1 each) it is VCR's N x N assignment with the diagonal excluded.
    rng = np.random.default_rng(1)
    n = 40
    w = np.log(rng.uniform(0.01, 1, size=(n, n)))
    np.fill_diagonal(w, -np.inf)
    out = solve(w, method="dense")
    assert sorted(out.tolist()) == list(range(n))
    assert all(out[i] != i for i in range(n))


def test_grouped_equals_dense_on_the_expanded_matrix_with_ties() -> None:
    # Remapped responses with the same relation are identical: many exact ties.
    rng = np.random.default_rng(2)
    n, g = 300, 12
    rel = rng.integers(0, g, size=n)
    cap = np.bincount(rel, minlength=g)
    w = np.round(np.log(rng.dirichlet(np.ones(g), size=n) + 1e-4), 1)
    w[np.arange(n), rel] = -np.inf  # a query never takes its own relation
    grouped = _score(w, cap, solve(w, cap, method="grouped"))
    dense = _score(w, cap, solve(w, cap, method="dense"))
    assert grouped[0] == dense[0] == n
    assert grouped[1] == pytest.approx(dense[1], abs=1e-6)
    # and the LP optimum equals a plain LSA on the fully expanded n x n matrix
    from scipy.optimize import linear_sum_assignment

    full = _expand(np.where(np.isfinite(w), w, -1e6), cap)
    r, c = linear_sum_assignment(full, maximize=True)
    assert full[r, c].sum() == pytest.approx(grouped[1], abs=1e-6)


@pytest.mark.parametrize("bindings", [True, False])
def test_grouped_column_generation_adds_the_edges_the_optimum_needs(
    monkeypatch: pytest.MonkeyPatch, bindings: bool
) -> None:
    # Every row likes groups 0-9 best, but they hold 30 responses for 200 rows: the optimum
    # needs edges far below each row's first GROUPED_START, which only the price check adds.
    # Both paths: highspy (matching.highs_lp) and the linprog fallback.
    from matching import assign, highs_lp
    from matching.assign import GROUPED_START

    if not bindings:
        monkeypatch.setattr(highs_lp, "available", lambda: False)

    rng = np.random.default_rng(4)
    n, g = 200, 24
    w = np.round(np.log(rng.uniform(0.01, 1, size=(n, g))), 1)
    w[:, :10] += 5.0
    w[rng.uniform(size=(n, g)) < 0.1] = -np.inf
    cap = np.array([3] * 10 + [15] * (g - 10))
    assert g > GROUPED_START
    monkeypatch.setattr(assign, "GROUPED_CG_MIN_EDGES", 0)  # a small LP would skip it
    full = _score(w, cap, solve(w, cap, method="grouped_full"))
    column_generation = solve(w, cap, method="grouped")
    got = _score(w, cap, column_generation)
    dense = _score(w, cap, solve(w, cap, method="dense"))
    assert got[0] == full[0] == dense[0] == n
    assert got[1] == pytest.approx(full[1], abs=1e-6)
    assert got[1] == pytest.approx(dense[1], abs=1e-6)
    first = np.argsort(-np.where(np.isfinite(w), w, -np.inf), axis=1)[:, :GROUPED_START]
    assert any(c not in first[i] for i, c in enumerate(column_generation))


def test_sparse_top_k_is_valid_and_close_to_the_optimum() -> None:
    rng = np.random.default_rng(3)
    n = 400
    w = np.log(rng.uniform(0.001, 1, size=(n, n)))
    np.fill_diagonal(w, -np.inf)
    dense = _score(w, np.ones(n, int), solve(w, method="dense"))
    sparse = _score(w, np.ones(n, int), solve(w, method="sparse", top_k=40))
    assert sparse[0] >= 0.95 * n
    assert sparse[1] / sparse[0] >= dense[1] / dense[0] - 0.5  # mean weight per match


def test_rows_without_an_allowed_response_get_minus_one() -> None:
    w = np.array([[0.0, -np.inf], [-1.0, -2.0], [-np.inf, -np.inf]])
    for method in ("dense", "grouped", "sparse"):
        out = solve(w, np.array([1, 1]), method=method)
        assert out.tolist() == [0, 1, -1], method


def test_auto_picks_grouped_for_shared_responses_and_bad_capacity_fails() -> None:
    w = np.zeros((4, 2))
    out = solve(w, np.array([2, 2]))
    assert sorted(out.tolist()) == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="capacity"):
        solve(w, np.array([1, -1]))
    with pytest.raises(ValueError, match="capacity"):
        solve(w, np.array([1, 1, 1]))


def test_highs_grouped_merges_identical_rows_and_keeps_the_optimum() -> None:
    # Many queries share a weight row (same truth, same filters): they become one row with a
    # supply in the LP, and must still fill the groups as the one-shot LP does.
    from matching import highs_lp

    # The `match` extra installs highspy: without it matching would quietly fall back to the
    # ~5x slower linprog path; this says so instead.
    assert highs_lp.available(), "highspy is not installed: see matching/highs_lp"
    rng = np.random.default_rng(5)
    g = 20
    base = np.round(np.log(rng.dirichlet(np.ones(g), size=60) + 1e-4), 1)
    base[rng.uniform(size=base.shape) < 0.2] = -np.inf
    w = base[rng.integers(0, 60, size=400)]  # 400 rows, at most 60 distinct
    cap = rng.integers(5, 30, size=g)
    got = _score(w, cap, solve(w, cap, method="grouped"))
    full = _score(w, cap, solve(w, cap, method="grouped_full"))
    dense = _score(w, cap, solve(w, cap, method="dense"))
    assert got[0] == full[0] == dense[0]
    assert got[1] == pytest.approx(full[1], abs=1e-6)
