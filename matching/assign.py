"""One round of maximum-weight bipartite matching between queries and response groups.

Input: ``weights`` (n_queries x n_groups, ``-inf`` = forbidden) and each group's
``capacity`` (how many interchangeable responses it holds). Without grouping every response
is its own group of capacity 1, which is VCR's plain N x N assignment. Output: for each
query the chosen group, or -1 when no allowed response is left for it.

Three solvers, all from scipy:
- ``dense``: ``scipy.optimize.linear_sum_assignment`` on the expanded matrix (exact).
- ``sparse``: each row keeps its ``top_k`` best responses, solved with
  ``scipy.sparse.csgraph.min_weight_full_bipartite_matching`` (for many thousand items).
- ``grouped``: with remapping, responses that share a relation are identical once rewritten
  onto the query's concepts, so the N x N assignment *is* a transportation problem over
  relation groups. Its linear program is totally unimodular, so the HiGHS simplex vertex is
  integral and equals the dense optimum (a test checks this) at a fraction of the cost
  (n x 71 variables instead of an n x n matrix). It is solved by column generation: the LP
  starts with each row's ``GROUPED_START`` best groups, and the edges whose reduced cost
  (from the LP's row and group prices) says they would improve it are added until none
  does, which proves the optimum of the full LP (3x faster on VSR's train split,
  and the solve no longer grows with n x 71 edges). ``grouped_full`` is the one-shot LP.
  Where scipy ships its HiGHS bindings, ``grouped`` runs on them directly with identical
  rows merged (matching.highs_lp: another 4-5x); else on ``linprog`` as here.

Rows that cannot be matched take a per-row "unmatched" option with a penalty larger than
any total loss a rematch could cause, so the solvers first match as many queries as
possible and then maximise the weight.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from matching import highs_lp

Method = Literal["auto", "dense", "sparse", "grouped", "grouped_full"]
# Above this many variables (rows x groups) the grouped LP is not worth it.
GROUPED_MAX_VARIABLES = 5_000_000
# Column generation: groups per row in the first LP (measured on VSR's train split: 8 needs
# 2-3 rounds of added edges and solves fastest; 4 needs more rounds, 16 a bigger LP).
GROUPED_START = 8
# Below this many allowed edges the one-shot LP is faster than two or three restricted ones
# (measured: 2,000 rows x 63 groups 0.8 s one-shot vs 1.5 s; 4,000 rows 3.7 s vs 1.0 s).
GROUPED_CG_MIN_EDGES = 150_000
GROUPED_MAX_ROUNDS = 50


def _penalty(finite: np.ndarray, n_rows: int) -> float:
    span = float(finite.max() - finite.min()) if finite.size else 0.0
    return (span + 1.0) * (n_rows + 1)


def choose_method(
    n_rows: int, capacity: np.ndarray, dense_limit: int, n_edges: int | None = None
) -> Method:
    """``n_edges``: allowed (row, group) pairs; the grouped LP has one variable per edge."""
    edges = n_rows * len(capacity) if n_edges is None else n_edges
    if capacity.max(initial=0) > 1 and edges <= GROUPED_MAX_VARIABLES:
        return "grouped"
    return "dense" if int(capacity.sum()) <= dense_limit else "sparse"


def solve(
    weights: np.ndarray,
    capacity: np.ndarray | None = None,
    *,
    method: Method = "auto",
    dense_limit: int = 4000,
    top_k: int = 50,
    seed: int = 0,
) -> np.ndarray:
    """Maximum-weight assignment of rows to groups under group capacities."""
    n, g = weights.shape
    cap = np.ones(g, dtype=int) if capacity is None else np.asarray(capacity, dtype=int)
    if cap.shape != (g,) or (cap < 0).any():
        raise ValueError("capacity must give a non-negative count per group")
    out = np.full(n, -1, dtype=int)
    allowed = np.isfinite(weights) & (cap > 0)[None, :]
    if n == 0 or not allowed.any():
        return out
    if method == "auto":
        method = choose_method(n, cap, dense_limit, int(allowed.sum()))
    if method == "grouped":
        if highs_lp.available():
            try:
                return highs_lp.solve_grouped(weights, cap, allowed, _penalty(weights[allowed], n))
            except ArithmeticError:  # not a vertex (cannot happen): the exact dense solver
                return _dense(weights, allowed, np.repeat(np.arange(g), cap))
            except RuntimeError:
                # HiGHS stopped short of an optimum (numerical trouble without presolve, seen
                # on VSR with options that may not imply each other): linprog's loop, which
                # retries with presolve and falls back to the dense solver.
                pass
        return _grouped(weights, cap, allowed)
    if method == "grouped_full":
        return _grouped_lp(weights, cap, allowed, allowed)[0]
    # Expand groups into one column per response.
    col_group = np.repeat(np.arange(g), cap)
    if method == "dense":
        return _dense(weights, allowed, col_group)
    if method == "sparse":
        return _sparse(weights, allowed, col_group, top_k, seed)
    raise ValueError(f"unknown matching method {method!r}")


def _dense(weights: np.ndarray, allowed: np.ndarray, col_group: np.ndarray) -> np.ndarray:
    from scipy.optimize import linear_sum_assignment

    n = weights.shape[0]
    finite = weights[allowed]
    pen = _penalty(finite, n)
    w = np.where(allowed, weights, -2 * pen)[:, col_group]
    if w.shape[1] < n:  # fewer responses than queries: give every row a way out
        dummy = np.full((n, n), -2 * pen)
        np.fill_diagonal(dummy, -pen)
        w = np.hstack([w, dummy])
    rows, cols = linear_sum_assignment(w, maximize=True)
    out = np.full(n, -1, dtype=int)
    for r, c in zip(rows, cols, strict=True):
        if c < len(col_group) and allowed[r, col_group[c]]:
            out[r] = col_group[c]
    return out


def _sparse(
    weights: np.ndarray, allowed: np.ndarray, col_group: np.ndarray, top_k: int, seed: int
) -> np.ndarray:
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    n, m = weights.shape[0], len(col_group)
    rng = np.random.default_rng(seed)
    finite = weights[allowed]
    pen = _penalty(finite, n)
    wmax = float(finite.max())
    rows_l, cols_l, cost_l = [], [], []
    k = min(top_k, m)
    for start in range(0, n, 1024):  # row chunks keep memory at chunk x m
        block = np.where(allowed[start : start + 1024], weights[start : start + 1024], -np.inf)
        block = block[:, col_group]
        # Tiny random jitter breaks ties, so equal responses are spread over the rows
        # instead of every row picking the same first columns.
        block = block + rng.uniform(0.0, 1e-9, size=block.shape)
        top = np.argpartition(-block, k - 1, axis=1)[:, :k]
        vals = np.take_along_axis(block, top, axis=1)
        ok = np.isfinite(vals)
        r_idx = np.repeat(np.arange(start, start + block.shape[0]), k).reshape(-1, k)
        rows_l.append(r_idx[ok])
        cols_l.append(top[ok])
        cost_l.append(wmax - vals[ok] + 1.0)  # positive: explicit zeros would drop the edge
    rows = np.concatenate(rows_l + [np.arange(n)])
    cols = np.concatenate(cols_l + [m + np.arange(n)])  # one private "unmatched" per row
    cost = np.concatenate(cost_l + [np.full(n, pen)])
    graph = csr_matrix((cost, (rows, cols)), shape=(n, m + n))
    r, c = min_weight_full_bipartite_matching(graph)
    out = np.full(n, -1, dtype=int)
    real = c < m
    out[r[real]] = col_group[c[real]]
    return out


def _grouped(weights: np.ndarray, cap: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The grouped LP by column generation (see the module docstring); exact."""
    if int(allowed.sum()) < GROUPED_CG_MIN_EDGES:
        return _grouped_lp(weights, cap, allowed, allowed)[0]
    masked = np.where(allowed, weights, -np.inf)
    k = min(GROUPED_START, weights.shape[1])
    top = np.argpartition(-masked, k - 1, axis=1)[:, :k]
    edges = np.zeros_like(allowed)
    np.put_along_axis(edges, top, True, axis=1)
    edges &= allowed
    for _ in range(GROUPED_MAX_ROUNDS):
        out, row_price, group_price = _grouped_lp(weights, cap, allowed, edges)
        if row_price is None or group_price is None:  # fell back to the dense solver
            return out
        # Reduced cost of a missing edge in the minimisation LP: -w - u_i - v_g < 0 means
        # taking it would lower the objective, so the restricted LP is not yet optimal.
        with np.errstate(invalid="ignore"):
            reduced = -masked - row_price[:, None] - group_price[None, :]
        improving = allowed & ~edges & (reduced < -1e-7 * (1.0 + np.abs(masked)))
        if not improving.any():
            return out
        edges |= improving
    return _grouped_lp(weights, cap, allowed, allowed)[0]


