"""Choose image pairs from a :class:`CocoIndex`, in memory (no database here).

Strategy (long tail not starved): each draw first picks a concept pair uniformly at random
among the concept pairs that still have an unused image pair (and are under the optional
per-concept-pair cap), then a random unused pair of its images. A concept pair with 3
eligible images is thus as likely to be drawn as (person, car) with thousands, until it runs
out; weighting by image count instead would give nearly every pair to a few head concepts.
This is the paper's "randomly select two concepts, then randomly sample a pair", restricted
to concept pairs that can still yield a pair so no draw is wasted.

With ``prefer_contrast`` each draw looks at up to ``CONTRAST_CANDIDATES`` unused image
pairs of the chosen concept pair and keeps the one whose layouts differ most
(``geometry.contrast``); the others go back to the pool.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from collection.coco import CocoIndex, ProgressFn
from collection.errors import UnknownCategoryError
from collection.geometry import GEOMETRY_VERSION, contrast, instance_shape, layout

CONTRAST_CANDIDATES = 8
_MATERIALISE_UP_TO = 20_000  # image pairs per concept pair listed up front; beyond: rejection

# (concept_a, concept_b, image1 coco id, image2 coco id): a pair's identity, normalised.
PairKey = tuple[str, str, int, int]


@dataclass(frozen=True, slots=True)
class SampledPair:
    concept_a: str  # alphabetically first
    concept_b: str
    cat_a: int
    cat_b: int
    image1: int  # COCO image ids, image1 < image2
    image2: int
    geometry: dict[str, Any]
    contrast: float

    @property
    def key(self) -> PairKey:
        return (self.concept_a, self.concept_b, self.image1, self.image2)


@dataclass
class SampleResult:
    pairs: list[SampledPair]
    available: int  # new pairs that could be drawn under the rules (after cap and exclusions)
    eligible_concept_pairs: int  # concept pairs with at least two eligible images
    eligible_images: int  # images with at least two eligible concepts


def resolve_concepts(index: CocoIndex, names: Iterable[str] | None) -> set[int] | None:
    """Category ids for user-given names; an unknown name is a clear error."""
    if names is None:
        return None
    wanted = [n.strip() for n in names if n.strip()]
    if not wanted:
        return None
    by_name = index.category_ids
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        import difflib

        hints = []
        for n in unknown:
            close = difflib.get_close_matches(n, list(by_name), n=1)
            hints.append(f"'{n}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        raise UnknownCategoryError(
            f"unknown category name {', '.join(hints)}; the files have {len(by_name)} "
            "categories, e.g. " + ", ".join(sorted(by_name)[:5])
        )
    return {by_name[n] for n in wanted}


def concept_pair_images(
    index: CocoIndex, concepts: set[int] | None = None
) -> dict[tuple[int, int], list[int]]:
    """(cat_a, cat_b) -> sorted ids of the images eligible for both (A's name sorts first).

    With ``concepts`` of two or more ids both concepts must be among them; a single id means
    every pair that includes it.
    """
    names = index.categories
    out: dict[tuple[int, int], list[int]] = {}
    for image_id in sorted(index.eligible):
        cats = sorted(index.eligible[image_id], key=lambda c: names[c])
        for i, a in enumerate(cats):
            for b in cats[i + 1 :]:
                if concepts is not None:
                    if len(concepts) == 1 and not ({a, b} & concepts):
                        continue
                    if len(concepts) > 1 and not (a in concepts and b in concepts):
                        continue
                out.setdefault((a, b), []).append(image_id)
    return {cp: imgs for cp, imgs in out.items() if len(imgs) >= 2}


class _PairPool:
    """Unused image pairs (i < j, positions in ``images``) of one concept pair."""

    def __init__(self, images: list[int], excluded: set[tuple[int, int]], rng: random.Random):
        self.images = images
        self.rng = rng
        n = len(images)
        self.total = n * (n - 1) // 2
        pos = {img: k for k, img in enumerate(images)}
        self.used: set[tuple[int, int]] = {
            (pos[i1], pos[i2]) for i1, i2 in excluded if i1 in pos and i2 in pos
        }
        self.remaining = self.total - len(self.used)
        self.listed: list[tuple[int, int]] | None = None
        if self.total <= _MATERIALISE_UP_TO:
            self._materialise()

    def _materialise(self) -> None:
        n = len(self.images)
        self.listed = [(i, j) for i in range(n) for j in range(i + 1, n) if (i, j) not in self.used]

    def draw(self) -> tuple[int, int] | None:
        if self.remaining <= 0:
            return None
        self.remaining -= 1
        if self.listed is not None:
            lst = self.listed
            k = self.rng.randrange(len(lst))
            lst[k], lst[-1] = lst[-1], lst[k]
            return lst.pop()
        n = len(self.images)
        for _ in range(64):  # a sparse pool: rejection finds a free pair almost at once
            i, j = sorted(self.rng.sample(range(n), 2))
            if (i, j) not in self.used:
                self.used.add((i, j))
                return (i, j)
        self._materialise()  # dense after all: list what is left and draw from the list
        self.remaining += 1
        return self.draw()

    def release(self, pair: tuple[int, int]) -> None:
        """Put back a drawn pair that was not taken."""
        self.remaining += 1
        if self.listed is not None:
            self.listed.append(pair)
        else:
            self.used.discard(pair)


class _Layouts:
    """Per (image, concept pair) layout, computed once: images recur across pairs."""

    def __init__(self, index: CocoIndex) -> None:
        self.index = index
        self.cache: dict[tuple[int, int, int], dict[str, Any]] = {}

    def get(self, image_id: int, cat_a: int, cat_b: int) -> dict[str, Any]:
        key = (image_id, cat_a, cat_b)
        hit = self.cache.get(key)
        if hit is None:
            img = self.index.images[image_id]
            a = self.index.eligible[image_id][cat_a]
            b = self.index.eligible[image_id][cat_b]
            sa = instance_shape(a.segmentation, a.bbox, img.width, img.height)
            sb = instance_shape(b.segmentation, b.bbox, img.width, img.height)
            hit = layout(a.id, sa, b.id, sb, img.width, img.height)
            self.cache[key] = hit
        return hit


def sample_pairs(
    index: CocoIndex,
    n_pairs: int,
    seed: int = 0,
    prefer_contrast: bool = False,
    max_per_concept_pair: int | None = None,
    concepts: Collection[str] | None = None,
    exclude: Collection[PairKey] = (),
    progress: ProgressFn | None = None,
) -> SampleResult:
    """Draw up to ``n_pairs`` new image pairs; the same inputs and seed give the same pairs.

    ``exclude`` holds pairs stored earlier: they are never drawn again, and they count
    towards ``max_per_concept_pair``.
    """
    if n_pairs < 0:
        raise ValueError("the number of pairs must not be negative")
    if max_per_concept_pair is not None and max_per_concept_pair < 1:
        raise ValueError("--max-per-concept-pair must be at least 1")
    rng = random.Random(seed)
    names = index.categories
    wanted = resolve_concepts(index, concepts)
    by_cp = concept_pair_images(index, wanted)
    eligible_images = sum(1 for cats in index.eligible.values() if len(cats) >= 2)

    excluded: dict[tuple[str, str], set[tuple[int, int]]] = {}
    for ca, cb, i1, i2 in exclude:
        excluded.setdefault((ca, cb), set()).add((i1, i2))

    pools: dict[tuple[int, int], _PairPool] = {}
    quota: dict[tuple[int, int], int] = {}
    available = 0
    for cp in sorted(by_cp):  # sorted: the draw order must not depend on dict history
        pool = _PairPool(by_cp[cp], excluded.get((names[cp[0]], names[cp[1]]), set()), rng)
        left = pool.remaining
        if max_per_concept_pair is not None:
            left = min(left, max(0, max_per_concept_pair - (pool.total - pool.remaining)))
        if left > 0:
            pools[cp] = pool
            quota[cp] = left
            available += left

    layouts = _Layouts(index)
    active = sorted(pools)
    pairs: list[SampledPair] = []
    target = min(n_pairs, available)
    while len(pairs) < target and active:
        k = rng.randrange(len(active))
        cp = active[k]
        pool = pools[cp]
        drawn = pool.draw()
        if drawn is None:  # cannot happen while quota > 0; kept as a guard against loops
            active[k] = active[-1]
            active.pop()
            continue
        if prefer_contrast:
            drawn = _most_contrastive(pool, drawn, cp, layouts)
        pairs.append(_make_pair(index, cp, pool.images[drawn[0]], pool.images[drawn[1]], layouts))
        quota[cp] -= 1
        if quota[cp] <= 0:
            active[k] = active[-1]
            active.pop()
        if progress is not None and len(pairs) % 500 == 0:
            progress("sample", len(pairs), target)
    if progress is not None:
        progress("sample", len(pairs), target)
    return SampleResult(
        pairs=pairs,
        available=available,
        eligible_concept_pairs=len(by_cp),
        eligible_images=eligible_images,
    )


def _most_contrastive(
    pool: _PairPool, first: tuple[int, int], cp: tuple[int, int], layouts: _Layouts
) -> tuple[int, int]:
    candidates = [first]
    while len(candidates) < CONTRAST_CANDIDATES:
        more = pool.draw()
        if more is None:
            break
        candidates.append(more)

    def score(c: tuple[int, int]) -> float:
        l1 = layouts.get(pool.images[c[0]], *cp)
        l2 = layouts.get(pool.images[c[1]], *cp)
        return contrast(l1, l2)[0]

    best = max(candidates, key=score)  # max keeps the first of equals: deterministic
    for c in reversed(candidates):
        if c != best:
            pool.release(c)
    return best


def _make_pair(
    index: CocoIndex, cp: tuple[int, int], img1: int, img2: int, layouts: _Layouts
) -> SampledPair:
    cat_a, cat_b = cp
    l1 = layouts.get(img1, cat_a, cat_b)
    l2 = layouts.get(img2, cat_a, cat_b)
    score, parts = contrast(l1, l2)
    names = index.categories
    geometry = {
        "version": GEOMETRY_VERSION,
        "concept_a": names[cat_a],
        "concept_b": names[cat_b],
        "image1": {"coco_id": img1, **l1},
        "image2": {"coco_id": img2, **l2},
        "contrast": {"score": score, **parts},
    }
    return SampledPair(
        concept_a=names[cat_a],
        concept_b=names[cat_b],
        cat_a=cat_a,
        cat_b=cat_b,
        image1=img1,
        image2=img2,
        geometry=geometry,
        contrast=score,
    )
