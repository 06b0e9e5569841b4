"""Raking: iterative balance of answer-only features inside selection (docs/matching.md).

The held-out adversaries of ``matching.adversaries`` are trained on the train items and
scored on the test items. What they can learn is how often an option's (subject, relation),
(object, relation) and (concept pair, relation) were the answer rather than a distractor.
Each round of the bipartite matching uses every response once, so relations alone are
balanced exactly; "soft" balance (``MatchParams.balance``) pulls a query's distractors
towards its pair's other answers, but for pairs too rare to balance it backs off, and the
subject x relation and object x relation counts stay skewed (on VSR's train split, seed 0:
29 % / 26 % total-variation imbalance against k distractors per answer).

Raking is an adversarial-filtering loop without a model: match the split, count each
feature's answers A and distractors D, give every candidate a bonus
``strength * log((k A + 1) / (D + 1))`` summed over its three features (a feature that was
a distractor too rarely becomes more attractive, one used too often less), and match the
split again with the same k rounds of max-weight bipartite matching. Bonuses add up over
rounds (multiplicative weights). It looks only at the split's own answers and distractors,
never at a model's predictions or at another split, so every adversary of the suite stays
held out. Measured choices (docs/matching.md): 1 round at strength 0.25 on every split;
stronger raking (2 rounds at 0.5) over-rides P_rel's aim and the embedding MLP and
``p_rel_most`` then find the truth as the most plausible option.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from matching.records import Record, Triple


class Item(Protocol):  # matching.pipeline.Item (not imported: pipeline imports this module)
    triples: list[Triple]
    answer_index: int


# An extra weight per (query, candidate relation group), added to W after its clip.
Adjust = Callable[[Sequence[Record], Sequence[str]], np.ndarray]
Feature = tuple[str, ...]


def features(s: str, r: str, o: str) -> tuple[Feature, Feature, Feature]:
    """What an answer-only model can count about a (remapped) option beyond its relation."""
    return ("sr", s, r), ("or", o, r), ("pr", s, o, r)


def feature_counts(items: Sequence[Item]) -> tuple[Counter[Feature], Counter[Feature]]:
    """(answers, distractors) per feature over ``items``."""
    ans: Counter[Feature] = Counter()
    dis: Counter[Feature] = Counter()
    for it in items:
        for i, t in enumerate(it.triples):
            (ans if i == it.answer_index else dis).update(features(*t))
    return ans, dis


def imbalance(items: Sequence[Item], k: int, level: str) -> float:
    """Total-variation distance between distractors and k x answers over one feature level
    ("sr", "or" or "pr"): 0 when every feature is a distractor exactly k times per answer."""
    ans, dis = feature_counts(items)
    keys = {f for f in set(ans) | set(dis) if f[0] == level}
    total = sum(dis[f] + k * ans[f] for f in keys)
    return sum(abs(dis[f] - k * ans[f]) for f in keys) / total if total else 0.0


class Raking:
    """The cumulative bonus of each feature; call it as an ``Adjust`` for ``match_split``."""

    def __init__(self, strength: float, k: int) -> None:
        self.strength = strength
        self.k = k
        self.bonus: dict[Feature, float] = {}

    def update(self, items: Sequence[Item]) -> Raking:
        ans, dis = feature_counts(items)
        for f in set(ans) | set(dis):
            step = float(np.log((self.k * ans[f] + 1) / (dis[f] + 1)))
            self.bonus[f] = self.bonus.get(f, 0.0) + self.strength * step
        return self

    def __call__(self, queries: Sequence[Record], relations: Sequence[str]) -> np.ndarray:
        """bonus(sr) + bonus(or) + bonus(pr) of every (query, relation): one vector per
        subject, object and pair, gathered per query (a dict look-up per cell
        was a second per 5,000-query fold)."""
        col = {r: j for j, r in enumerate(relations)}
        keys: dict[str, dict[tuple[str, ...], int]] = {"sr": {}, "or": {}, "pr": {}}
        rows = {
            level: np.array([keys[level].setdefault(k, len(keys[level])) for k in ks], dtype=int)
            for level, ks in (
                ("sr", [(q.subj,) for q in queries]),
                ("or", [(q.obj,) for q in queries]),
                ("pr", [(q.subj, q.obj) for q in queries]),
            )
        }
        table = {level: np.zeros((len(keys[level]), len(relations))) for level in keys}
        for f, v in self.bonus.items():
            level, who, rel = f[0], f[1:-1], f[-1]
            k, j = keys[level].get(who), col.get(rel)
            if k is not None and j is not None:
                table[level][k, j] = v
        # In the order of the sum it replaces (sr, or, pr), so the floats are the same.
        out = np.zeros((len(queries), len(relations)))
        for level in ("sr", "or", "pr"):
            out = out + table[level][rows[level]]
        return out
