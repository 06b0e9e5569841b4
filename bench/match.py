"""Benchmark: adversarial matching of the full VSR validated set (10,972 Examples), end to end.

  ours      read ../shared/vsr/.../all_vsr_validated_data.jsonl, load the packaged
            all-MiniLM-L6-v2 (offline), embed the concepts, train P_rel on train, match every
            split (k rounds, remapping, table P_sim, table filter), compute the diagnostics.
  baseline  networkx's general max_weight_matching (blossom algorithm) on the same kind of
            weight matrix for 100/200/300 train queries, one round; its growth exponent is fitted
            on those sizes and extrapolated to the full run (every split, k rounds).
  reference scipy's dense linear_sum_assignment on the full train matrix, one round (what the
            grouped solver replaces; skip with --no-lsa).

Prints the wall time (target: < 60 s on 2 cores) and ratio = extrapolated networkx / ours,
both measured in this run. Usage:

  python bench/match.py [--h 1.0] [--k 3] [--no-lsa] [--sizes 100,200,300]
                        [--sweep 0,0.5,1,2] [--no-table-filter] [--no-remap]
                        [--balance soft|pair|off] [--rake-rounds 1]

The diagnostics (and so the wall time) include the held-out answer-only adversary suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matching.pipeline import MatchParams
    from matching.records import Record
    from matching.relevance import RelevanceModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VALIDATED = ROOT.parent / "shared/vsr/data/data_files/all_vsr_validated_data.jsonl"


def first_round_matrix(
    queries: Sequence[Record], relevance: RelevanceModel, params: MatchParams
) -> np.ndarray:
    """The expanded N x N round-1 weight matrix (remapping, table P_sim and filter): what a
    general matcher needs as input. -inf marks excluded pairs."""
    from matching.similarity import table_matrices

    index, p_same, _, imp_same, _ = table_matrices()
    rel = np.array([index[q.relation] for q in queries])
    lp = relevance.log_proba([(q.subj, q.obj) for q in queries])
    log_rel = np.maximum(lp[:, rel], np.log(params.eps))
    p = p_same[rel[:, None], rel[None, :]]
    w = log_rel + params.h * np.log(np.clip(1 - p, params.eps, 1))
    weights: np.ndarray = np.where(imp_same[rel[:, None], rel[None, :]], -np.inf, w)
    return weights


def networkx_round(w: np.ndarray) -> float:
    import networkx as nx

    n = w.shape[0]
    finite = w[np.isfinite(w)]
    shift = 1.0 - finite.min()  # positive weights: max_weight_matching maximises the sum
    g = nx.Graph()
    rows, cols = np.nonzero(np.isfinite(w))
    g.add_weighted_edges_from(
        (("q", int(i)), ("r", int(j)), float(w[i, j] + shift))
        for i, j in zip(rows, cols, strict=True)
    )
    t0 = time.perf_counter()
    m = nx.max_weight_matching(g, maxcardinality=True)
    dt = time.perf_counter() - t0
    assert len(m) >= n - 2
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--h", type=float, default=1.0)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--sizes", default="100,200,300")
    ap.add_argument("--no-lsa", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    ap.add_argument("--sweep", default="", help="also sweep these h values (after timing)")
    ap.add_argument("--no-table-filter", action="store_true")
    ap.add_argument("--no-remap", action="store_true")
    ap.add_argument("--balance", default="soft", choices=["soft", "pair", "off"])
    ap.add_argument("--rake-rounds", type=int, default=1, help="0 = no raking")
    args = ap.parse_args()

    # --- ours, end to end ----------------------------------------------------------------
    t_start = time.perf_counter()
    from matching.diagnostics import diagnose, format_report
    from matching.pipeline import MatchParams, run_matching
    from matching.records import assign_splits, kept_true, load_vsr_jsonl
    from matching.relevance import RelevanceModel, load_encoder
    from matching.similarity import TableSimilarity

    stages: dict[str, float] = {}
    t0 = time.perf_counter()
    records = load_vsr_jsonl(VALIDATED)
    stages["read file"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    relevance = RelevanceModel(load_encoder(None))
    stages["load MiniLM"] = time.perf_counter() - t0
    params = MatchParams(
        h=args.h,
        k=args.k,
        table_filter=not args.no_table_filter,
        remap=not args.no_remap,
        balance=args.balance,
        rake_rounds=args.rake_rounds,
    )
    t0 = time.perf_counter()
    result = run_matching(records, relevance, TableSimilarity(), params)
    stages["P_rel + matching"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    diag = diagnose(result, relevance)
    stages["diagnostics"] = time.perf_counter() - t0
    wall = time.perf_counter() - t_start
    match_s = sum(result.seconds[f"match_{s}"] for s in ("train", "dev", "test"))

    # --- baseline: networkx general matching, measured growth, extrapolated ----------------
    queries = kept_true(records)
    splits = assign_splits(queries)
    train = [q for q in queries if splits[q.id] == "train"]
    sizes = [int(s) for s in args.sizes.split(",")]
    nx_times = []
    for n in sizes:
        w = first_round_matrix(train[:n], relevance, params)
        nx_times.append(networkx_round(w))
    slope, intercept = np.polyfit(np.log(sizes), np.log(nx_times), 1)
    nx_full = sum(
        args.k * float(np.exp(intercept + slope * np.log(max(m, 1))))
        for m in result.queries.values()
        if m
    )

    lsa_s = None
    if not args.no_lsa:
        from scipy.optimize import linear_sum_assignment

        w = first_round_matrix(train, relevance, params)
        w = np.where(np.isfinite(w), w, -1e6)
        t0 = time.perf_counter()
        linear_sum_assignment(w, maximize=True)
        lsa_s = time.perf_counter() - t0

    figures = {
        "examples": len(records),
        "queries": result.queries,
        "wall_seconds": round(wall, 2),
        "stages_seconds": {k: round(v, 2) for k, v in stages.items()},
        "run_seconds": {k: round(v, 2) for k, v in result.seconds.items()},
        "networkx_sizes": sizes,
        "networkx_seconds": [round(t, 3) for t in nx_times],
        "networkx_exponent": round(float(slope), 2),
        "networkx_extrapolated_seconds": round(nx_full, 1),
        "ratio_networkx_over_our_matching": round(nx_full / match_s, 1),
        "ratio_networkx_over_our_end_to_end": round(nx_full / wall, 1),
        "dense_lsa_train_one_round_seconds": None if lsa_s is None else round(lsa_s, 2),
        "diagnostics": {
            k: diag[k]
            for k in (
                "chance",
                "answer_only_accuracy",
                "text_only_accuracy",
                "implied_by_truth_share",
                "duplicate_choice_items",
                "known_true_distractors",
                "items",
                "unmatched",
                "strongest_adversary",
                "strongest_adversary_accuracy",
                "strongest_adversary_ci95",
            )
        }
        | {"relation_tv": diag["relation_distribution"]["total_variation"]},
    }
    print(
        f"full VSR validated set: {len(records):,} Examples, "
        f"{sum(result.queries.values()):,} kept True queries {result.queries}"
    )
    print(
        f"ours, end to end: {wall:.1f} s wall  ("
        + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items())
        + ")"
    )
    print("  inside the run: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.seconds.items()))
    per_size = ", ".join(f"n={n}: {t:.2f} s" for n, t in zip(sizes, nx_times, strict=True))
    print(f"networkx max_weight_matching, one round: {per_size}  -> time ~ n^{slope:.2f}")
    print(
        f"  extrapolated to the full run ({args.k} rounds x splits {result.queries}): "
        f"{nx_full:,.0f} s"
    )
    print(
        f"ratio networkx / ours: {nx_full / match_s:,.0f}x on the matching stage, "
        f"{nx_full / wall:,.0f}x end to end"
    )
    if lsa_s is not None:
        print(
            f"reference: dense linear_sum_assignment on train ({len(train)} x {len(train)}), "
            f"one round: {lsa_s:.1f} s vs grouped {result.seconds['match_train'] / args.k:.2f} s"
            " per round (incl. weights)"
        )
    print(f"target full set < 60 s: {'met' if wall < 60 else 'NOT met'}")
    print(format_report(diag))
    if args.sweep:
        from matching.diagnostics import format_sweep, sweep

        rows = sweep(
            records, relevance, TableSimilarity(), params, [float(h) for h in args.sweep.split(",")]
        )
        figures["sweep"] = rows
        print(format_sweep(rows))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
