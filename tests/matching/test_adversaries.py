"""Held-out answer-only adversaries on the real VSR release (full validated file, packaged
MiniLM, offline): matching must leave them near chance on test."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from matching.adversaries import wilson
from matching.diagnostics import measured_suite
from matching.pipeline import MatchParams
from matching.relevance import RelevanceModel, load_encoder
from tests.matching.support import ADVERSARY_RUNS, VSR_VALIDATED, run_on_export_split

pytestmark = [
    pytest.mark.skipif(not VSR_VALIDATED.exists(), reason="real VSR data not found"),
    # Five matchings of the full release (two each with raking) and their suites: minutes
    # on a busy 2-core machine, more than the default 600 s when other jobs share it.
    pytest.mark.timeout(2400),
]

# "A few points above chance" (0.25 at k = 3): the target, 0.30.
FEW_POINTS = 0.05


@pytest.fixture(scope="module")
def relevance() -> RelevanceModel:
    return RelevanceModel(load_encoder(None))


@pytest.fixture(scope="module")
def suites(relevance: RelevanceModel) -> dict[str, dict[str, Any]]:
    """One run per split seed, each with P_rel fitted on its own train split as `vsr match`
    does (a P_rel fitted on another seed's train has seen this seed's test truths)."""
    out = {}
    for balance, split_seed in ADVERSARY_RUNS:
        # VCR's weights as they were: without the AFLite-style filter.
        params = replace(
            MatchParams(),
            balance=balance,
            filter_above=MatchParams().filter_above if balance != "off" else 0,
        )
        res = run_on_export_split(relevance, params, split_seed)
        # The suite as `vsr match --report` and build-dataset compute it: on the items alone.
        out[f"{balance}{split_seed}"] = measured_suite(
            res.items_in("train"), res.items_in("test"), relevance.encoder, 0
        )
    return out


def test_wilson_interval_is_the_textbook_one() -> None:
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0


def test_suite_sees_what_vcr_weights_leave(suites: dict[str, dict[str, Any]]) -> None:
    """The audit's finding, reproduced: plain VCR weights are far above chance."""
    off = suites["off0"]
    models = {"tfidf_pair_rel_lr", "pair_counts", "embedding_mlp", "listwise_pairs_lr"}
    models |= {"listwise_stack_gbm"}
    # Every model is also read the other way ("least likely"); P_rel has both by name.
    assert set(off["adversaries"]) == (
        models | {f"{m}_least" for m in models} | {"p_rel_least", "p_rel_most"}
    )
    assert off["strongest"]["accuracy"] > 0.40
    assert off["strongest"]["accuracy"] == max(a["accuracy"] for a in off["adversaries"].values())


def test_default_matching_defeats_most_of_what_vcr_weights_leave(
    suites: dict[str, dict[str, Any]],
) -> None:
    off = suites["off0"]
    for key in ("soft0", "soft1"):
        soft = suites[key]
        # Queries without k compatible distractors and predictable items are dropped.
        assert soft["n_test"] > 750
        assert soft["strongest"]["accuracy"] <= 0.40, soft
        assert soft["strongest"]["accuracy"] < off["strongest"]["accuracy"] - 0.10, (soft, off)


def test_default_matching_leaves_every_adversary_near_chance(
    suites: dict[str, dict[str, Any]],
) -> None:
    """The target of docs/matching.md: the strongest answer-only adversary (listwise ones
    included) at most 0.30 at k = 3 on every split seed, most queries kept. Seeds 2 and 3
    were not used to choose MatchParams.aim or the raking parameters: they keep the figure
    honest."""
    for key in ("soft0", "soft1", "soft2", "soft3"):
        soft = suites[key]
        assert soft["strongest"]["accuracy"] <= soft["chance"] + FEW_POINTS, soft
        assert soft["n_test"] > 750  # about three quarters of the test queries keep an item
