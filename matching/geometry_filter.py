"""Reject distractors that the stored COCO outlines of both instances show to be true.

A remapped distractor says "The <subj> <relation> the <obj>." about the query's own two
instances, whose outlines (``Instance.segmentation``, shapely via ``collection.geometry``) we
hold for Examples written on the annotation site. Where the outlines settle the relation in
the image plane it is no distractor: VSR's validators accept left/right and above/below in
the viewer's (relative) frame, so what the picture shows is what they would judge True.

Rejecting is the safe direction (a wrongly rejected candidate only costs one option; a
wrongly kept one is a false "false" answer), so every test below is a *sufficient* sign that
the relation holds, with thresholds chosen generously (docs/matching.md, "Geometry filter").
Written here rather than taken from a library because no library knows VSR's relations; the
geometry itself is shapely's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from shapely.geometry.base import BaseGeometry

# Two outlines this close (pixels) or closer touch: COCO polygons are drawn by hand along the
# visible boundary, so objects in contact leave a gap of a pixel or two, never exactly zero.
TOUCH_PX = 3.0
# Near: the outlines' gap is at most this share of the image diagonal.
NEAR_FRAC = 0.05
# Far: the gap is at least this share of the image diagonal.
FAR_FRAC = 0.4
# Inside: at least this share of the subject's area lies in the object's convex hull (the
# object's mask has a hole where the subject occludes it, so the hull, not the mask).
INSIDE_FRAC = 0.8


@dataclass(frozen=True)
class PairShapes:
    """The outlines of a query's subject and object instances, in pixels of their image."""

    subj: BaseGeometry
    obj: BaseGeometry
    width: int
    height: int

    @property
    def diagonal(self) -> float:
        return float(np.hypot(self.width, self.height))


def _gap(s: PairShapes) -> float:
    return float(s.subj.distance(s.obj))


def _left(s: PairShapes) -> bool:
    # The subject's centre lies left of the object's whole extent.
    return bool(s.subj.centroid.x < s.obj.bounds[0])


def _right(s: PairShapes) -> bool:
    return bool(s.subj.centroid.x > s.obj.bounds[2])


def _above(s: PairShapes) -> bool:
    # Image y grows downwards: the subject's centre is above the object's top edge.
    return bool(s.subj.centroid.y < s.obj.bounds[1])


def _below(s: PairShapes) -> bool:
    return bool(s.subj.centroid.y > s.obj.bounds[3])


def _touching(s: PairShapes) -> bool:
    return _gap(s) <= TOUCH_PX


def _near(s: PairShapes) -> bool:
    return _gap(s) <= NEAR_FRAC * s.diagonal


def _far(s: PairShapes) -> bool:
    return _gap(s) >= FAR_FRAC * s.diagonal


def _inside(s: PairShapes) -> bool:
    area = s.subj.area
    return bool(area > 0 and s.subj.intersection(s.obj.convex_hull).area >= INSIDE_FRAC * area)


def _contains(s: PairShapes) -> bool:
    return _inside(PairShapes(s.obj, s.subj, s.width, s.height))


def _on(s: PairShapes) -> bool:
    # Resting on: in contact, the subject's centre higher than the object's, its bottom edge
    # not below the object's, and their horizontal extents overlap (a dog on a bed).
    (sx0, _, sx1, sy1), (ox0, _, ox1, oy1) = s.subj.bounds, s.obj.bounds
    return (
        _touching(s)
        and s.subj.centroid.y < s.obj.centroid.y
        and sy1 <= oy1
        and min(sx1, ox1) > max(sx0, ox0)
    )


# Each relation (VSR Table 1 names, synonyms by vsr_core.relation_semantics) -> (check, why).
CHECKS: dict[str, tuple[Callable[[PairShapes], bool], str]] = {}
for _names, _check, _why in (
    (("left of", "at the left side of"), _left, "the subject's centre is left of the object"),
    (("right of", "at the right side of"), _right, "the subject's centre is right of the object"),
    (("above", "over"), _above, "the subject's centre is above the object's top edge"),
    (
        ("below", "under", "beneath"),
        _below,
        "the subject's centre is below the object's bottom edge",
    ),
    (("touching",), _touching, f"the outlines are at most {TOUCH_PX:g} px apart"),
    (
        (
            "near",
            "close to",
            "by",
            "next to",
            "beside",
            "adjacent to",
            "at the side of",
            "alongside",
        ),
        _near,
        f"the outlines are within {NEAR_FRAC:.0%} of the image diagonal",
    ),
    (
        ("far from", "far away from", "away from"),
        _far,
        f"the outlines are at least {FAR_FRAC:.0%} of the image diagonal apart",
    ),
    (
        ("in", "inside", "within", "into"),
        _inside,
        f"at least {INSIDE_FRAC:.0%} of the subject lies in the object's convex hull",
    ),
    (
        ("contains",),
        _contains,
        f"at least {INSIDE_FRAC:.0%} of the object lies in the subject's convex hull",
    ),
    (("on", "on top of"), _on, "the subject rests on the object (touching, higher, overlapping)"),
):
    for _name in _names:
        CHECKS[_name] = (_check, _why)


def shown_to_hold(relation: str, shapes: PairShapes) -> str | None:
    """Why the outlines show "The subj <relation> the obj." to be true, or None when they
    do not settle it (a relation with no check, or the check fails)."""
    entry = CHECKS.get(relation)
    if entry is None or shapes.subj.is_empty or shapes.obj.is_empty:
        return None
    check, why = entry
    return why if check(shapes) else None


def rejected_mask(
    query_ids: Sequence[int], relations: Sequence[str], shapes: Mapping[int, PairShapes]
) -> np.ndarray:
    """(queries x candidate relations): True where the query's outlines show the candidate
    relation to hold on the query's own subject and object (remapped candidates)."""
    out = np.zeros((len(query_ids), len(relations)), dtype=bool)
    for i, qid in enumerate(query_ids):
        s = shapes.get(qid)
        if s is None:
            continue
        for g, rel in enumerate(relations):
            out[i, g] = shown_to_hold(rel, s) is not None
    return out
