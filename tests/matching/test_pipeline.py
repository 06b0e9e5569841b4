"""Adversarial matching on in-memory records: real VSR samples, tiny real models built here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from matching.diagnostics import diagnose, sweep
from matching.pipeline import MatchParams, match_split, round_weights, run_matching
from matching.raking import Raking
from matching.records import Record, assign_splits, kept_true, split_of
from matching.relevance import RelevanceModel, load_encoder
from matching.similarity import TableSimilarity, load_similarity
from tests.matching.support import (
    VSR_VALIDATED,
    build_tiny_encoder,
    build_tiny_nli,
    concepts_of,
    vsr_sample,
    vsr_validated,
)
from vsr_core.relation_semantics import is_implied, link

pytestmark = pytest.mark.skipif(not VSR_VALIDATED.exists(), reason="real VSR data not found")

SAMPLE_PER_RELATION = 14


@pytest.fixture(scope="module")
def sample() -> list[Record]:
    return vsr_sample(SAMPLE_PER_RELATION)


@pytest.fixture(scope="module")
def encoder_path(tmp_path_factory: pytest.TempPathFactory, sample: list[Record]) -> Path:
    extra = concepts_of(sample) + ["cat", "dog", "bed", "bird", "bench", "car", "bus"]
    return build_tiny_encoder(tmp_path_factory.mktemp("enc"), extra)


@pytest.fixture(scope="module")
def encoder(encoder_path: Path):  # type: ignore[no-untyped-def]
    return load_encoder(str(encoder_path))


@pytest.fixture(scope="module")
def relevance(encoder) -> RelevanceModel:  # type: ignore[no-untyped-def]
    """Fitted by ``result`` on the sample's train part; tests must not refit it."""
    return RelevanceModel(encoder)


@pytest.fixture
def fresh(encoder) -> RelevanceModel:  # type: ignore[no-untyped-def]
    """An unfitted model for tests that train on their own records."""
    return RelevanceModel(encoder)


@pytest.fixture(scope="module")
def result(sample: list[Record], relevance: RelevanceModel):  # type: ignore[no-untyped-def]
    # Matching alone: the AFLite-style filter has a test of its own.
    params = MatchParams(h=1.0, k=3, filter_above=0)
    return run_matching(sample, relevance, TableSimilarity(), params)


def _rec(
    i: int,
    image: str,
    s: str,
    rel: str,
    o: str,
    votes: tuple[bool, ...] = (True,) * 3,
    label: bool = True,
) -> Record:
    from vsr_core.captions import render_caption

    return Record(i, image, s, rel, o, render_caption(s, rel, o), label, votes)


# --- records, splits, parameters ----------------------------------------------------------


def test_real_validated_file_loads_with_string_votes() -> None:
    recs = vsr_validated()
    assert len(recs) == 10_972
    assert sum(r.label for r in recs) == 5_621
    first = recs[0]  # votes "[]" true and "[2, 10, 1]" false, label 0
    assert first.caption == "The bench is at the right side of the train."
    assert (first.subj, first.relation, first.obj) == ("bench", "at the right side of", "train")
    assert first.votes == (False, False, False) and not first.label and first.kept()
    assert all(r.kept() for r in recs), "the validated release keeps only >= 2/3 agreement"


def test_split_of_is_deterministic_grouped_by_image_and_near_the_ratios() -> None:
    keys = [f"{i:012d}.jpg" for i in range(20_000)]
    parts = Counter(split_of(k) for k in keys)
    assert abs(parts["train"] / 20_000 - 0.7) < 0.015
    assert abs(parts["dev"] / 20_000 - 0.1) < 0.01
    assert [split_of(k) for k in keys[:50]] == [split_of(k) for k in keys[:50]]
    assert Counter(split_of(k, seed=1) for k in keys) != parts  # the seed matters
    recs = [_rec(1, "a.jpg", "cat", "on", "bed"), _rec(2, "a.jpg", "dog", "near", "cat")]
    assert len(set(assign_splits(recs).values())) == 1  # one image, one split
    with pytest.raises(ValueError, match="ratios"):
        split_of("x", ratios=(0.5, 0.5))


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="k"):
        MatchParams(k=0)
    with pytest.raises(ValueError, match="h"):
        MatchParams(h=-1)


# --- the weight matrix and the rounds ------------------------------------------------------


