"""Matching split by split and fold by fold, in parallel processes (docs/matching.md).

The grouped LP of a split grows faster than its number of queries (HiGHS on VSR's train
split: 1x 4.6 s, 5x 30 s per round), so a split with more than ``MatchParams.fold_size``
queries is cut into folds of whole images (a stable hash of the image, like the splits), and
each fold is matched on its own: a query's distractors come from its fold, which at that size
is as large as VSR's whole train split. Folds and splits are independent jobs, so they run in
``workers`` processes (fork: the fitted P_rel, the records and the filters are inherited, not
pickled); the result does not depend on ``workers``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matching.geometry_filter import PairShapes
    from matching.records import Record, Triple
    from matching.relevance import RelevanceModel
    from matching.similarity import SimilarityScorer

# matching.pipeline.match_split, passed in (this module sits below the pipeline): it takes
# (queries, split, relevance, similarity, params, known_true, geometry) and returns the
# split's items and how many queries got fewer than k distractors.
MatchSplit = Callable[..., tuple[list[Any], int]]


@dataclass
class FoldResult:
    split: str
    items: list[Any]  # matching.pipeline.Item
    missing: int
    seconds: float


def fold_of(image: str, seed: int, n_folds: int) -> int:
    """The fold of an image: a stable hash, so every process and run agree."""
    digest = hashlib.sha256(f"fold:{seed}:{image}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % n_folds


def folds(queries: Sequence[Record], fold_size: int, seed: int) -> list[list[Record]]:
    """``queries`` cut into ceil(n / fold_size) folds of whole images (one fold when
    ``fold_size`` is 0 or the split is small enough)."""
    n_folds = -(-len(queries) // fold_size) if fold_size > 0 else 1
    if n_folds <= 1:
        return [list(queries)]
    out: list[list[Record]] = [[] for _ in range(n_folds)]
    for q in queries:
        out[fold_of(q.image, seed, n_folds)].append(q)
    return [f for f in out if f]


# What a forked worker needs; set by the parent just before the pool starts (a process
# pool's function takes one pickled argument, and the fitted P_rel is not worth pickling).
_SHARED: dict[str, Any] = {}


def _run_job(job: tuple[str, int], shared: dict[str, Any] | None = None) -> FoldResult:
    split, index = job
    s = _SHARED if shared is None else shared
    t0 = time.perf_counter()
    items, missing = s["match_split"](
        s["folds"][split][index],
        split,
        s["relevance"],
        s["similarity"],
        s["params"],
        s["known"],
        s["geometry"],
        conflicts=s.get("conflicts"),
    )
    return FoldResult(split, items, missing, time.perf_counter() - t0)


def match_splits(
    match_split: MatchSplit,
    by_split: Mapping[str, Sequence[Record]],
    relevance: RelevanceModel,
    similarity: SimilarityScorer,
    params: Any,  # matching.pipeline.MatchParams (fold_size, seed)
    known: Mapping[str, Sequence[Triple]],
    geometry: Mapping[int, PairShapes] | None,
    workers: int = 1,
    conflicts: Any = None,  # matching.option_conflicts.Conflicts
) -> dict[str, FoldResult]:
    """Every split matched (fold by fold), merged back per split with items by query id;
    ``seconds`` of a split is the sum of its folds' times (the work, whatever the workers)."""
    per_split = {s: folds(qs, params.fold_size, params.seed) for s, qs in by_split.items()}
    jobs = [(s, i) for s, fs in per_split.items() for i in range(len(fs))]
    # Biggest first, so the last job to finish is a small one.
    jobs.sort(key=lambda j: -len(per_split[j[0]][j[1]]))
    shared: dict[str, Any] = dict(
        match_split=match_split,
        folds=per_split,
        relevance=relevance,
        similarity=similarity,
        params=params,
        known=known,
        geometry=geometry,
        conflicts=conflicts,
    )
    # A model-based P_sim runs torch, which must not run in a forked child.
    parallel = workers > 1 and len(jobs) > 1 and getattr(similarity, "vectorised", False)
    if parallel:
        import multiprocessing

        # Children must not encode: every concept they will look up is embedded now.
        relevance.embed_concepts(
            sorted({c for qs in by_split.values() for q in qs for c in (q.subj, q.obj)})
        )
        _SHARED.update(shared)
        try:
            ctx = multiprocessing.get_context("fork")
            with ctx.Pool(min(workers, len(jobs))) as pool:
                results = pool.map(_run_job, jobs, chunksize=1)
        finally:
            _SHARED.clear()
    else:
        # In this process: no module state, so runs in two threads cannot clear each other's.
        results = [_run_job(j, shared) for j in jobs]
    out = {s: FoldResult(s, [], 0, 0.0) for s in by_split}
    for r in results:
        merged = out[r.split]
        merged.items += r.items
        merged.missing += r.missing
        merged.seconds += r.seconds
    for merged in out.values():
        merged.items.sort(key=lambda it: it.query.id)
    return out
