"""Outlines of the instances behind each annotation-site Example, for matching's geometry
filter (``matching.geometry_filter``). Here rather than in ``matching`` because it reads the
database and builds shapes with ``collection.geometry``, which ``matching`` may not import."""

from __future__ import annotations

from typing import Any

from matching.geometry_filter import PairShapes


def load_pair_shapes(session: Any) -> dict[int, PairShapes]:
    """Example id -> outlines of its subject and object instances, for every Example written
    on the annotation site (annotation -> image pair -> the two instances on its image).
    Imported Examples have none: the VSR release does not say which instance a caption meant."""
    from sqlalchemy import select

    from collection.geometry import instance_shape
    from vsr_core.models import Annotation, Example, Image, ImagePair, Instance

    ex, ann, pair = Example.__table__, Annotation.__table__, ImagePair.__table__  # type: ignore[attr-defined]
    img, inst = Image.__table__, Instance.__table__  # type: ignore[attr-defined]
    rows = session.execute(
        select(
            ex.c.id, ex.c.image_id, ex.c.subj, pair.c.concept_a, pair.c.image1_id,
            pair.c.image1_a_id, pair.c.image1_b_id, pair.c.image2_a_id, pair.c.image2_b_id,
            img.c.width, img.c.height,
        )
        .select_from(
            ex.join(ann, ann.c.id == ex.c.annotation_id)
            .join(pair, pair.c.id == ann.c.pair_id)
            .join(img, img.c.id == ex.c.image_id)
        )
    ).all()
    wanted = {i for r in rows for i in (r.image1_a_id, r.image1_b_id, r.image2_a_id,
                                          r.image2_b_id)}
    instances = {
        r.id: r for r in session.execute(
            select(inst.c.id, inst.c.segmentation, inst.c.bbox).where(inst.c.id.in_(wanted))
        )
    } if wanted else {}
    out: dict[int, PairShapes] = {}
    for r in rows:
        if not (r.width and r.height):
            continue
        a_id, b_id = ((r.image1_a_id, r.image1_b_id) if r.image_id == r.image1_id
                      else (r.image2_a_id, r.image2_b_id))
        subj_id, obj_id = (a_id, b_id) if r.subj == r.concept_a else (b_id, a_id)
        if subj_id not in instances or obj_id not in instances:
            continue
        s, o = instances[subj_id], instances[obj_id]
        out[r.id] = PairShapes(
            instance_shape(s.segmentation, list(s.bbox), r.width, r.height),
            instance_shape(o.segmentation, list(o.bbox), r.width, r.height),
            r.width, r.height,
        )
    return out
