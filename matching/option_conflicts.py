"""Which two captions may not stand together among one item's options.

A model that reads all four options learns any relation between them: when "on" and
"touching" are offered together, "on" implies "touching", so if "on" were the answer
"touching" would be true too, and "touching" must be the answer. The same holds for
equivalent captions and for captions that are usually true together (one of them is then
likely true as a distractor, or gives the other away). So two options *conflict* when, with
the same or swapped subject and object,

- the relation-semantics table (the active study's, ``matching.similarity.table_matrices``)
  says one implies the other, in either direction (same, equivalent, entailed), or rates
  P(one | other) >= ``USUALLY_TOGETHER`` in either direction, or
- validated data says they are usually true together: on images where validators voted
  one caption True and judged the other (same subject and object), the other was voted True
  at least ``DATA_TOGETHER`` of the time, over at least ``MIN_SUPPORT`` such images
  (either direction).

Matching (matching.pipeline) never offers two conflicting options in one item, and never
offers a distractor that conflicts with a caption validators voted True for that image.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from matching.records import Record
from matching.similarity import table_matrices
from vsr_core.agreement import DEFAULT_THRESHOLD, Threshold, is_kept

# "Usually", by the table: at least half the time.
USUALLY_TOGETHER = 0.5
# By validated data, which is noisier: at least 60 % of at least 10 images. At 50 % of 5
# images VSR's raw release adds 86 pairs (touching with most relations) and a sixth of
# the queries on split seed 5 find no k distractors; at 60 % of 10, 19 pairs.
DATA_TOGETHER = 0.6
MIN_SUPPORT = 10


@dataclass(frozen=True)
class Conflicts:
    """Relation x relation conflicts for the same objects and for swapped objects."""

    same: np.ndarray  # bool R x R, symmetric
    swap: np.ndarray  # bool R x R: "A r1 B" against "B r2 A"
    from_data: frozenset[tuple[str, str]] = frozenset()  # pairs added by validated data

    def lookup(
        self,
        a_rel: np.ndarray,
        a_s: np.ndarray,
        a_o: np.ndarray,
        b_rel: np.ndarray,
        b_s: np.ndarray,
        b_o: np.ndarray,
    ) -> np.ndarray:
        """Broadcasting: do the captions (a_s a_rel a_o) and (b_s b_rel b_o) conflict?"""
        same = (a_s == b_s) & (a_o == b_o)
        swap = (a_s == b_o) & (a_o == b_s) & ~same
        conflict: np.ndarray = np.where(
            same, self.same[a_rel, b_rel], swap & self.swap[a_rel, b_rel]
        )
        return conflict

    def relations_conflict(self, a: str, b: str) -> bool:
        index = table_matrices()[0]
        return bool(self.same[index[a], index[b]])


def table_conflicts(together: float = USUALLY_TOGETHER) -> Conflicts:
    """Conflicts by the active relation-semantics table alone."""
    _, p_same, p_swap, imp_same, imp_swap = table_matrices()
    likely_same, likely_swap = p_same >= together, p_swap >= together
    same = imp_same | imp_same.T | likely_same | likely_same.T
    swap = imp_swap | imp_swap.T | likely_swap | likely_swap.T
    return Conflicts(same, swap)


def cooccurring_pairs(
    records: Iterable[Record],
    threshold: Threshold = DEFAULT_THRESHOLD,
    together: float = DATA_TOGETHER,
    min_support: int = MIN_SUPPORT,
) -> set[tuple[str, str]]:
    """Relation pairs (a, b) validated data shows usually true together: among (image,
    subject, object) where a caption with ``a`` was voted True and one with ``b`` was judged
    (voted True or False by the keep rule), ``b`` was True at least ``together`` of the time
    over at least ``min_support`` of them."""
    by_place: dict[tuple[str, str, str], dict[str, bool]] = {}
    for r in records:
        true = is_kept(True, list(r.votes), threshold)
        false = is_kept(False, list(r.votes), threshold)
        if true or false:
            place = by_place.setdefault((r.image, r.subj, r.obj), {})
            place[r.relation] = place.get(r.relation, False) or true
    judged: Counter[tuple[str, str]] = Counter()
    both: Counter[tuple[str, str]] = Counter()
    for verdicts in by_place.values():
        for a, a_true in verdicts.items():
            if not a_true:
                continue
            for b, b_true in verdicts.items():
                if b != a:
                    judged[(a, b)] += 1
                    both[(a, b)] += int(b_true)
    return {p for p, n in judged.items() if n >= min_support and both[p] / n >= together}


def conflicts_for(
    records: Iterable[Record],
    threshold: Threshold = DEFAULT_THRESHOLD,
    together: float = DATA_TOGETHER,
    min_support: int = MIN_SUPPORT,
) -> Conflicts:
    """The table's conflicts plus the pairs validated ``records`` show usually true together."""
    base = table_conflicts()
    index = table_matrices()[0]
    same = base.same.copy()
    added = set()
    for a, b in cooccurring_pairs(records, threshold, together, min_support):
        if a in index and b in index:
            same[index[a], index[b]] = same[index[b], index[a]] = True
            added.add((a, b))
    return Conflicts(same, base.swap, frozenset(added))


def meaning_key(triple: tuple[str, str, str]) -> tuple[str, str, str]:
    """One key for every caption that says the same as ``triple`` up to synonym or converse
    ("The cat is under the table." and "The table is above the cat." share one), by the
    active study's table: the smallest of its equivalent forms."""
    from matching.study_scope import active_table

    s, r, o = triple
    table = active_table()
    forms = [(s, r, o)]
    try:
        implied = table.implied_literals((r, False))
    except KeyError:  # a relation the active table does not know: only itself
        return triple
    for rel, swapped in implied:
        if (r, False) in table.implied_literals((rel, swapped)):
            forms.append((o, rel, s) if swapped else (s, rel, o))
    return min(forms)
