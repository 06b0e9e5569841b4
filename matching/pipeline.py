"""Adversarial matching (VCR section 4) adapted to spatial captions.

Queries are kept True Examples; responses are their captions. For each query, ``k`` rounds of
maximum-weight bipartite matching pick distractors from the other queries' responses with

    W[i, j] = log P_rel(q_i, r_j) + h * log(1 - P_sim(r_i, r_j))

(clipped at ``eps`` so no log is infinite), where in later rounds P_sim is the maximum
similarity to every response already among q_i's choices. With remapping (the default,
PMR appendix C) a response is rewritten onto the query's concepts ("The cat is on the bed."
becomes "The dog is on the sofa." for a dog/sofa query), so a distractor differs from the
truth in its relation only (GITM-MR's idea). Matching runs within each split. With a
balance, each split is then raked (matching.raking): matched again with every (subject /
object / pair, relation) feature pushed towards k distractors per answer.

Filtering (never weighed, always excluded): the response itself, exact duplicates of a
choice, and anything with the same meaning as a caption validators voted True for the query's
image (known true); with ``table_filter`` (default) also anything the relation-semantics table
says the truth or a known-true caption implies, or that is equivalent to a choice; with
``geometry`` anything the query's instance outlines show to hold (matching.geometry_filter).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from matching.assign import solve
from matching.filtering import filter_predictable
from matching.folds import match_splits
from matching.geometry_filter import PairShapes, rejected_mask
from matching.items import Item as Item
from matching.option_conflicts import Conflicts, conflicts_for, table_conflicts
from matching.params import Balance
from matching.params import MatchParams as MatchParams
from matching.raking import Adjust, Raking
from matching.records import SPLITS, Record, Triple, confirmed_true, kept_true, split_mapping
from matching.relevance import RelevanceModel
from matching.similarity import SimilarityScorer, table_lookup, table_matrices
from matching.study_scope import render_caption

# How often a split is matched again without the queries left short of k distractors.
REMATCHES = 3


@dataclass
class MatchResult:
    params: MatchParams
    items: list[Item]
    queries: dict[str, int]
    unmatched: dict[str, int]
    known_true: dict[str, list[Triple]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    conflicts: Conflicts | None = None
    filtered: dict[str, int] = field(default_factory=dict)  # dropped by matching.filtering

    def items_in(self, split: str) -> list[Item]:
        return [it for it in self.items if it.split == split]


def known_true_by_image(
    records: Sequence[Record], threshold: Any = None
) -> dict[str, list[Triple]]:
    """Image -> triples validators confirmed true for it (kept True Examples, and any caption
    they voted True whatever its label or origin), which are never distractors for that image."""
    out: dict[str, list[Triple]] = {}
    for r in confirmed_true(records) if threshold is None else confirmed_true(records, threshold):
        out.setdefault(r.image, []).append(r.triple)
    return out


class _Ids:
    """Dense integer ids for concepts (relations use the table's index)."""

    def __init__(self) -> None:
        self.concepts: dict[str, int] = {}
        self.rel = table_matrices()[0]

    def c(self, name: str) -> int:
        return self.concepts.setdefault(name, len(self.concepts))

    def triple(self, t: Triple) -> tuple[int, int, int]:
        return self.rel[t[1]], self.c(t[0]), self.c(t[2])


def match_split(
    queries: Sequence[Record],
    split: str,
    relevance: RelevanceModel,
    similarity: SimilarityScorer,
    params: MatchParams,
    known_true: Mapping[str, Sequence[Triple]] | None = None,
    geometry: Mapping[int, PairShapes] | None = None,
    adjust: Adjust | None = None,
    conflicts: Conflicts | None = None,
) -> tuple[list[Item], int]:
    """Match one split; returns the complete items and how many queries got fewer than k.

    With ``balance``, a query left without k distractors is dropped and the split matched
    again without it (its answer would otherwise sit in other items as a distractor only),
    until every remaining query is matched: the balance then holds exactly.
    """
    if not (params.balance == Balance.PAIR and params.remap):
        return _match_once(
            queries,
            split,
            relevance,
            similarity,
            params,
            known_true,
            geometry,
            adjust,
            conflicts,
        )
    todo = list(queries)
    while True:
        items, missing = _match_once(
            todo, split, relevance, similarity, params, known_true, geometry, adjust, conflicts
        )
        if missing == 0:
            return items, len(queries) - len(items)
        kept = {it.query.id for it in items}
        todo = [q for q in todo if q.id in kept]


def match_split_raked(
    queries: Sequence[Record],
    split: str,
    relevance: RelevanceModel,
    similarity: SimilarityScorer,
    params: MatchParams,
    known_true: Mapping[str, Sequence[Triple]] | None = None,
    geometry: Mapping[int, PairShapes] | None = None,
    conflicts: Conflicts | None = None,
) -> tuple[list[Item], int]:
    """`match_split`, then raking (matching.raking): match again, pushing every
    (subject / object / pair, relation) towards k distractors per answer. Runs per split,
    or per fold where a split is matched fold by fold (matching.folds)."""
    raking = params.remap and params.balance != Balance.OFF and params.rake_strength > 0
    rounds = params.rake_rounds if raking else 0
    if not (params.balance == Balance.PAIR and params.remap):
        # One preparation for the first pass and every raking round: only raking's bonus
        # changes between them.
        # With a balance, queries left without k distractors are dropped and the rest
        # matched again (at most REMATCHES times), so every response that is a distractor
        # is also an answer of a kept item: the relations stay balanced.
        todo = list(queries)
        for attempt in range(REMATCHES + 1):
            prep = _prepare(todo, relevance, similarity, params, known_true, geometry, conflicts)
            if prep is None:
                return [], len(queries)
            # Only the last pass of the last attempt is rendered (captions, shuffled order):
            # rendering is a function of the picks alone, and raking only counts.
            picks = _pick(prep, similarity, params, None)
            got, missing = _items(prep, split, params, picks, render=False)
            rake = Raking(params.rake_strength, params.k)
            for _ in range(rounds):
                picks = _pick(prep, similarity, params, _extra(prep, rake.update(got), params))
                got, missing = _items(prep, split, params, picks, render=False)
            last = (prep, picks)
            if missing == 0 or attempt == REMATCHES or params.balance == Balance.OFF:
                break
            kept = {it.query.id for it in got}
            todo = [q for q in todo if q.id in kept]
        got = _items(last[0], split, params, last[1], render=True)[0]
        return got, len(queries) - len(got)
    # "pair" balance drops queries and matches again until the rest is balanced.
    got, missing = match_split(
        queries, split, relevance, similarity, params, known_true, geometry, None, conflicts
    )
    if raking:
        rake = Raking(params.rake_strength, params.k)
        for _ in range(params.rake_rounds):
            got, missing = match_split(
                queries,
                split,
                relevance,
                similarity,
                params,
                known_true,
                geometry,
                rake.update(got),
                conflicts,
            )
    return got, missing


def _match_once(
    queries: Sequence[Record],
    split: str,
    relevance: RelevanceModel,
    similarity: SimilarityScorer,
    params: MatchParams,
    known_true: Mapping[str, Sequence[Triple]] | None = None,
    geometry: Mapping[int, PairShapes] | None = None,
    adjust: Adjust | None = None,
    conflicts: Conflicts | None = None,
) -> tuple[list[Item], int]:
    prep = _prepare(queries, relevance, similarity, params, known_true, geometry, conflicts)
    if prep is None:
        return [], 0
    return _rounds(prep, split, similarity, params, _extra(prep, adjust, params))


@dataclass
class _Prepared:
    """What every matching of one split (or fold) shares, whatever raking adds: the groups,
    P_rel, the filters and P_sim to the truth. Computed once for the first pass and every
    raking round."""

    queries: list[Record]
    ids: _Ids
    members: list[list[int]]
    cap: np.ndarray
    g_first: list[Record]
    truth: tuple[np.ndarray, np.ndarray, np.ndarray]  # t_rel, t_s, t_o (n x 1)
    cand: tuple[np.ndarray, np.ndarray, np.ndarray]  # c_rel, c_s, c_o
    log_rel: np.ndarray
    allowed: np.ndarray
    vectorised: bool
    remap: bool
    conflicts: Conflicts | None  # options that may not stand together (option_conflicts)
    # P_sim to the truth (n x groups), set by _sim_to_truth once ``allowed`` is known
    p_truth: np.ndarray = field(init=False)

    def cand_triple(self, i: int, g: int) -> Triple:
        q, r = self.queries[i], self.g_first[g]
        return (q.subj, r.relation, q.obj) if self.remap else r.triple


def _extra(prep: _Prepared, adjust: Adjust | None, params: MatchParams) -> np.ndarray | None:
    """Raking's bonus (matching.raking): added after the clip, so it still orders candidates
    that P_rel puts at the floor (see round_weights' ``extra``)."""
    if adjust is None or not params.remap:
        return None
    return adjust(prep.queries, [r.relation for r in prep.g_first])


Ids3 = tuple[np.ndarray, np.ndarray, np.ndarray]  # (relation, subject, object) ids


@dataclass
class _Groups:
    """Response groups: interchangeable responses (same relation once remapped, or the same
    caption without remapping) are one group with a capacity, see matching.assign."""

    members: list[list[int]]  # each group's queries (their responses), in query order
    cap: np.ndarray
    g_first: list[Record]  # each group's first member: its relation, and caption unremapped
    cand: Ids3  # c_rel (1 x groups); c_s, c_o: the query's (n x 1) or the group's (1 x groups)


def _prepare(
    queries: Sequence[Record],
    relevance: RelevanceModel,
    similarity: SimilarityScorer,
    params: MatchParams,
    known_true: Mapping[str, Sequence[Triple]] | None = None,
    geometry: Mapping[int, PairShapes] | None = None,
    conflicts: Conflicts | None = None,
) -> _Prepared | None:
    queries = sorted(queries, key=lambda r: r.id)
    if params.table_filter and conflicts is None:
        conflicts = table_conflicts()
    if not params.table_filter:
        conflicts = None
    if not queries:
        return None
    ids = _Ids()
    truth = _stack_ids(ids.triple(q.triple) for q in queries)
    groups = _response_groups(queries, ids, truth, params)
    log_rel = _log_rel(queries, ids, truth, groups.cand, relevance, params)
    allowed = _allowed(queries, ids, truth, groups, params, known_true, geometry, conflicts)
    prep = _Prepared(
        queries,
        ids,
        groups.members,
        groups.cap,
        groups.g_first,
        truth,
        groups.cand,
        log_rel,
        allowed,
        bool(getattr(similarity, "vectorised", False)),
        params.remap,
        conflicts,
    )
    prep.p_truth = _sim_to_truth(prep, similarity, params)
    return prep


def _stack_ids(triples: Iterable[tuple[int, int, int]]) -> Ids3:
    t_rel, t_s, t_o = (np.array(v, dtype=int)[:, None] for v in zip(*triples, strict=True))
    return t_rel, t_s, t_o


def _response_groups(queries: list[Record], ids: _Ids, truth: Ids3, params: MatchParams) -> _Groups:
    balance = params.balance == Balance.PAIR and params.remap
    by_relation = params.remap and not balance
    groups: dict[str | Triple, list[int]] = {}
    for j, q in enumerate(queries):
        groups.setdefault(q.relation if by_relation else q.triple, []).append(j)
    members = list(groups.values())
    g_first = [queries[m[0]] for m in members]
    c_rel = np.array([ids.rel[r.relation] for r in g_first], dtype=int)[None, :]
    if params.remap:
        c_s, c_o = truth[1], truth[2]
    else:
        c_s = np.array([ids.c(r.subj) for r in g_first], dtype=int)[None, :]
        c_o = np.array([ids.c(r.obj) for r in g_first], dtype=int)[None, :]
    cap = np.array([len(m) for m in members], dtype=int)
    return _Groups(members, cap, g_first, (c_rel, c_s, c_o))


def _log_rel(
    queries: list[Record],
    ids: _Ids,
    truth: Ids3,
    cand: Ids3,
    relevance: RelevanceModel,
    params: MatchParams,
) -> np.ndarray:
    """log P_rel(q_i, r_j): relation plausibility for the query's concepts; without remapping
    also how close the response's concepts are to the query's (a bi-encoder cosine)."""
    (_, t_s, t_o), (c_rel, c_s, c_o) = truth, cand
    pairs = sorted({(q.subj, q.obj) for q in queries})
    lp_pairs = relevance.log_proba(pairs)
    pair_row = {p: i for i, p in enumerate(pairs)}
    lp_q = lp_pairs[[pair_row[(q.subj, q.obj)] for q in queries]]
    log_rel = lp_q[:, c_rel[0]]
    if params.remap and params.balance == Balance.SOFT:
        log_rel = _pair_count_log_rel(queries, lp_q, c_rel[0], ids, params.backoff, params.aim)
    if not params.remap:
        names = sorted(ids.concepts, key=ids.concepts.__getitem__)
        sim = relevance.concept_similarity(names, names)
        match = ((1 + sim[t_s, c_s]) / 2) * ((1 + sim[t_o, c_o]) / 2)
        log_rel = log_rel + np.log(np.clip(match, params.eps, 1.0))
    floored: np.ndarray = np.maximum(log_rel, np.log(params.eps))
    return floored


# (query, confirmed caption) pairs filtered at once: bounds the block to this many rows.
KNOWN_TRUE_BLOCK = 4096


def _allowed(
    queries: list[Record],
    ids: _Ids,
    truth: Ids3,
    groups: _Groups,
    params: MatchParams,
    known_true: Mapping[str, Sequence[Triple]] | None,
    geometry: Mapping[int, PairShapes] | None,
    conflicts: Conflicts | None,
) -> np.ndarray:
    """The filters that hold in every round: which (query, group) may be a distractor."""
    (t_rel, t_s, t_o), (c_rel, c_s, c_o) = truth, groups.cand
    same_as_truth = (c_rel == t_rel) & (c_s == t_s) & (c_o == t_o)
    allowed = ~np.broadcast_to(same_as_truth, (len(queries), len(groups.members))).copy()
    if params.balance == Balance.PAIR and params.remap:
        # only relations other queries of the same concept pair were answered with
        g_s = np.array([ids.c(r.subj) for r in groups.g_first], dtype=int)[None, :]
        g_o = np.array([ids.c(r.obj) for r in groups.g_first], dtype=int)[None, :]
        allowed &= (g_s == t_s) & (g_o == t_o)
    if params.table_filter:
        allowed &= ~table_lookup(t_rel, t_s, t_o, c_rel, c_s, c_o, implied=True)
    if conflicts is not None:
        # Nothing that implies the truth, is implied by it or usually true with it: a model
        # reading all the options would pick the implied one (matching.option_conflicts).
        allowed &= ~conflicts.lookup(t_rel, t_s, t_o, c_rel, c_s, c_o)
    # Every (query, confirmed caption of its image) pair at once, in blocks of rows.
    pairs = [
        (i, ids.triple(kt))
        for i, q in enumerate(queries)
        for kt in (known_true or {}).get(q.image, ())
        if kt != q.triple
    ]
    for at in range(0, len(pairs), KNOWN_TRUE_BLOCK):
        block = pairs[at : at + KNOWN_TRUE_BLOCK]
        rows = np.array([i for i, _ in block], dtype=np.int64)
        kts = np.array([t for _, t in block], dtype=int).reshape(-1, 3)
        bad = _known_true_rows(rows, kts, groups.cand, params, conflicts)
        # Rows ascend: OR each query's rows together, then strike them out.
        first = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        allowed[rows[first]] &= ~np.logical_or.reduceat(bad, first, axis=0)
    if geometry and params.remap:
        # Candidates the query's own instance outlines show to hold (matching.geometry_filter).
        relations = [r.relation for r in groups.g_first]
        allowed &= ~rejected_mask([q.id for q in queries], relations, geometry)
    return allowed


def _known_true_rows(
    rows: np.ndarray, kts: np.ndarray, cand: Ids3, params: MatchParams, conflicts: Conflicts | None
) -> np.ndarray:
    """Per (query row, confirmed caption ids) pair, the query's candidates that caption
    (validated for its image) makes true or likely true: never its distractors."""
    c_rel, c_s, c_o = cand
    k_rel, k_s, k_o = (kts[:, j : j + 1] for j in range(3))
    row_s = c_s[rows] if params.remap else c_s[0][None, :]
    row_o = c_o[rows] if params.remap else c_o[0][None, :]
    kt_ids = (k_rel, k_s, k_o)
    row = (c_rel[0][None, :], row_s, row_o)
    fwd = table_lookup(*kt_ids, *row, implied=True)
    # The same meaning (identical, synonym, converse) is excluded always; what it merely
    # entails only with the table filter.
    bad = fwd & table_lookup(*row, *kt_ids, implied=True)
    bad |= (row[0] == k_rel) & (row_s == k_s) & (row_o == k_o)
    if params.table_filter:
        bad |= fwd
    if conflicts is not None:  # implying it or usually true with it: likely true too
        bad |= conflicts.lookup(*kt_ids, *row)
    return np.asarray(bad)


def _sim_to_truth(prep: _Prepared, similarity: SimilarityScorer, params: MatchParams) -> np.ndarray:
    """P_sim of each candidate to the query's truth. A model-based P_sim is too slow for
    every pair: each row keeps only its best groups by P_rel (``prep.allowed`` narrows)."""
    (t_rel, t_s, t_o), (c_rel, c_s, c_o) = prep.truth, prep.cand
    shape = prep.allowed.shape
    if prep.vectorised:
        return np.broadcast_to(table_lookup(t_rel, t_s, t_o, c_rel, c_s, c_o), shape).copy()
    top = min(params.sim_top, shape[1])
    masked = np.where(prep.allowed, prep.log_rel, -np.inf)
    keep = np.zeros(shape, dtype=bool)
    idx = np.argpartition(-masked, top - 1, axis=1)[:, :top]
    np.put_along_axis(keep, idx, True, axis=1)
    prep.allowed &= keep
    p_truth = np.zeros(shape)
    ii, gg = np.nonzero(prep.allowed)
    if len(ii):
        p_truth[ii, gg] = similarity.score(
            [prep.queries[i].triple for i in ii],
            [prep.cand_triple(int(i), int(g)) for i, g in zip(ii, gg, strict=True)],
        )
    return p_truth


def _rounds(
    prep: _Prepared,
    split: str,
    similarity: SimilarityScorer,
    params: MatchParams,
    extra: np.ndarray | None,
    render: bool = True,
) -> tuple[list[Item], int]:
    """The k rounds of max-weight bipartite matching; without ``render`` the items have no
    captions and no shuffled order (an intermediate pass that raking only counts)."""
    return _items(prep, split, params, _pick(prep, similarity, params, extra), render)


@dataclass
class _Picks:
    """What the k rounds chose, per query and round: the group, the Example whose response
    it is, its weight; ``alive``: the query got all k."""

    chosen: np.ndarray
    source_ids: np.ndarray
    weights: np.ndarray
    alive: np.ndarray


def _pick(
    prep: _Prepared,
    similarity: SimilarityScorer,
    params: MatchParams,
    extra: np.ndarray | None,
) -> _Picks:
    """The k rounds of max-weight bipartite matching."""
    queries, members, cap = prep.queries, prep.members, prep.cap
    n = len(queries)
    log_rel = prep.log_rel
    allowed = prep.allowed.copy()  # the diversity update removes duplicates round by round
    # Per query and round (arrays, not per-row Python lists, which were slow on VSR's train
    # split): the group taken, the Example whose response it is, its weight.
    chosen = np.full((n, params.k), -1, dtype=int)
    source_ids = np.zeros((n, params.k), dtype=np.int64)
    weights_taken = np.zeros((n, params.k))
    # A group's members in order, flattened: the r-th taker of group g gets member r.
    member_ids = np.array([queries[m].id for ms in members for m in ms], dtype=np.int64)
    member_start = np.concatenate([[0], np.cumsum([len(ms) for ms in members])])
    alive = np.ones(n, dtype=bool)
    p_max = prep.p_truth.copy()
    for round_no in range(params.k):
        if round_no > 0:
            last = chosen[:, round_no - 1]
            _diversity_update(prep, p_max, allowed, last, alive, similarity, params)
        w = round_weights(log_rel, p_max, allowed & alive[:, None], params.h, params.eps, extra)
        pick = solve(
            w,
            cap,
            method=params.method,
            dense_limit=params.dense_limit,
            top_k=params.top_k,
            seed=params.seed + round_no,
        )
        alive &= pick >= 0
        rows = np.flatnonzero(alive)  # in row order, as the members are handed out
        taken = pick[rows]
        by_group = np.argsort(taken, kind="stable")
        sorted_g = taken[by_group]
        rank = np.empty(len(rows), dtype=int)
        rank[by_group] = np.arange(len(rows)) - np.searchsorted(sorted_g, sorted_g, side="left")
        chosen[rows, round_no] = taken
        source_ids[rows, round_no] = member_ids[member_start[taken] + rank]
        weights_taken[rows, round_no] = w[rows, taken]

    return _Picks(chosen, source_ids, weights_taken, alive)


def _items(
    prep: _Prepared, split: str, params: MatchParams, picked: _Picks, render: bool
) -> tuple[list[Item], int]:
    """The items of the queries that got all k; without ``render`` no captions and no
    shuffled order (an intermediate pass that raking only counts)."""
    queries, g_first, cand_triple = prep.queries, prep.g_first, prep.cand_triple
    chosen, source_ids, weights_taken, alive = (
        picked.chosen,
        picked.source_ids,
        picked.weights,
        picked.alive,
    )
    items: list[Item] = []
    for i, q in enumerate(queries):
        if not alive[i]:
            continue
        picks = chosen[i].tolist()
        sources = source_ids[i].tolist()
        taken_w = weights_taken[i].tolist()
        triples = [q.triple] + [cand_triple(i, g) for g in picks]
        if not render:  # raking counts (answer, distractors); order and captions unused
            items.append(Item(q, split, [], triples, 0, [q.id, *sources], taken_w, sources))
            continue
        captions = [q.caption] + [
            render_caption(*cand_triple(i, g)) if params.remap else g_first[g].caption
            for g in picks
        ]
        src = [q.id, *sources]
        order = np.random.default_rng([params.seed, q.id]).permutation(len(triples))
        items.append(
            Item(
                query=q,
                split=split,
                choices=[captions[o] for o in order],
                triples=[triples[o] for o in order],
                answer_index=int(np.flatnonzero(order == 0)[0]),
                source_ids=[src[o] for o in order],
                weights=taken_w,
                round_sources=sources,
            )
        )
    return items, int((~alive).sum())


def aimed(lp: np.ndarray, lp_truth: np.ndarray, aim: float) -> np.ndarray:
    """(1 - aim) log P(d) - aim |log P(d) - log P(truth)| (see MatchParams.aim)."""
    out: np.ndarray = (1 - aim) * lp - aim * np.abs(lp - lp_truth)
    return out


def _pair_count_log_rel(
    queries: Sequence[Record],
    lp_q: np.ndarray,
    g_rel: np.ndarray,
    ids: _Ids,
    backoff: float,
    aim: float,
) -> np.ndarray:
    """Relation weight of "soft" balance: log P(relation | pair) from the split's other
    answers for the query's concept pair (leave-one-out, so its own answer does not count),
    with ``backoff`` pseudo-counts spread evenly), plus P_rel aimed at the truth's
    plausibility (``aimed``). Relations the pair's other queries were answered with win, so
    each (pair, relation) is about as often a distractor as an answer; for a pair no other
    query has, the aimed P_rel decides."""
    n_rel = lp_q.shape[1]
    pair: dict[tuple[str, str], np.ndarray] = {}
    subj: dict[str, np.ndarray] = {}
    obj: dict[str, np.ndarray] = {}
    for q in queries:
        r = ids.rel[q.relation]
        pair.setdefault((q.subj, q.obj), np.zeros(n_rel))[r] += 1
        subj.setdefault(q.subj, np.zeros(n_rel))[r] += 1
        obj.setdefault(q.obj, np.zeros(n_rel))[r] += 1
    out = np.empty((len(queries), len(g_rel)))
    for i, q in enumerate(queries):
        own = ids.rel[q.relation]
        # Leave the query out; back off from the pair to its subject's and object's answers
        # (so subject x relation and object x relation are balanced too), then uniform.
        c_p, c_s, c_o = pair[(q.subj, q.obj)].copy(), subj[q.subj].copy(), obj[q.obj].copy()
        for c in (c_p, c_s, c_o):
            c[own] -= 1
        c_so = c_s + c_o
        p_so = (c_so + backoff / n_rel) / (c_so.sum() + backoff)
        p = (c_p + backoff * p_so) / (c_p.sum() + backoff)
        out[i] = np.log(p[g_rel]) + aimed(lp_q[i, g_rel], lp_q[i, own], aim)
    return out


def round_weights(
    log_rel: np.ndarray,
    p_sim: np.ndarray,
    allowed: np.ndarray,
    h: float,
    eps: float,
    extra: np.ndarray | None = None,
) -> np.ndarray:
    """W = log P_rel + h * log(1 - P_sim), both logs clipped at log(eps), plus ``extra``
    (raking's bonus, unclipped); -inf = excluded."""
    w = np.maximum(log_rel, np.log(eps)) + h * np.log(np.clip(1.0 - p_sim, eps, 1.0))
    if extra is not None:
        w = w + extra
    return np.where(allowed, w, -np.inf)


def _diversity_update(
    prep: _Prepared,
    p_max: np.ndarray,
    allowed: np.ndarray,
    last: np.ndarray,
    alive: np.ndarray,
    similarity: SimilarityScorer,
    params: MatchParams,
) -> None:
    """After a round (``last``: the group each query took): P_sim in ``p_max`` becomes the max
    similarity to every choice of the query so far, and a candidate that duplicates a chosen
    distractor is excluded from ``allowed``."""
    c_rel, c_s, c_o = prep.cand
    truth_so = prep.truth[1], prep.truth[2]
    conflicts, cand_triple = prep.conflicts, prep.cand_triple
    rows = np.flatnonzero(alive)
    if len(rows) == 0:
        return
    last = last[rows]
    d_rel = c_rel[0][last][:, None]
    if params.remap:
        d_s, d_o = truth_so[0][rows], truth_so[1][rows]
        r_s, r_o = d_s, d_o
    else:
        d_s, d_o = c_s[0][last][:, None], c_o[0][last][:, None]
        r_s, r_o = c_s, c_o
    dup = (c_rel == d_rel) & (r_s == d_s) & (r_o == d_o)
    if params.table_filter:
        fwd = table_lookup(d_rel, d_s, d_o, c_rel, r_s, r_o, implied=True)
        back = table_lookup(c_rel, r_s, r_o, d_rel, d_s, d_o, implied=True)
        dup |= fwd & back
    if conflicts is not None:  # no two distractors in implication or usually true together
        dup |= conflicts.lookup(d_rel, d_s, d_o, c_rel, r_s, r_o)
    allowed[rows] &= ~dup
    if prep.vectorised:
        p_fwd = table_lookup(d_rel, d_s, d_o, c_rel, r_s, r_o)
        p_back = table_lookup(c_rel, r_s, r_o, d_rel, d_s, d_o)
        p_max[rows] = np.maximum(p_max[rows], np.maximum(p_fwd, p_back))
        return
    sub = allowed[rows]
    ri, gg = np.nonzero(sub)
    if len(ri) == 0:
        return
    qi = rows[ri]
    prev = [cand_triple(int(i), int(g)) for i, g in zip(qi, last[ri], strict=True)]
    cands = [cand_triple(int(i), int(g)) for i, g in zip(qi, gg, strict=True)]
    both = np.maximum(similarity.score(prev, cands), similarity.score(cands, prev))
    p_max[qi, gg] = np.maximum(p_max[qi, gg], both)


def run_matching(
    records: Sequence[Record],
    relevance: RelevanceModel,
    similarity: SimilarityScorer,
    params: MatchParams,
    *,
    splits: Mapping[int, str] | None = None,
    split_seed: int = 0,
    threshold: Any = None,
    fit: bool = True,
    on_step: Callable[[str], None] | None = None,
    geometry: Mapping[int, PairShapes] | None = None,
    workers: int = 1,
) -> MatchResult:
    """Match every split of the kept True records; ``fit`` trains P_rel on train first.
    ``on_step`` is called after each step (for progress bars). ``workers``: processes that
    match splits and folds in parallel (matching.folds; the result is the same for any)."""
    import time

    kw = {} if threshold is None else {"threshold": threshold}
    queries = kept_true(records, **kw)
    known_names = table_matrices()[0]
    unknown = sorted({q.relation for q in queries if q.relation not in known_names})
    if unknown:
        raise ValueError(f"unknown relation(s) {unknown}: not in the study's relation vocabulary")
    mapping = split_mapping(queries, splits, split_seed)
    by_split: dict[str, list[Record]] = {s: [] for s in SPLITS}
    for q in queries:
        if q.id in mapping:
            by_split[mapping[q.id]].append(q)
    seconds: dict[str, float] = {}
    if fit:
        t0 = time.perf_counter()
        train = by_split["train"] or queries  # no train part: fall back to everything
        relevance.fit(train)
        seconds["fit_p_rel"] = time.perf_counter() - t0
        if on_step:
            on_step("fit P_rel")
    known = known_true_by_image(records, threshold)
    conflicts = conflicts_for(records, **kw) if params.table_filter else None
    items: list[Item] = []
    unmatched: dict[str, int] = {}
    t0 = time.perf_counter()
    matched = match_splits(
        match_split_raked,
        by_split,
        relevance,
        similarity,
        params,
        known,
        geometry,
        workers,
        conflicts,
    )
    for split in SPLITS:
        items += matched[split].items
        unmatched[split] = matched[split].missing
        seconds[f"match_{split}"] = matched[split].seconds
        if on_step:
            on_step(f"matched {split}")
    seconds["match_wall"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # Model fits in processes only where matching forks too (no torch-based P_sim).
    fit_workers = workers if getattr(similarity, "vectorised", False) else 1
    items, filtered = filter_predictable(
        items, params.filter_above, params.seed, params.filter_stack_above, fit_workers
    )
    seconds["filter"] = time.perf_counter() - t0
    return MatchResult(
        params=params,
        items=items,
        queries={s: len(v) for s, v in by_split.items()},
        unmatched=unmatched,
        known_true=known,
        seconds=seconds,
        conflicts=conflicts,
        filtered=filtered,
    )
