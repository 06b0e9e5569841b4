"""The parameters of adversarial matching (matching.pipeline) and their defaults.

Standard library only: `vsr match` reads its options' defaults from here without loading
numpy or the models.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from vsr_core.defaults import MATCH_H, MATCH_K, MATCH_SEED

if TYPE_CHECKING:
    from matching.assign import Method

# The adversary suite is fitted on at most this many train items and scored on at most this
# many test items (docs/matching.md, 1x and 10x): above VSR's 1x train split (3,954), so 1x
# runs see every item; at 10x the suite would cost more than the whole matching. The
# interval is the sample's.
SUITE_SAMPLE = 4000


class Balance(StrEnum):
    """(concept pair, relation) balance against answer-only models (MatchParams.balance)."""

    SOFT = "soft"
    PAIR = "pair"
    OFF = "off"


@dataclass(frozen=True)
class MatchParams:
    """How ``matching.pipeline.run_matching`` matches: one place for every default, which
    `vsr match` offers as its options' defaults (docs/matching.md)."""

    h: float = MATCH_H
    k: int = MATCH_K
    remap: bool = True
    table_filter: bool = True
    eps: float = 1e-4
    method: Method = "auto"
    dense_limit: int = 4000
    top_k: int = 50
    sim_top: int = 20  # model-based P_sim: scored only for each query's best groups by P_rel
    seed: int = MATCH_SEED
    # "pair": strict (concept pair, relation) balance: with remapping, a query's distractors
    # come only from the relations other queries of the same concept pair were answered
    # with, each used once per round, so every (pair, relation) is a distractor k times as
    # often as it is an answer (answer-only models learn nothing; rare pairs are dropped).
    # "soft": P_rel is replaced by leave-one-out pair-conditional counts of the split with
    # P_rel as back-off, which pulls distractors towards the pair's other answers.
    # "off": VCR's weights as they were. See docs/matching.md.
    balance: Balance = Balance.SOFT
    backoff: float = 1.0  # "soft": pseudo-count of each back-off (pair -> subj/obj -> even)
    # With "soft" balance, how far distractors aim at the truth's plausibility, not past it:
    # score = (1 - aim) log P_rel(d) - aim |log P_rel(d) - log P_rel(t)|. 0 is VCR's "as
    # plausible as possible" (a weakly modelled truth becomes the least plausible option);
    # 1 is "exactly as plausible as the truth" (the truth becomes the median one); 0.5
    # makes every relation at least as plausible as the truth equally good.
    # 0.4: lower worst case over split seeds than 0.6 on VSR (docs/matching.md).
    aim: float = 0.4
    # A split with more queries than this is matched fold by fold (matching.folds): the
    # grouped LP grows faster than n. 0: never. Above VSR's train split (3,954 queries), so
    # 1x runs are unchanged; a 10x train split becomes 8 folds.
    fold_size: int = 5000
    # Raking (matching.raking): with remapping, each split is matched again
    # this many times, each time with every candidate's (subject / object / pair,
    # relation) features pushed towards k distractors per answer by ``rake_strength``;
    # 0 rounds (or balance "off") turns it off. 1 round at 0.25: chosen on split seeds 0
    # and 1, checked on 2 and 3 (docs/matching.md).
    rake_rounds: int = 1
    rake_strength: float = 0.25
    # AFLite-style filtering (matching.filtering): items whose answer the answer-only
    # models that never saw them give at least this probability on average are dropped
    # (0: off). Chosen on split seeds 5-9 of the user's path (docs/matching.md).
    filter_above: float = 0.5
    # Its second pass: dev / test items whose answer a stack over the first pass's
    # cross-fitted scores (fitted on the kept train items) gives at least this share of
    # its item are dropped too (0: no second pass). 0.45: lowest worst case over split
    # seeds 5-9 of 0.4 / 0.45 on the user's path (docs/matching.md).
    filter_stack_above: float = 0.45

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("k (distractors per query) must be at least 1")
        if not (self.h >= 0 and math.isfinite(self.h)):
            raise ValueError("h must be a finite number >= 0")
        if not 0 < self.eps < 0.5:
            raise ValueError("eps must be in (0, 0.5)")
        if self.balance not in set(Balance):
            raise ValueError("balance must be pair, soft or off")
        # A plain string ("soft") is accepted as its member, so comparisons and as_dict agree.
        object.__setattr__(self, "balance", Balance(self.balance))
        if not 0 <= self.aim <= 1:
            raise ValueError("aim must be in [0, 1]")
        if not self.backoff > 0:
            raise ValueError("backoff must be > 0")
        if self.fold_size < 0:
            raise ValueError("fold_size must be >= 0 (0: no folds)")
        if self.rake_rounds < 0:
            raise ValueError("rake_rounds must be >= 0")
        if not (self.rake_strength >= 0 and math.isfinite(self.rake_strength)):
            raise ValueError("rake_strength must be a finite number >= 0")
        if not 0 <= self.filter_above <= 1:
            raise ValueError("filter_above must be in [0, 1] (0: no filtering)")
        if not 0 <= self.filter_stack_above <= 1:
            raise ValueError("filter_stack_above must be in [0, 1] (0: no second pass)")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
