"""vsr_core.agreement against hand-worked cases and independent implementations."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from vsr_core.agreement import (
    ItemVotes,
    aggregate_labels,
    agreement_share,
    as_fraction,
    category_counts,
    dataset_agreement,
    example_agreement,
    fleiss_kappa,
    is_decided,
    is_kept,
    is_unanimous,
    krippendorff_alpha,
    pair_disagreement,
    per_relation_disagreement,
    per_worker_agreement,
    wilson_interval,
)


def item(i: int, label: bool, values: tuple[int, ...], rel: str = "on") -> ItemVotes:
    return ItemVotes(i, label, tuple((f"w{k}", bool(v)) for k, v in enumerate(values)), rel)


@pytest.mark.parametrize(
    ("agree", "n", "kept"),
    [
        (2, 3, True),
        (3, 4, True),
        (4, 6, True),
        (1, 2, False),
        (1, 3, False),
        (2, 4, False),
        (3, 5, False),
        (4, 5, True),
        (0, 0, False),
        (1, 1, True),
        (5, 7, True),
        (4, 7, False),
    ],
)
def test_keep_rule_is_a_proportion(agree: int, n: int, kept: bool) -> None:
    votes = [True] * agree + [False] * (n - agree)
    assert is_kept(True, votes) is kept
    # The same with a float threshold as a settings form would store it.
    assert is_kept(True, votes, 2 / 3) is kept
    assert is_kept(True, votes, 0.6667) is kept
    # A False label agrees with False votes.
    assert is_kept(False, [not v for v in votes]) is kept


def test_example_agreement_fields() -> None:
    ea = example_agreement(False, [False, False, True, False])
    assert (ea.n_votes, ea.n_agree, ea.share, ea.kept, ea.unanimous) == (4, 3, 0.75, True, False)
    assert is_unanimous(True, [True, True, True])
    assert not is_unanimous(True, [])
    assert agreement_share(True, []) is None
    assert example_agreement(True, []).kept is False


def test_threshold_parsing() -> None:
    assert as_fraction(2 / 3) == Fraction(2, 3)
    assert as_fraction(0.75) == Fraction(3, 4)
    assert as_fraction(Fraction(4, 5)) == Fraction(4, 5)
    assert as_fraction(1) == 1
    for bad in (0, 0.0, 1.5, -0.2, float("nan")):
        with pytest.raises(ValueError):
            as_fraction(bad)


def _brute_force_decided(agree: int, n: int, max_votes: int, min_votes: int, t: Fraction) -> bool:
    """Enumerate every continuation of votes up to max_votes."""
    if n < min(min_votes, max_votes):
        return False
    now = n > 0 and agree >= t * n
    for extra in range(0, max_votes - n + 1):
        for seq in itertools.product([0, 1], repeat=extra):
            a, m = agree + sum(seq), n + extra
            if (m > 0 and a >= t * m) != now:
                return False
    return True


@pytest.mark.parametrize("max_votes", [3, 4, 5, 6, 7])
@pytest.mark.parametrize("t", [Fraction(2, 3), Fraction(1, 2), Fraction(3, 4)])
def test_is_decided_exact_matches_enumeration(max_votes: int, t: Fraction) -> None:
    for n in range(0, max_votes + 1):
        for agree in range(0, n + 1):
            want = _brute_force_decided(agree, n, max_votes, 3, t)
            got = is_decided(
                agree, n, max_votes=max_votes, min_votes=3, threshold=t, method="exact"
            )
            assert got is want, (agree, n, max_votes, t)


def _brute_force_next_vote(agree: int, n: int, max_votes: int, t: Fraction) -> bool:
    if n < 3:
        return False
    if n >= max_votes:
        return True
    now = Fraction(agree, n) >= t
    return all((Fraction(agree + a, n + 1) >= t) == now for a in (0, 1))


@pytest.mark.parametrize("max_votes", [3, 4, 5, 7])
@pytest.mark.parametrize("t", [Fraction(2, 3), Fraction(1, 2), Fraction(3, 4)])
def test_is_decided_next_vote_matches_enumeration(max_votes: int, t: Fraction) -> None:
    for n in range(0, max_votes + 1):
        for agree in range(0, n + 1):
            want = _brute_force_next_vote(agree, n, max_votes, t)
            got = is_decided(agree, n, max_votes=max_votes, min_votes=3, threshold=t)
            assert got is want, (agree, n, max_votes, t)


def test_next_vote_default_on_vsr_splits() -> None:
    # VSR: 3 votes, keep at 2/3, at most 5. Only a 2-1 (and then a 3-1) for the label goes on.
    assert is_decided(3, 3, max_votes=5) and is_decided(0, 3, max_votes=5)
    assert is_decided(1, 3, max_votes=5)  # 1/3 -> at best 2/4: not kept either way
    assert not is_decided(2, 3, max_votes=5)  # 2/3 kept, 2/4 not
    assert not is_decided(3, 4, max_votes=5)  # 3/4 kept, 3/5 not
    assert is_decided(2, 4, max_votes=5)  # 2/4 -> 3/5 still not kept
    assert is_decided(3, 5, max_votes=5)  # the maximum ends it


def test_is_decided_examples_and_bounds() -> None:
    # 3 of 3 with at most 3 votes: done. With up to 5: two dissents would give 3/5 < 2/3.
    assert is_decided(3, 3, max_votes=3, method="exact")
    assert not is_decided(3, 3, max_votes=5, method="exact")
    assert is_decided(4, 4, max_votes=6, method="exact")  # 4/6 still keeps
    assert is_decided(0, 3, max_votes=5, method="exact")  # 0+2 of 5 cannot reach 2/3
    assert not is_decided(2, 2, max_votes=5)  # under min_votes
    # Statistical variants: many unanimous votes decide, a split never does.
    assert is_decided(20, 20, max_votes=50, method="wilson")
    assert is_decided(20, 20, max_votes=50, method="beta")
    assert not is_decided(10, 15, max_votes=50, method="wilson")
    assert not is_decided(10, 15, max_votes=50, method="beta")
    assert is_decided(0, 12, max_votes=50, method="beta")
    with pytest.raises(ValueError):
        is_decided(4, 3, max_votes=5)
    with pytest.raises(ValueError):
        is_decided(1, 3, max_votes=5, method="nope")  # type: ignore[arg-type]


def test_wilson_interval_known_value() -> None:
    # Textbook value: 8 of 10 at 95% -> (0.490, 0.943).
    lo, hi = wilson_interval(8, 10, 0.95)
    assert lo == pytest.approx(0.4902, abs=1e-3)
    assert hi == pytest.approx(0.9433, abs=1e-3)


def test_fleiss_kappa_hand_worked_and_statsmodels() -> None:
    items = [
        item(i, True, vs)
        for i, vs in enumerate([(1, 1, 1), (1, 0, 1), (0, 0, 1), (1, 1, 0), (0, 0, 0)])
    ]
    table = category_counts(items)
    assert table == [[3, 0], [2, 1], [1, 2], [2, 1], [0, 3]]
    # By hand: P_bar = (1 + 1/3 + 1/3 + 1/3 + 1) / 5 = 0.6; p = (8/15, 7/15); Pe = 113/225.
    want = (0.6 - 113 / 225) / (1 - 113 / 225)
    assert fleiss_kappa(table) == pytest.approx(want)
    assert fleiss_kappa(table) == pytest.approx(sm_fleiss_kappa(np.array(table)))


def test_fleiss_kappa_random_equal_counts_agrees_with_statsmodels() -> None:
    rng = random.Random(7)
    for n_raters in (3, 4, 5):
        table = []
        for _ in range(200):
            t = sum(rng.random() < rng.choice([0.1, 0.5, 0.9]) for _ in range(n_raters))
            table.append([t, n_raters - t])
        assert fleiss_kappa(table) == pytest.approx(sm_fleiss_kappa(np.array(table)))


def test_fleiss_kappa_unequal_counts_hand_worked() -> None:
    # P_i = 1, 0, 6/12 -> P_bar = 0.5; p_true = 6/8 -> Pe = 0.625; kappa = -1/3.
    assert fleiss_kappa([[2, 0], [1, 1], [3, 1]]) == pytest.approx(-1 / 3)
    # Items with fewer than two ratings carry no pairs and are ignored.
    assert fleiss_kappa([[2, 0], [1, 1], [3, 1], [1, 0], [0, 0]]) == pytest.approx(-1 / 3)
    assert fleiss_kappa([[3, 0], [2, 0]]) is None  # one category only: undefined
    assert fleiss_kappa([]) is None


def test_krippendorff_alpha_matches_reliability_matrix() -> None:
    import krippendorff

    rng = random.Random(3)
    items, matrix = [], np.full((6, 60), np.nan)
    for i in range(60):
        raters = rng.sample(range(6), rng.choice([2, 3, 4]))
        truth = rng.random() < 0.5
        values = [truth if rng.random() < 0.8 else not truth for _ in raters]
        for r, v in zip(raters, values, strict=True):
            matrix[r, i] = float(v)
        items.append(ItemVotes(i, truth, tuple(zip(raters, values, strict=True))))
    want = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert krippendorff_alpha(items) == pytest.approx(want)


def test_pair_disagreement_enumerates_pairs() -> None:
    for t in range(5):
        for f in range(5):
            votes = [1] * t + [0] * f
            pairs = list(itertools.combinations(votes, 2))
            want = sum(a != b for a, b in pairs) / len(pairs) if pairs else None
            assert pair_disagreement(t, f) == (pytest.approx(want) if want is not None else None)


def test_per_relation_disagreement_averages_items() -> None:
    items = [
        item(0, True, (1, 1, 1), "near"),
        item(1, True, (1, 0, 1), "near"),
        item(2, False, (0, 1), "on"),
        item(3, False, (0,), "on"),
    ]
    out = per_relation_disagreement(items)
    assert out["near"] == {"n": 2, "disagreement": pytest.approx((0 + 2 / 3) / 2)}
    assert out["on"] == {"n": 1, "disagreement": 1.0}  # one vote has no pairs
    with_label = per_relation_disagreement(items, include_label=True)
    assert with_label["on"]["n"] == 2


def test_per_worker_agreement_leave_one_out() -> None:
    items = [item(0, True, (1, 1, 0)), item(1, False, (0, 1, 1)), item(2, True, (1, 0))]
    w = per_worker_agreement(items)
    # w0: item0 others (1,0) tie -> no majority; item1 others (1,1) -> True, w0 said False;
    # item2 others (0) -> False, w0 said True.
    assert (w["w0"].n_votes, w["w0"].agree_label, w["w0"].n_majority, w["w0"].agree_majority) == (
        3,
        3,
        2,
        0,
    )
    # w2: item0 others (1,1) -> True, said False; item1 others (0,1) tie.
    assert (w["w2"].n_votes, w["w2"].agree_label, w["w2"].n_majority, w["w2"].agree_majority) == (
        2,
        0,
        1,
        0,
    )
    assert w["w1"].majority_share == 0.0  # only item2 has a majority (w0: True)
    assert w["w0"].label_share == 1.0


def test_dataset_agreement_summary() -> None:
    items = [
        item(0, True, (1, 1, 1)),
        item(1, True, (1, 1, 0)),
        item(2, False, (0, 1, 1, 0)),
        item(3, False, (1, 1, 1, 1)),
        ItemVotes(4, True, ()),
    ]
    s = dataset_agreement(items)
    assert (s.n_items, s.n_votes, s.n_kept, s.n_unanimous) == (5, 14, 2, 1)
    assert s.kept_share == pytest.approx(0.4)
    assert s.votes_per_item == {0: 1, 3: 2, 4: 2}
    assert s.threshold == "2/3"
    assert dataset_agreement(items, threshold=0.5).n_kept == 3


def test_aggregate_labels_recover_truth_from_noisy_workers() -> None:
    # Three reliable workers and two that answer at random: Dawid-Skene and MACE should recover
    # the truth better than the raw label, which is wrong on a fifth of the items.
    rng = random.Random(11)
    items = []
    truth: dict[object, bool] = {}
    for i in range(300):
        t = rng.random() < 0.5
        truth[i] = t
        votes = [(f"good{k}", t if rng.random() < 0.9 else not t) for k in range(3)]
        votes += [(f"bad{k}", rng.random() < 0.5) for k in range(2)]
        label = t if i % 5 else not t
        items.append(ItemVotes(i, label, tuple(votes)))
    for model in ("dawid-skene", "mace", "majority"):
        agg = aggregate_labels(items, model)
        acc = sum(agg[i].label == truth[i] for i in agg) / len(agg)
        assert acc > 0.9, (model, acc)
        assert all(0.5 <= a.confidence <= 1.0 for a in agg.values())
    with pytest.raises(ValueError):
        aggregate_labels(items, "nope")  # type: ignore[arg-type]
