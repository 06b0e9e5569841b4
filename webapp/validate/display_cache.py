"""What a validator is shown of one Example, and the per-process cache of it: the pieces
``webapp.validate.view`` (one Example at a time) and ``webapp.validate.display_ahead`` (a
run of them) both build on."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from vsr_core.models import Instance
from webapp.images import render as images

DisplayCache = OrderedDict[int, dict[str, Any]]

DISPLAY_CACHE_SIZE = 20_000  # Examples per server process (a few MB)

# Relations whose truth depends on the frame of reference (VSR 3.2): left/right, front/behind.
FRAME_WORDS = ("left", "right", "front", "behind", "back of")


def needs_frame_question(relation: str) -> bool:
    return any(word in relation for word in FRAME_WORDS)


def pair_instance_ids(pair: Any, image_id: int, subj: str) -> tuple[int, int] | None:
    """The (subj, obj) instance ids an image pair records for ``image_id``, or None when the
    image is not one of the pair's or an id is missing. ``pair`` has ImagePair's columns (an
    ImagePair, or a row that carries them)."""
    if image_id not in (pair.image1_id, pair.image2_id):
        return None
    slot = 1 if pair.image1_id == image_id else 2
    a, b = getattr(pair, f"image{slot}_a_id"), getattr(pair, f"image{slot}_b_id")
    if a is None or b is None:
        return None
    return (a, b) if pair.concept_a == subj else (b, a)


def only_instance_ids(
    found: Iterable[Sequence[Any]], subj: str, obj: str
) -> tuple[int, int] | None:
    """The image's only instance of each concept, from its (id, category) rows, or None when
    either concept has none or several (how VSR sampled its images)."""
    rows = list(found)
    subj_ids = [i for i, category in rows if category == subj]
    obj_ids = [i for i, category in rows if category == obj]
    if len(subj_ids) == 1 and len(obj_ids) == 1:
        return subj_ids[0], obj_ids[0]
    return None


def displayed(
    row: Any, insts: tuple[Instance, Instance] | None, local_images: bool
) -> dict[str, Any]:
    """What is shown of an Example: ``row`` has the columns of ``view._DISPLAY_ROW``."""
    marked = local_images and insts is not None
    return {
        "caption": row.caption,
        "subj": row.subj,
        "obj": row.obj,
        "relation": row.relation,
        "frame_question": needs_frame_question(row.relation),
        "image": {
            "src": None if marked else row.coco_url,
            "marked": marked,
            "width": row.width,
            "height": row.height,
            "coco_id": row.coco_id,
            "license_name": row.license_name,
            "shapes_subj": [] if marked or insts is None else images.svg_shapes(insts[0]),
            "shapes_obj": [] if marked or insts is None else images.svg_shapes(insts[1]),
        },
    }


def remember(cache: DisplayCache, example_id: int, shown: dict[str, Any]) -> None:
    cache[example_id] = shown
    while len(cache) > DISPLAY_CACHE_SIZE:
        cache.popitem(last=False)
