"""The grouped LP of matching.assign on HiGHS directly, with identical rows merged.

(docs/scaling.md tells the 10x measures that asked for it.)

Two things made the grouped LP slow at 10x, measured on a 4,877-query train fold (its
first pass and raking, six solves): scipy's ``linprog`` wrapper (it rebuilds and checks the
whole model on each of the 2-3 column-generation solves: ~0.15 s a call), and rows that
are the same problem twice. Here:

- the model is built once per column-generation loop with HiGHS's own Python package
  (``highspy``), and the improving edges are added to it, so each re-solve starts from the
  last basis;
- queries whose weight rows are identical (same truth triple, same filters, same P_sim:
  ~40 % of a 10x fold) are one row with a supply: the transportation LP over row classes
  has the same optimum (it is the same LP with the identical rows' flows added up) and is
  still totally unimodular, so its simplex vertex is integral; a class's rows then take
  its groups in row order (they are interchangeable: the same weight for every group).

Keeping one model warm across the k rounds and raking was tried and is slower: after the
weights change the old basis costs the dual simplex more pivots than a fresh start.
``available()`` says whether highspy is installed (the ``match`` extra); else the caller falls
back to scipy's ``linprog``.
"""

from __future__ import annotations

from importlib.util import find_spec

import numpy as np
import numpy.typing as npt

# Groups per row class in the first LP (as matching.assign.GROUPED_START; 4, 6, 12 and 16
# measured slower on the 10x fold).
START = 8
MAX_ROUNDS = 50


Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int_]
Mask = npt.NDArray[np.bool_]


def available() -> bool:
    # The site and the CLI run without the `match` extra: highspy is imported on use.
    return find_spec("highspy") is not None


def solve_grouped(weights: Floats, cap: Ints, allowed: Mask, penalty: float) -> Ints:
    """Maximum-weight assignment of rows to groups (``allowed`` edges, group capacities
    ``cap``, an unmatched row costs ``penalty``); each row's group or -1. Exact."""
    n, g = weights.shape
    masked = np.where(allowed, weights, -np.inf)
    classes, inverse, supply = np.unique(masked, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    c_allowed = np.isfinite(classes)
    flow = _class_lp(classes, c_allowed, supply, np.asarray(cap, dtype=int), penalty)
    # Hand each class's flows to its rows in row order.
    out = np.full(n, -1, dtype=int)
    order = np.argsort(inverse, kind="stable")
    starts = np.concatenate([[0], np.cumsum(supply)])
    for c in np.flatnonzero(flow.sum(axis=1)):
        rows = order[starts[c] : starts[c + 1]]
        picks = np.repeat(np.arange(g), flow[c])
        out[rows[: len(picks)]] = picks
    return out


def _class_lp(w: Floats, allowed: Mask, supply: Ints, cap: Ints, penalty: float) -> Ints:
    """Integer flows (classes x groups) of the transportation LP, by column generation."""
    import highspy

    m, g = w.shape
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("presolve", "off")
    h.setOptionValue("simplex_strategy", 1)  # dual simplex, as linprog's "highs-ds"
    sup = supply.astype(float)
    # Columns 0..m-1: each class's "unmatched" slack. Rows 0..m-1: a class's slack and
    # edges add up to its supply; rows m..m+g-1: a group takes at most its capacity.
    h.addVars(m, np.zeros(m), sup)
    h.changeColsCost(m, np.arange(m, dtype=np.int32), np.full(m, penalty))
    idx = np.arange(m, dtype=np.int32)
    h.addRows(m, sup, sup, m, idx, idx, np.ones(m))
    h.addRows(
        g,
        np.full(g, -highspy.kHighsInf),
        cap.astype(float),
        0,
        np.zeros(g, dtype=np.int32),
        np.zeros(0, dtype=np.int32),
        np.zeros(0),
    )
    have = np.zeros((m, g), dtype=bool)
    e_rows: list[Ints] = []
    e_groups: list[Ints] = []

    def add(ii: Ints, gg: Ints) -> None:
        e = len(ii)
        index = np.empty(2 * e, dtype=np.int32)
        index[0::2], index[1::2] = ii, m + gg
        upper = np.minimum(sup[ii], cap[gg].astype(float))
        h.addCols(
            e,
            -w[ii, gg],
            np.zeros(e),
            upper,
            2 * e,
            np.arange(0, 2 * e, 2, dtype=np.int32),
            index,
            np.ones(2 * e),
        )
        have[ii, gg] = True
        e_rows.append(ii)
        e_groups.append(gg)

    masked = np.where(allowed, w, -np.inf)
    k = min(START, g)
    top = np.argpartition(-masked, k - 1, axis=1)[:, :k]
    first = np.zeros_like(allowed)
    np.put_along_axis(first, top, True, axis=1)
    add(*np.nonzero(first & allowed))
    for _ in range(MAX_ROUNDS):
        h.run()
        status = h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"grouped matching LP failed: {h.modelStatusToString(status)}")
        sol = h.getSolution()
        y = np.asarray(sol.row_dual)
        # Reduced cost of a missing edge (minimisation): -w - u_c - v_g < 0 improves it.
        with np.errstate(invalid="ignore"):
            reduced = -masked - y[:m, None] - y[None, m:]
        improving = allowed & ~have & (reduced < -1e-7 * (1.0 + np.abs(masked)))
        if not improving.any():
            break
        add(*np.nonzero(improving))
    else:
        raise RuntimeError("grouped matching LP: column generation did not converge")
    x = np.asarray(sol.col_value)[m:]
    if np.abs(x - np.round(x)).max(initial=0.0) > 1e-6:
        raise ArithmeticError("grouped matching LP: fractional vertex")
    flow = np.zeros((m, g), dtype=int)
    flow[np.concatenate(e_rows), np.concatenate(e_groups)] = np.round(x).astype(int)
    return flow