def test_round_weights_clip_every_log_and_exclude_forbidden_pairs() -> None:
    log_rel = np.array([[np.log(0.5), -np.inf], [np.log(0.2), np.log(0.9)]])
    p_sim = np.array([[0.0, 1.0], [0.5, 0.3]])
    allowed = np.array([[True, True], [False, True]])
    w = round_weights(log_rel, p_sim, allowed, h=2.0, eps=1e-4)
    assert w[0, 0] == pytest.approx(np.log(0.5))
    assert w[0, 1] == pytest.approx(np.log(1e-4) + 2 * np.log(1e-4))  # finite, not -inf
    assert w[1, 0] == -np.inf
    assert w[1, 1] == pytest.approx(np.log(0.9) + 2 * np.log(0.7))


def test_items_are_well_formed(result, sample: list[Record]) -> None:  # type: ignore[no-untyped-def]
    by_id = {r.id: r for r in sample}
    splits = assign_splits(sample)
    assert result.items, "the sample must give items"
    for it in result.items:
        q = it.query
        assert len(it.choices) == len(it.triples) == 4
        assert it.choices[it.answer_index] == q.caption
        assert it.source_ids[it.answer_index] == q.id
        assert len(set(it.choices)) == 4, "duplicate choices"
        for t in it.triples:  # remapped: only the relation differs
            assert (t[0], t[2]) == (q.subj, q.obj)
        for src in it.round_sources:  # distractors come from the same split only
            assert splits[src] == it.split == splits[q.id]
            assert by_id[src].label and by_id[src].kept()
    answers = Counter(it.answer_index for it in result.items)
    assert len(answers) == 4  # the answer position is shuffled


def test_each_round_uses_each_response_at_most_once(  # type: ignore[no-untyped-def]
    result, relevance: RelevanceModel
) -> None:
    for split in ("train", "dev", "test"):
        items = result.items_in(split)
        for r in range(3):
            used = Counter(it.round_sources[r] for it in items)
            assert max(used.values(), default=1) == 1, (split, r)
    # so distractor relations follow the truths' relations (what defeats answer-only models)
    diag = diagnose(result, relevance)
    assert diag["relation_distribution"]["total_variation"] < 0.1


