"""Matching fold by fold in parallel processes (matching.folds) and the bounded adversary
suite (matching.diagnostics.SUITE_SAMPLE), on a real VSR sample with a tiny real encoder."""

from __future__ import annotations

from pathlib import Path

import pytest

from matching.diagnostics import diagnose
from matching.folds import folds
from matching.pipeline import MatchParams, run_matching
from matching.records import Record, kept_true, split_of
from matching.relevance import RelevanceModel, load_encoder
from matching.similarity import TableSimilarity
from tests.matching.support import VSR_VALIDATED, build_tiny_encoder, concepts_of, vsr_sample

pytestmark = pytest.mark.skipif(not VSR_VALIDATED.exists(), reason="real VSR data not found")


@pytest.fixture(scope="module")
def sample() -> list[Record]:
    return vsr_sample(14)


@pytest.fixture(scope="module")
def relevance(tmp_path_factory: pytest.TempPathFactory, sample: list[Record]) -> RelevanceModel:
    path: Path = build_tiny_encoder(tmp_path_factory.mktemp("enc"), concepts_of(sample))
    return RelevanceModel(load_encoder(str(path)))


def _picks(result) -> dict[int, tuple[str, tuple[str, ...], int]]:  # type: ignore[no-untyped-def]
    return {it.query.id: (it.split, tuple(it.choices), it.answer_index) for it in result.items}


def test_folds_keep_images_together_and_cover_every_query(sample: list[Record]) -> None:
    queries = kept_true(sample)
    parts = folds(queries, 100, seed=0)
    assert len(parts) == -(-len(queries) // 100) > 1
    assert sorted(q.id for p in parts for q in p) == sorted(q.id for q in queries)
    images = [{q.image for q in p} for p in parts]
    assert all(not (a & b) for i, a in enumerate(images) for b in images[i + 1 :])
    assert folds(queries, 0, seed=0) == [queries]
    assert folds(queries, len(queries), seed=0) == [queries]


def test_fold_matching_draws_distractors_from_the_fold_and_workers_do_not_matter(
    sample: list[Record], relevance: RelevanceModel
) -> None:
    params = MatchParams(fold_size=150)
    one = run_matching(sample, relevance, TableSimilarity(), params, workers=1)
    two = run_matching(sample, relevance, TableSimilarity(), params, fit=False, workers=2)
    assert _picks(one) == _picks(two)
    whole = run_matching(sample, relevance, TableSimilarity(), MatchParams(fold_size=0), fit=False)
    assert _picks(whole) != _picks(one)  # folds change which responses a query can get
    # Every train query (matched or not: folds are cut before matching).
    train = [q for q in kept_true(sample) if split_of(q.image, 0) == "train"]
    fold_of_id = {q.id: i for i, p in enumerate(folds(train, 150, 0)) for q in p}
    assert len(set(fold_of_id.values())) > 1
    for it in one.items_in("train"):
        assert all(fold_of_id[s] == fold_of_id[it.query.id] for s in it.round_sources)
    diag = diagnose(one, relevance, adversaries=False)
    assert diag["duplicate_choice_items"] == 0 and diag["implied_by_truth_share"] == 0.0
    # No two options may imply each other (matching.option_conflicts): a few queries find
    # no k distractors their fold allows.
    assert sum(diag["items"].values()) >= 0.8 * sum(one.queries.values())
    assert one.seconds["match_wall"] > 0


def test_adversary_suite_on_a_bounded_sample_says_so(
    sample: list[Record], relevance: RelevanceModel
) -> None:
    result = run_matching(sample, relevance, TableSimilarity(), MatchParams())
    n_train, n_test = len(result.items_in("train")), len(result.items_in("test"))
    limit = min(n_train, n_test) - 10
    suite = diagnose(result, relevance, suite_sample=limit)["answer_only_adversaries"]
    assert suite["n_test"] == limit
    assert suite["sampled_from"] == {"train": n_train, "test": n_test, "n_train": limit}
    full = diagnose(result, relevance, suite_sample=None)["answer_only_adversaries"]
    assert full["n_test"] == n_test and "sampled_from" not in full
