"""Train/dev/test splits of the validated set (VSR section 3.4), deterministic for a seed.

- Random: 70/10/20. By default grouped, so Examples that share a group (the True and False
  halves of one annotation, which share their caption) land in the same part; the VSR
  release splits per Example and does not do this. ``unit="example"`` splits per Example
  and then reproduces the release's sizes exactly (7,680 / 1,097 / 2,195 of 10,972).
- Zero-shot: the concepts are partitioned into groups of 50/20/30 %; an Example is kept only
  if its subj and obj fall into the same group. One shuffle keeps anywhere from a quarter to
  half of VSR depending on luck, so the partition is searched (``ZEROSHOT_SHUFFLES`` seeded
  shuffles, then swaps of two concepts between parts while they help): the one that keeps
  the most Examples with train at least half of them, deterministic for the seed.
  ``check_zeroshot`` proves no concept occurs in two parts and raises otherwise.

Part sizes use floor for train and dev and give the rest to test (what matches the
release's sizes).
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, Protocol

import numpy as np

PARTS = ("train", "dev", "test")
RANDOM_RATIOS = (Fraction(7, 10), Fraction(1, 10), Fraction(2, 10))
ZEROSHOT_RATIOS = (Fraction(5, 10), Fraction(2, 10), Fraction(3, 10))
SplitUnit = Literal["annotation", "example"]
# The binary dataset is what people wrote (here or in an imported release). Machine-made
# negatives (origin adversarial) never decide a split: judging them must not move a human
# Example, nor a multiple-choice truth, from one part to another.
BINARY_ORIGINS = frozenset({"human", "imported"})


class SplitError(RuntimeError):
    """A split violates its guarantee (a leak); the export must stop."""


@dataclass(frozen=True)
class SplitItem:
    key: int  # Example id
    group: Hashable  # Examples of one group stay together in the random split
    subj: str
    obj: str


class SplitRow(Protocol):
    """What the binary split reads of an Example (vsr_dataset.export_rows.ExportRow)."""

    @property
    def id(self) -> int: ...
    @property
    def group(self) -> Hashable: ...
    @property
    def subj(self) -> str: ...
    @property
    def obj(self) -> str: ...
    @property
    def origin(self) -> str: ...
    @property
    def kept(self) -> bool: ...


def binary_items(rows: Iterable[SplitRow]) -> list[SplitItem]:
    """The Examples the random and zero-shot splits are made of: kept, written by people."""
    return [
        SplitItem(r.id, r.group, r.subj, r.obj)
        for r in rows
        if r.kept and r.origin in BINARY_ORIGINS
    ]


def binary_random_split(
    rows: Iterable[SplitRow],
    seed: int,
    ratios: Sequence[Fraction] = RANDOM_RATIOS,
    unit: SplitUnit = "annotation",
) -> dict[str, list[int]]:
    """The random split of the kept human and imported Examples: the one function both
    matching (``vsr_dataset.match_splits``) and the export call, so an mc truth and its
    binary Example always share a part for the same seed, ratios, unit and keep rule."""
    return random_split(binary_items(rows), seed, ratios, unit)


def parse_ratios(text: str) -> tuple[Fraction, Fraction, Fraction]:
    """'70/10/20' or '0.7,0.1,0.2' -> three fractions summing to 1."""
    parts = [p for p in text.replace(",", "/").split("/") if p.strip()]
    if len(parts) != 3:
        raise ValueError(f"ratios must have three parts like 70/10/20, got {text!r}")
    try:
        vals = [Fraction(p.strip()) for p in parts]
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"ratios must be numbers like 70/10/20, got {text!r}") from None
    if any(v < 0 for v in vals) or sum(vals) <= 0:
        raise ValueError(f"ratios must be non-negative and not all zero, got {text!r}")
    total = sum(vals)
    a, b, c = (v / total for v in vals)
    return a, b, c


def _targets(n: int, ratios: Sequence[Fraction]) -> tuple[int, int]:
    return math.floor(n * ratios[0]), math.floor(n * ratios[1])


def random_split(
    items: Sequence[SplitItem],
    seed: int,
    ratios: Sequence[Fraction] = RANDOM_RATIOS,
    unit: SplitUnit = "annotation",
) -> dict[str, list[int]]:
    """Shuffle groups (or single Examples) with the seed and fill train, then dev, then test."""
    groups: dict[Hashable, list[int]] = {}
    for it in sorted(items, key=lambda i: i.key):
        g = it.group if unit == "annotation" else it.key
        groups.setdefault(g, []).append(it.key)
    # Order groups by their first Example id so the shuffle input is the same on every run.
    order = sorted(groups.values(), key=lambda ks: ks[0])
    random.Random(f"random-split:{seed}").shuffle(order)
    n_train, n_dev = _targets(len(items), ratios)
    out: dict[str, list[int]] = {p: [] for p in PARTS}
    done = 0
    for keys in order:
        part = "train" if done < n_train else "dev" if done < n_train + n_dev else "test"
        out[part].extend(keys)
        done += len(keys)
    for p in PARTS:
        out[p].sort()
    check_random(items, out, unit)
    return out


def check_random(items: Sequence[SplitItem], split: dict[str, list[int]], unit: SplitUnit) -> None:
    seen: dict[int, str] = {}
    for part, keys in split.items():
        for k in keys:
            if k in seen:
                raise SplitError(f"Example {k} is in both {seen[k]} and {part}")
            seen[k] = part
    if len(seen) != len(items):
        raise SplitError(f"the random split holds {len(seen)} of {len(items)} Examples")
    if unit == "annotation":
        where: dict[Hashable, str] = {}
        for it in items:
            part = seen[it.key]
            if where.setdefault(it.group, part) != part:
                raise SplitError(
                    f"group {it.group!r} is split between {where[it.group]} and {part}"
                )


@dataclass(frozen=True)
class ZeroShotSplit:
    parts: dict[str, list[int]]
    concepts: dict[str, list[str]]
    excluded: int


ZEROSHOT_SHUFFLES = 200
ZEROSHOT_SWAP_ROUNDS = 20
ZEROSHOT_MIN_DEV = 0.04
ZEROSHOT_MIN_TEST = 0.10


def _zeroshot_score(pairs: np.ndarray, part: np.ndarray) -> tuple[int, int]:
    """(feasible, kept): kept Examples of a concept -> part assignment; feasible when the
    ratio is train-heavy like the paper's (4,713/231/616 = 85/4/11 %): train at least half,
    dev at least ZEROSHOT_MIN_DEV and test at least ZEROSHOT_MIN_TEST of the kept."""
    kept = [int(pairs[np.ix_(part == p, part == p)].sum()) for p in range(3)]
    total = sum(kept)
    ok = (
        kept[0] * 2 >= total
        and kept[1] >= ZEROSHOT_MIN_DEV * total
        and kept[2] >= ZEROSHOT_MIN_TEST * total
        and total > 0
    )
    return int(ok), total


def _search_partition(pairs: np.ndarray, sizes: tuple[int, int, int], seed: int) -> np.ndarray:
    """Best concept -> part assignment found: seeded shuffles, then improving swaps.
    Written here because no library solves this small graph-partition problem with our
    constraint; the search is cheap (~80 concepts) and deterministic for the seed."""
    rng = random.Random(f"zeroshot-split:{seed}")
    base = np.repeat(np.arange(3), sizes)
    best, best_score = base.copy(), (-1, -1)
    for _ in range(ZEROSHOT_SHUFFLES):
        order = list(base)
        rng.shuffle(order)
        cand = np.array(order)
        sc = _zeroshot_score(pairs, cand)
        if sc > best_score:
            best, best_score = cand, sc
    n = len(best)
    for _ in range(ZEROSHOT_SWAP_ROUNDS):
        improved = False
        for a in range(n):
            for b in range(a + 1, n):
                if best[a] == best[b]:
                    continue
                cand = best.copy()
                cand[a], cand[b] = best[b], best[a]
                sc = _zeroshot_score(pairs, cand)
                if sc > best_score:
                    best, best_score, improved = cand, sc, True
        if not improved:
            break
    return best


def zeroshot_split(
    items: Sequence[SplitItem], seed: int, ratios: Sequence[Fraction] = ZEROSHOT_RATIOS
) -> ZeroShotSplit:
    concepts = sorted({c for it in items for c in (it.subj, it.obj)})
    n_train, n_dev = _targets(len(concepts), ratios)
    sizes = (n_train, n_dev, len(concepts) - n_train - n_dev)
    index = {c: i for i, c in enumerate(concepts)}
    pairs = np.zeros((len(concepts), len(concepts)), dtype=np.int64)
    for it in items:
        pairs[index[it.subj], index[it.obj]] += 1
    part_idx = _search_partition(pairs, sizes, seed) if concepts else np.zeros(0, dtype=int)
    groups = {
        p: sorted(c for c, i in zip(concepts, part_idx, strict=True) if i == k)
        for k, p in enumerate(PARTS)
    }
    part_of = {c: p for p, cs in groups.items() for c in cs}
    parts: dict[str, list[int]] = {p: [] for p in PARTS}
    excluded = 0
    for it in sorted(items, key=lambda i: i.key):
        if part_of[it.subj] == part_of[it.obj]:
            parts[part_of[it.subj]].append(it.key)
        else:
            excluded += 1
    split = ZeroShotSplit(parts, groups, excluded)
    check_zeroshot(items, split.parts)
    return split


def check_zeroshot(items: Sequence[SplitItem], parts: dict[str, list[int]]) -> None:
    """Prove that no concept occurs in two zero-shot parts (from the Examples themselves)."""
    by_key = {it.key: it for it in items}
    owner: dict[str, str] = {}
    for part, keys in parts.items():
        for k in keys:
            it = by_key[k]
            for c in (it.subj, it.obj):
                if owner.setdefault(c, part) != part:
                    raise SplitError(
                        f"zero-shot leak: concept {c!r} is in both {owner[c]} and {part}"
                    )
