"""What a validator is shown for one leased Example: the image with both instances marked, the
caption, and whether the reference-frame question applies. Never the label, origin or gold flag,
so gold items look exactly like the others."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, bindparam
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from vsr_core.models import Example, Image, ImagePair, Instance
from webapp.validate.display_ahead import fill_ahead
from webapp.validate.display_cache import (
    DisplayCache,
    displayed,
    only_instance_ids,
    pair_instance_ids,
    remember,
)


def example_instances(session: Session, example: Example) -> tuple[Instance, Instance] | None:
    """The (subj, obj) instances an Example is about, or None when they cannot be told.

    Human Examples come from an annotation of an ImagePair; adversarial ones inherit their
    parent's; otherwise (imported) the image's only instance of each concept is taken, which
    is how VSR sampled its images.
    """
    return _instances(
        session,
        example.annotation_id,
        example.parent_example_id,
        example.image_id,
        example.subj,
        example.obj,
    )


def _instances(
    session: Session,
    annotation_id: int | None,
    parent_example_id: int | None,
    image_id: int,
    subj: str,
    obj: str,
) -> tuple[Instance, Instance] | None:
    if annotation_id is None and parent_example_id is not None:
        parent = session.get(Example, parent_example_id)
        if parent is not None:
            annotation_id = parent.annotation_id
    if annotation_id is not None:
        from vsr_core.models import Annotation

        annotation = session.get(Annotation, annotation_id)
        pair = session.get(ImagePair, annotation.pair_id) if annotation else None
        ids = pair_instance_ids(pair, image_id, subj) if pair is not None else None
        if ids is not None:
            a, b = session.get(Instance, ids[0]), session.get(Instance, ids[1])
            if a is not None and b is not None:
                return a, b
    # Ids and categories first (plain rows); the two instances, when they can be told, are
    # then loaded whole. Most images have more instances than the two an Example is about.
    found = session.connection().execute(_IMAGE_INSTANCES, {"q_image": image_id}).all()
    ids = only_instance_ids(found, subj, obj)
    if ids is not None:
        a, b = session.get(Instance, ids[0]), session.get(Instance, ids[1])
        if a is not None and b is not None:
            return a, b
    return None


_IMAGE_INSTANCES = sa_select(col(Instance.id), col(Instance.category)).where(
    col(Instance.image_id) == bindparam("q_image", type_=Integer)
)


_DISPLAY_ROW = (
    sa_select(
        col(Example.caption),
        col(Example.subj),
        col(Example.obj),
        col(Example.relation),
        col(Example.annotation_id),
        col(Example.parent_example_id),
        col(Example.image_id),
        col(Image.coco_url),
        col(Image.width),
        col(Image.height),
        col(Image.coco_id),
        col(Image.license_name),
    )
    .join(Image, col(Image.id) == col(Example.image_id))
    .where(col(Example.id) == bindparam("q_id", type_=Integer))
)


def example_display(
    session: Session, example_id: int, local_images: bool, cache: DisplayCache | None = None
) -> dict[str, Any]:
    """The lease-independent part of an item, as JSON-ready values.

    What a validator sees of an Example never changes once it exists (caption, image,
    outlines), so the app keeps it in ``cache`` (one per app instance, i.e. per server
    process): on the hot path that saves five queries per item. A miss also reads the open
    Examples just above it (``webapp.validate.display_ahead``): the queue serves in id
    order, so those come next, and a few statements for a batch of them replace two to
    five per item.
    """
    hit = cache.get(example_id) if cache is not None else None
    if hit is not None:
        return hit
    if cache is not None:
        fill_ahead(session, example_id, local_images, cache)
        hit = cache.get(example_id)
        if hit is not None:
            return hit
    return display_one(session, example_id, local_images, cache)


def display_one(
    session: Session, example_id: int, local_images: bool, cache: DisplayCache | None = None
) -> dict[str, Any]:
    """:func:`example_display` for one Example, read on its own."""
    # Plain columns, not ORM objects: this runs inside the vote transaction on a cache miss.
    row = session.connection().execute(_DISPLAY_ROW, {"q_id": example_id}).one()
    insts = _instances(
        session, row.annotation_id, row.parent_example_id, row.image_id, row.subj, row.obj
    )
    shown = displayed(row, insts, local_images)
    if cache is not None:
        remember(cache, example_id, shown)
    return shown


def leased_item(shown: dict[str, Any], lease_token: str, prefix: str = "") -> dict[str, Any]:
    """An :func:`example_display` for one lease: the marked image is addressed by the
    lease's opaque token (webapp.crowd.lease_tokens), so its URL says nothing about the Example,
    under ``prefix``, the study's path (the image answers only there)."""
    image = dict(shown["image"])
    if image["marked"]:
        image["src"] = f"{prefix}/images/validate/{lease_token}.jpg"
    return {**shown, "assignment_id": lease_token, "image": image}
