"""Raking inside selection (matching.raking): the bonus by hand, and on a real VSR sample
that it moves every split towards k distractors per answer without losing an item."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from matching.pipeline import Item, MatchParams, round_weights, run_matching
from matching.raking import Raking, feature_counts, imbalance
from matching.records import Record
from matching.relevance import RelevanceModel, load_encoder
from matching.similarity import TableSimilarity
from tests.matching.support import VSR_VALIDATED, build_tiny_encoder, concepts_of, vsr_sample
from vsr_core.captions import render_caption

pytestmark = pytest.mark.skipif(not VSR_VALIDATED.exists(), reason="real VSR data not found")


def _item(qid: int, truth: tuple[str, str, str], others: list[str], answer: int = 0) -> Item:
    s, r, o = truth
    q = Record(qid, f"{qid}.jpg", s, r, o, render_caption(s, r, o), True, (True,) * 3)
    triples = [(s, x, o) for x in others]
    triples.insert(answer, truth)
    return Item(
        q, "train", [render_caption(*t) for t in triples], triples, answer, [qid] * len(triples)
    )


def test_bonus_by_hand_accumulates_over_rounds() -> None:
    items = [
        _item(1, ("cat", "on", "bed"), ["under", "near", "behind"]),
        _item(2, ("cat", "on", "bed"), ["under", "in", "behind"], answer=2),
        _item(3, ("dog", "under", "bed"), ["on", "near", "in"], answer=1),
    ]
    ans, dis = feature_counts(items)
    assert ans[("pr", "cat", "bed", "on")] == 2 and dis[("pr", "cat", "bed", "on")] == 0
    assert ans[("or", "bed", "on")] == 2 and dis[("or", "bed", "on")] == 1
    assert dis[("sr", "cat", "under")] == 2 and ans[("sr", "cat", "under")] == 0
    rake = Raking(0.5, k=3).update(items)
    q = items[0].query
    got = rake([q], ["on", "under", "near", "zebra-ish"])[0]
    on = 0.5 * (np.log((3 * 2 + 1) / 1) + np.log((3 * 2 + 1) / (1 + 1)) + np.log(7 / 1))
    under = 0.5 * (np.log(1 / 3) + np.log((3 * 1 + 1) / (2 + 1)) + np.log(1 / 3))
    near = 0.5 * (np.log(1 / 2) + np.log(1 / 3) + np.log(1 / 2))
    assert got == pytest.approx([on, under, near, 0.0])
    # Answered more than k distractors' worth: attractive; only ever a distractor: not.
    assert got[0] > 0 > got[2]
    rake.update(items)  # the same imbalance again: the bonus doubles
    assert rake([q], ["on"])[0, 0] == pytest.approx(2 * on)


def test_imbalance_is_zero_when_every_feature_has_k_distractors_per_answer() -> None:
    rels = ["on", "under", "near", "behind"]
    # Each relation is the answer once and a distractor in the three other items.
    items = [_item(i, ("cat", r, "bed"), [x for x in rels if x != r]) for i, r in enumerate(rels)]
    for level in ("sr", "or", "pr"):
        assert imbalance(items, 3, level) == 0.0
    skew = [_item(i, ("cat", "on", "bed"), ["under", "near", "behind"]) for i in range(4)]
    assert imbalance(skew, 3, "pr") == 1.0


def test_round_weights_add_the_bonus_after_the_clip() -> None:
    log_rel = np.array([[-50.0, np.log(0.5)]])
    extra = np.array([[2.0, -1.0]])
    w = round_weights(log_rel, np.zeros((1, 2)), np.ones((1, 2), bool), 1.0, 1e-4, extra)
    assert w[0] == pytest.approx([np.log(1e-4) + 2.0, np.log(0.5) - 1.0])


def test_bad_raking_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="rake_rounds"):
        MatchParams(rake_rounds=-1)
    with pytest.raises(ValueError, match="rake_strength"):
        MatchParams(rake_strength=float("nan"))


@pytest.fixture(scope="module")
def sample() -> list[Record]:
    return vsr_sample(40)


@pytest.fixture(scope="module")
def relevance(tmp_path_factory: pytest.TempPathFactory, sample: list[Record]) -> RelevanceModel:
    path = build_tiny_encoder(tmp_path_factory.mktemp("enc"), concepts_of(sample))
    return RelevanceModel(load_encoder(str(path)))


def test_raking_balances_every_split_and_keeps_every_item(
    sample: list[Record], relevance: RelevanceModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a real VSR sample: raking lowers the subject x relation and object x relation
    imbalance of the train split (what the adversaries learn from; the sample's dev and
    test splits are too sparse to move much), keeps the items and leaves the
    items well formed."""
    import matching.pipeline

    # Re-match until no query is left short of k distractors: the balance is then exact.
    monkeypatch.setattr(matching.pipeline, "REMATCHES", 10_000)
    off = run_matching(
        sample, relevance, TableSimilarity(), replace(MatchParams(), rake_rounds=0, filter_above=0)
    )
    on = run_matching(
        sample,
        relevance,
        TableSimilarity(),
        replace(MatchParams(), rake_rounds=2, rake_strength=0.5, filter_above=0),
    )
    # Queries left without k distractors (options may not imply each other) are dropped;
    # raking may change which.
    assert on.queries == off.queries
    assert min(len(on.items), len(off.items)) > 250
    for it in on.items:
        assert len(set(it.choices)) == 4 and it.choices[it.answer_index] == it.query.caption
        assert all((t[0], t[2]) == (it.query.subj, it.query.obj) for t in it.triples)
    for level in ("sr", "or"):
        before = imbalance(off.items_in("train"), 3, level)
        after = imbalance(on.items_in("train"), 3, level)
        assert after < before, (level, before, after)
    # Relations alone stay exactly balanced (every response once per round).
    for split in ("train", "dev", "test"):
        its = on.items_in(split)
        answers = sorted(it.relations[it.answer_index] for it in its)
        distractors = sorted(t[1] for it in its for t in it.distractor_triples)
        assert distractors == sorted(answers * 3)