@pytest.mark.parametrize("balance", ["off", "soft"])
def test_weights_follow_the_formula_with_the_diversity_update(  # type: ignore[no-untyped-def]
    result,
    relevance: RelevanceModel,
    sample: list[Record],
    balance: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """W = W_rel + h log(1 - P_sim); from round 2 on P_sim is the max similarity to every
    choice so far (truth and earlier distractors), as in VCR. W_rel is VCR's log P_rel
    ("off"), or for "soft" balance log of the split's leave-one-out (pair, relation) counts
    backing off to the subject's and object's answers, then evenly) plus
    (1 - aim) log P_rel(d) - aim |log P_rel(d) - log P_rel(t)|. With raking (the default
    for "soft") each weight also carries raking's bonus, computed here from the first
    matching's items of the split (the same run with rake_rounds=0)."""
    from dataclasses import replace

    import matching.pipeline

    # Re-match until no query is left short, so the counts are over the item's queries.
    monkeypatch.setattr(matching.pipeline, "REMATCHES", 10_000)
    first = run_matching(
        sample,
        relevance,
        TableSimilarity(),
        replace(result.params, balance=balance, rake_rounds=0),
        fit=False,
    )
    raked = None
    if balance == "soft":
        assert result.params.balance == "soft" and result.params.rake_rounds == 1
        raked = result
    if raked is not None:  # the same run, re-matched until no query is left short
        raked = run_matching(sample, relevance, TableSimilarity(), result.params, fit=False)
    # The raked run re-matches after dropping queries left short of k distractors, so its
    # raking bonus comes from its own first pass: checked where that is ``first``.
    for res in (first, raked):
        if res is not None and (
            res is first
            or res.queries == first.queries
            and {it.query.id for it in res.items} == {it.query.id for it in first.items}
        ):
            _check_weights(res, first, relevance, sample, balance)


def _check_weights(  # type: ignore[no-untyped-def]
    result, first, relevance: RelevanceModel, sample: list[Record], balance: str
) -> None:
    rakes = {}
    if result is not first:
        rakes = {
            sp: Raking(result.params.rake_strength, result.params.k).update(first.items_in(sp))
            for sp in ("train", "dev", "test")
        }
    by_id = {r.id: r for r in sample}
    eps, h, b, aim = (result.params.eps, result.params.h, result.params.backoff, result.params.aim)
    split_of_id = assign_splits(kept_true(sample))
    counts: dict[tuple[str, ...], Counter[str]] = {}
    # Queries left without k distractors are dropped and the split matched again: the
    # counts are over the queries that kept an item.
    with_item = {it.query.id for it in result.items}
    for q in kept_true(sample):
        if q.id not in with_item:
            continue
        sp = split_of_id[q.id]
        for key in ((sp, q.subj, q.obj), (sp, "s", q.subj), (sp, "o", q.obj)):
            counts.setdefault(key, Counter())[q.relation] += 1
    n_rel = len(relevance.relations)
    checked = 0
    for it in result.items:
        q = it.query
        lp = relevance.log_proba([(q.subj, q.obj)])[0]
        rels = [by_id[s].relation for s in it.round_sources]
        for r, rel in enumerate(rels):
            p = link(q.relation, rel).p
            for prev in rels[:r]:
                p = max(p, link(prev, rel).p, link(rel, prev).p)
            if balance == "off":
                w_rel = max(lp[relevance.index[rel]], np.log(eps))
            else:
                c = counts[(it.split, q.subj, q.obj)]
                so = counts[(it.split, "s", q.subj)] + counts[(it.split, "o", q.obj)]
                p_so = (so[rel] + b / n_rel) / (sum(so.values()) - 2 + b)
                lp_d, lp_t = lp[relevance.index[rel]], lp[relevance.index[q.relation]]
                w_rel = max(
                    np.log((c[rel] + b * p_so) / (sum(c.values()) - 1 + b))
                    + (1 - aim) * lp_d
                    - aim * abs(lp_d - lp_t),
                    np.log(eps),
                )
            expected = w_rel + h * np.log(np.clip(1 - p, eps, 1))
            if rakes:
                expected += rakes[it.split]([q], [rel])[0, 0]
            assert it.weights[r] == pytest.approx(expected, abs=1e-9)
            checked += 1
    assert checked == 3 * len(result.items)


# --- filtering ---------------------------------------------------------------------------


def test_no_distractor_is_implied_by_the_truth_or_known_true(result) -> None:  # type: ignore[no-untyped-def]
    for it in result.items:
        truth = it.triples[it.answer_index]
        for d in it.distractor_triples:
            assert not is_implied(truth, d), (truth, d)
            for kt in result.known_true.get(it.query.image, ()):
                assert not is_implied(kt, d), (kt, d)


def test_a_caption_known_true_for_the_image_is_never_a_distractor(
    fresh: RelevanceModel,
) -> None:
    # Four queries, k=3: each must take the three other relations, unless one of them is
    # known to be true for its image. "The cat is near the dog." is validated on a.jpg.
    recs = [
        _rec(1, "a.jpg", "cat", "facing", "dog"),
        _rec(2, "a.jpg", "cat", "near", "dog"),
        _rec(3, "b.jpg", "bird", "behind", "bench"),
        _rec(4, "c.jpg", "car", "left of", "bus"),
    ]
    fresh.fit(recs)
    params = MatchParams(k=3)
    items, missing = match_split(recs, "train", fresh, TableSimilarity(), params, None)
    assert missing == 0
    by_q = {it.query.id: it for it in items}
    assert "The cat is near the dog." in by_q[1].choices  # without the knowledge it is used

    known = {"a.jpg": [r.triple for r in recs[:2]]}
    items, missing = match_split(recs, "train", fresh, TableSimilarity(), params, known)
    assert missing == 2 and {it.query.id for it in items} == {3, 4}
    for it in items:
        assert "The cat is near the dog." not in it.choices

    # A synonym of a known-true caption ("close to" = "near") is excluded even without the
    # table filter: it has the same meaning.
    recs[1] = _rec(2, "b.jpg", "bird", "close to", "bench")
    fresh.fit(recs)
    loose = MatchParams(k=3, table_filter=False)
    items, missing = match_split(recs, "train", fresh, TableSimilarity(), loose, None)
    assert missing == 0
    known = {"a.jpg": [("cat", "near", "dog")]}
    items, missing = match_split(recs, "train", fresh, TableSimilarity(), loose, known)
    assert 1 not in {it.query.id for it in items}
    assert all("The cat is close to the dog." not in it.choices for it in items)


def test_only_kept_true_examples_take_part(fresh: RelevanceModel) -> None:
    recs = [
        _rec(1, "a.jpg", "cat", "on", "bed"),
        _rec(2, "b.jpg", "dog", "under", "table"),
        _rec(3, "c.jpg", "bird", "left of", "bench", votes=(True, False, False)),  # not kept
        _rec(4, "d.jpg", "car", "behind", "bus", label=False, votes=(False,) * 3),  # False
        _rec(5, "e.jpg", "cat", "far from", "dog"),
    ]
    assert [r.id for r in kept_true(recs)] == [1, 2, 5]
    splits = dict.fromkeys(range(1, 6), "train")
    res = run_matching(recs, fresh, TableSimilarity(), MatchParams(k=2), splits=splits)
    used = {s for it in res.items for s in it.source_ids}
    assert used <= {1, 2, 5} and res.queries["train"] == 3
    assert {r for it in res.items for r in it.relations} <= {"on", "under", "far from"}


def test_table_filter_excludes_entailed_distractors_and_can_be_turned_off(
    fresh: RelevanceModel,
) -> None:
    recs = [_rec(1, "a.jpg", "cat", "on", "bed"), _rec(2, "b.jpg", "dog", "touching", "bus")]
    splits = {1: "train", 2: "train"}
    on = run_matching(recs, fresh, TableSimilarity(), MatchParams(k=1), splits=splits)
    # "The cat is touching the bed." is true whenever "on" is: the 'on' query gets nothing;
    # and "on" offered with "touching" would give "touching" away: nor does the other.
    assert [it.query.id for it in on.items] == []
    assert diagnose(on, fresh)["implied_by_truth_share"] == 0.0
    off = run_matching(
        recs, fresh, TableSimilarity(), MatchParams(k=1, table_filter=False), splits=splits
    )
    assert len(off.items) == 2
    assert diagnose(off, fresh)["implied_by_truth_share"] == 0.5


def test_without_remapping_distractors_are_other_captions_verbatim(
    sample: list[Record], relevance: RelevanceModel
) -> None:
    res = run_matching(sample, relevance, TableSimilarity(), MatchParams(k=3, remap=False))
    by_id = {r.id: r for r in sample}
    assert res.items
    for it in res.items:
        for i, (c, src) in enumerate(zip(it.choices, it.source_ids, strict=True)):
            assert c == by_id[src].caption
            if i != it.answer_index:
                assert src != it.query.id
        assert len(set(it.choices)) == 4
    diag = diagnose(res, relevance)
    assert diag["duplicate_choice_items"] == 0 and diag["implied_by_truth_share"] == 0.0


# --- diagnostics and the sweep -----------------------------------------------------------


def test_diagnostics_and_sweep_on_a_real_sample(  # type: ignore[no-untyped-def]
    result, relevance: RelevanceModel, sample: list[Record]
) -> None:
    diag = diagnose(result, relevance)
    assert diag["chance"] == 0.25
    assert diag["implied_by_truth_share"] == 0.0
    assert diag["duplicate_choice_items"] == 0 and diag["equivalent_choice_pairs"] == 0
    assert diag["known_true_distractors"] == 0
    for key in ("answer_only_accuracy", "text_only_accuracy"):
        assert 0.0 <= diag[key] <= 1.0
    assert sum(diag["items"].values()) == len(result.items)
    assert sum(diag["relation_distribution"]["correct"].values()) == len(result.items)
    rows = sweep(sample, relevance, TableSimilarity(), result.params, [0.0, 4.0])
    assert [r["h"] for r in rows] == [0.0, 4.0]
    # a larger h trades relevance for dissimilarity: mean P_sim cannot rise
    assert rows[1]["mean_p_sim_table"] <= rows[0]["mean_p_sim_table"] + 1e-9


# --- P_sim from an NLI CrossEncoder --------------------------------------------------------


def test_cross_encoder_similarity_with_a_tiny_nli_model(
    tmp_path: Path, sample: list[Record], fresh: RelevanceModel
) -> None:
    path = build_tiny_nli(tmp_path / "nli", concepts_of(sample))
    scorer = load_similarity(str(path))
    assert scorer.name == str(path) and getattr(scorer, "entail_col", None) == 1
    a, b = ("cat", "on", "bed"), ("cat", "under", "bed")
    p = scorer.score([a, b, a], [b, a, b])
    assert p.shape == (3,) and ((p > 0) & (p < 1)).all() and p[0] == p[2]

    queries = [r for r in kept_true(sample) if r.label][:60]
    fresh.fit(queries)
    params = MatchParams(k=2, sim_top=20)
    items, missing = match_split(queries, "train", fresh, scorer, params, None)
    assert len(items) + missing == len(queries) and len(items) >= 30
    for it in items:
        assert len(set(it.choices)) == 3
        truth = it.triples[it.answer_index]
        assert all(not is_implied(truth, d) for d in it.distractor_triples)


def test_nli_models_need_an_entailment_output(tmp_path: Path) -> None:
    bad = build_tiny_nli(tmp_path / "bad", ["cat"], labels=("yes", "no"))
    with pytest.raises(ValueError, match="entailment"):
        load_similarity(str(bad))
    one = build_tiny_nli(tmp_path / "one", ["cat", "bed"], labels=("score",))
    scorer = load_similarity(str(one))  # one output: read as a logit
    p = scorer.score([("cat", "on", "bed")], [("cat", "under", "bed")])
    assert 0 < p[0] < 1


# --- the real model, once ------------------------------------------------------------------


def test_real_minilm_relevance_beats_the_prior_and_matching_fools_it() -> None:
    """The packaged all-MiniLM-L6-v2, offline, on a stratified real sample."""
    recs = vsr_sample(40, seed=1)
    rel = RelevanceModel(load_encoder(None))
    res = run_matching(recs, rel, TableSimilarity(), MatchParams(k=3))
    queries = kept_true(recs)
    splits = assign_splits(queries)
    train = [q for q in queries if splits[q.id] == "train"]
    held = [q for q in queries if splits[q.id] != "train"]
    lp = rel.log_proba([(q.subj, q.obj) for q in held])
    model_ll = np.mean([lp[i, rel.index[q.relation]] for i, q in enumerate(held)])
    counts = Counter(q.relation for q in train)
    prior_ll = np.mean([np.log((counts[q.relation] + 0.5) / (len(train) + 0.5 * 71)) for q in held])
    assert model_ll > prior_ll, "the concept embeddings must carry information about relations"
    diag = diagnose(res, rel)
    assert diag["text_only_accuracy"] < diag["chance"] + 0.08
    assert diag["implied_by_truth_share"] == 0.0


def test_unknown_relations_are_a_clear_error(fresh: RelevanceModel) -> None:
    recs = [
        _rec(1, "a.jpg", "cat", "on", "bed"),
        Record(
            2,
            "b.jpg",
            "dog",
            "levitating",
            "sofa",
            "The dog is levitating the sofa.",
            True,
            (True,) * 3,
        ),
    ]
    with pytest.raises(ValueError, match="unknown relation"):
        run_matching(recs, fresh, TableSimilarity(), MatchParams(k=1))


def test_captions_voted_true_are_known_true_whatever_their_label(fresh: RelevanceModel) -> None:
    # docs/matching.md: image 000000371890 of the raw release. "The bicycle is close to / over the
    # cat." were labelled False by their writers but 3 of 3 validators voted True: both are
    # true for the image and must never be distractors for "The bicycle is behind the cat."
    from matching.pipeline import known_true_by_image
    from matching.records import load_vsr_jsonl

    raw = VSR_VALIDATED.parent / "all_vsr_raw_data.jsonl"
    real = [r for r in load_vsr_jsonl(raw) if r.image == "000000371890.jpg"]
    known = known_true_by_image(real)["000000371890.jpg"]
    assert set(known) == {
        ("bicycle", "behind", "cat"),
        ("bicycle", "close to", "cat"),
        ("bicycle", "over", "cat"),
    }
    others = [
        _rec(101, "x.jpg", "dog", "near", "bench"),
        _rec(102, "y.jpg", "bird", "above", "car"),
        _rec(103, "z.jpg", "bus", "left of", "car"),
        _rec(104, "w.jpg", "cat", "far from", "dog"),
        _rec(105, "v.jpg", "car", "under", "bus"),
        _rec(106, "u.jpg", "cat", "by", "bed"),
        _rec(107, "s.jpg", "dog", "facing", "cat"),
        _rec(108, "r.jpg", "cat", "on", "bed"),
        _rec(109, "q.jpg", "bird", "beyond", "bench"),
    ]
    # Two of each, so the matching has room for every query (capacity 2 per relation).
    others += [_rec(r.id + 100, "t" + r.image, r.subj, r.relation, r.obj) for r in others]
    recs = real + others
    fresh.fit(kept_true(recs))
    splits = {r.id: "train" for r in recs}
    res = run_matching(recs, fresh, TableSimilarity(), MatchParams(k=2), splits=splits, fit=False)
    (item,) = [it for it in res.items if it.query.image == "000000371890.jpg"]
    assert not {"near", "close to", "by", "above", "over"} & set(item.relations), item.choices


def test_no_two_options_imply_each_other_or_are_usually_true_together(
    fresh: RelevanceModel,
) -> None:
    """The implication giveaway: 'on' implies 'touching', so an item offering both has
    'touching' as its answer (a model reading all four options learns it). No two options of
    an item may stand in an implication (either way), equivalence or usually-true-together."""
    from itertools import combinations

    from matching.option_conflicts import table_conflicts
    from vsr_core.relation_semantics import sim_probability

    rels = [
        "on",
        "touching",
        "near",
        "close to",
        "above",
        "on top of",
        "left of",
        "right of",
        "behind",
        "in front of",
        "under",
        "far from",
        "facing",
        "next to",
    ]
    recs = [_rec(i, f"im{i}.jpg", "cat", rels[i % len(rels)], "bed") for i in range(1, 141)]
    res = run_matching(
        recs,
        fresh,
        TableSimilarity(),
        MatchParams(k=3, filter_above=0),
        splits={r.id: "train" for r in recs},
    )
    assert len(res.items) >= 30  # queries left short are dropped and the rest re-matched
    conflicts = table_conflicts()
    for it in res.items:
        assert not {"on", "touching"} <= set(it.relations), it.relations
        for a, b in combinations(it.triples, 2):
            assert not is_implied(a, b) and not is_implied(b, a), (a, b)
            assert sim_probability(a, b) < 0.5 and sim_probability(b, a) < 0.5, (a, b)
            assert not conflicts.relations_conflict(a[1], b[1])


def test_validated_cooccurrence_adds_usually_true_together_pairs() -> None:
    from matching.option_conflicts import conflicts_for, cooccurring_pairs

    yes, no = (True,) * 3, (False,) * 3
    recs = []
    for i in range(12):  # 'behind' true with 'facing' on 10 of 12 images
        recs.append(_rec(2 * i, f"p{i}.jpg", "dog", "behind", "car", yes))
        recs.append(
            _rec(
                2 * i + 1, f"p{i}.jpg", "dog", "facing", "car", yes if i < 10 else no, label=i < 10
            )
        )
    assert ("behind", "facing") in cooccurring_pairs(recs)
    assert ("behind", "facing") not in cooccurring_pairs(recs[:16])  # 8 images: too few
    assert conflicts_for(recs).relations_conflict("facing", "behind")


def test_filtering_drops_the_items_answer_only_models_find_predictable(  # type: ignore[no-untyped-def]
    result, sample: list[Record], relevance: RelevanceModel
) -> None:
    """AFLite-style: an item is dropped when models that never saw it (cross-fitted on
    train, fitted on train for dev/test) give its answer a mean probability >= the bound,
    and a dev / test item also when the stack over their scores gives it >= its bound."""
    from matching.filtering import predictability

    base = run_matching(
        sample, relevance, TableSimilarity(), MatchParams(filter_above=0), fit=False
    )
    train = base.items_in("train")
    others = [it for it in base.items if it.split != "train"]
    p_train, p_other, s_other = predictability(train, others, 0, 0.4)
    first = {
        it.query.id for it, p in zip(train + others, [*p_train, *p_other], strict=True) if p < 0.4
    }
    only_first = run_matching(
        sample,
        relevance,
        TableSimilarity(),
        MatchParams(filter_above=0.4, filter_stack_above=0),
        fit=False,
    )
    assert {it.query.id for it in only_first.items} == first
    assert sum(only_first.filtered.values()) == len(base.items) - len(first) > 0
    # The stack scores exactly the dev / test items the first pass keeps.
    assert list(np.isnan(s_other)) == [p >= 0.4 for p in p_other]
    bound = float(np.quantile(s_other[~np.isnan(s_other)], 0.8))
    both = run_matching(
        sample,
        relevance,
        TableSimilarity(),
        MatchParams(filter_above=0.4, filter_stack_above=bound),
        fit=False,
    )
    stacked = {it.query.id for it, s in zip(others, s_other, strict=True) if s >= bound}
    assert stacked and {it.query.id for it in both.items} == first - stacked
    assert base.filtered == {}
