"""What a validator is shown for one leased Example: the image with both instances marked, the
caption, and whether the reference-frame question applies. Never the label, origin or gold flag,
so gold items look exactly like the others."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from sqlmodel import Session, col, select

from core.models import Example, Image, ImagePair, Instance
from webapp import images

# Relations whose truth depends on the frame of reference (VSR 3.2): left/right, front/behind.
FRAME_WORDS = ("left", "right", "front", "behind", "back of")


def needs_frame_question(relation: str) -> bool:
    return any(word in relation for word in FRAME_WORDS)


def example_instances(session: Session, example: Example) -> tuple[Instance, Instance] | None:
    """The (subj, obj) instances an Example is about, or None when they cannot be told.

    Human Examples come from an annotation of an ImagePair; adversarial ones inherit their
    parent's; otherwise (imported) the image's only instance of each concept is taken, which
    is how VSR sampled its images.
    """
    source = example
    if source.annotation_id is None and source.parent_example_id is not None:
        parent = session.get(Example, source.parent_example_id)
        source = parent if parent is not None else source
    if source.annotation_id is not None:
        from core.models import Annotation

        annotation = session.get(Annotation, source.annotation_id)
        pair = session.get(ImagePair, annotation.pair_id) if annotation else None
        if pair is not None and example.image_id in (pair.image1_id, pair.image2_id):
            slot = 1 if pair.image1_id == example.image_id else 2
            a = session.get(Instance, getattr(pair, f"image{slot}_a_id"))
            b = session.get(Instance, getattr(pair, f"image{slot}_b_id"))
            if a is not None and b is not None:
                return (a, b) if pair.concept_a == example.subj else (b, a)
    found = session.exec(select(Instance).where(Instance.image_id == example.image_id)).all()
    subj = [i for i in found if i.category == example.subj]
    obj = [i for i in found if i.category == example.obj]
    if len(subj) == 1 and len(obj) == 1:
        return subj[0], obj[0]
    return None


DISPLAY_CACHE_SIZE = 20_000
DisplayCache = OrderedDict[int, dict[str, Any]]


def example_display(
    session: Session, example_id: int, local_images: bool, cache: DisplayCache | None = None
) -> dict[str, Any]:
    """The lease-independent part of an item, as JSON-ready values.

    What a validator sees of an Example never changes once it exists (caption, image,
    outlines), so the app keeps it in ``cache`` (one per app instance, i.e. per server
    process): on the hot path that saves five queries per item.
    """
    hit = cache.get(example_id) if cache is not None else None
    if hit is not None:
        return hit
    row = session.exec(
        select(Example, Image)
        .join(Image, col(Image.id) == col(Example.image_id))
        .where(Example.id == example_id)
    ).one()
    example, image = row
    insts = example_instances(session, example)
    marked = local_images and insts is not None
    shown = {
        "caption": example.caption,
        "subj": example.subj,
        "obj": example.obj,
        "relation": example.relation,
        "frame_question": needs_frame_question(example.relation),
        "image": {
            "src": None if marked else image.coco_url,
            "marked": marked,
            "width": image.width,
            "height": image.height,
            "coco_id": image.coco_id,
            "license_name": image.license_name,
            "shapes_subj": [] if marked or insts is None else images.svg_shapes(insts[0]),
            "shapes_obj": [] if marked or insts is None else images.svg_shapes(insts[1]),
        },
    }
    if cache is not None:
        cache[example_id] = shown
        while len(cache) > DISPLAY_CACHE_SIZE:
            cache.popitem(last=False)
    return shown


def public_item(
    session: Session,
    assignment_id: int,
    example_id: int,
    image_root: Any,
    cache: DisplayCache | None = None,
) -> dict[str, Any]:
    """One leased item as the page and the API show it: no label, origin or gold flag."""
    return leased_item(example_display(session, example_id, image_root is not None, cache),
                       assignment_id)


def leased_item(shown: dict[str, Any], assignment_id: int) -> dict[str, Any]:
    """An :func:`example_display` for one lease: the marked image is addressed by the lease,
    so its URL says nothing about the Example."""
    image = dict(shown["image"])
    if image["marked"]:
        image["src"] = f"/images/validate/{assignment_id}.jpg"
    return {**shown, "assignment_id": assignment_id, "image": image}