def _grouped_lp(
    weights: np.ndarray, cap: np.ndarray, allowed: np.ndarray, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The grouped LP over the (row, group) pairs in ``edges``; returns the assignment and
    the LP's prices of rows and groups (None when the dense fallback answered)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, hstack, identity

    n, g = weights.shape
    ii, gg = np.nonzero(edges)
    w = weights[ii, gg]
    e = len(w)
    pen = _penalty(weights[allowed], n)  # the same penalty whatever subset is offered
    # x[e] in [0, 1] per allowed (row, group) edge plus one "unmatched" slack per row:
    # each row takes exactly one option, each group at most its capacity.
    a_eq = hstack([coo_matrix((np.ones(e), (ii, np.arange(e))), shape=(n, e)), identity(n)])
    a_ub = hstack([coo_matrix((np.ones(e), (gg, np.arange(e))), shape=(g, e)), coo_matrix((g, n))])
    problem = dict(
        c=np.concatenate([-w, np.full(n, pen)]),
        A_eq=a_eq.tocsr(),
        b_eq=np.ones(n),
        A_ub=a_ub.tocsr(),
        b_ub=cap.astype(float),
        bounds=(0, 1),
    )
    # Dual simplex without presolve: 2x faster than the default on these LPs, and a
    # simplex answer is a vertex (integral here).
    res = linprog(**problem, method="highs-ds", options={"presolve": False})
    if res.status != 0:  # numerical trouble ("Unknown"): once more with presolve
        res = linprog(**problem, method="highs-ds")
    if res.status != 0:  # the exact dense solver answers instead (over every allowed edge)
        return _dense(weights, allowed, np.repeat(np.arange(g), cap)), None, None
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"grouped matching LP failed: {res.message}")
    x = res.x[:e]
    if np.abs(x - np.round(x)).max(initial=0.0) > 1e-6:
        # Cannot happen for a vertex of this polytope; fall back to the exact dense solver.
        return _dense(weights, allowed, np.repeat(np.arange(g), cap)), None, None
    out = np.full(n, -1, dtype=int)
    chosen = x > 0.5
    out[ii[chosen]] = gg[chosen]
    return out, np.asarray(res.eqlin.marginals), np.asarray(res.ineqlin.marginals)
