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
    from vsr_core.tables import ANNOTATION, EXAMPLE, IMAGE, IMAGE_PAIR, INSTANCE

    rows = session.execute(
        select(
            EXAMPLE.c.id,
            EXAMPLE.c.image_id,
            EXAMPLE.c.subj,
            IMAGE_PAIR.c.concept_a,
            IMAGE_PAIR.c.image1_id,
            IMAGE_PAIR.c.image1_a_id,
            IMAGE_PAIR.c.image1_b_id,
            IMAGE_PAIR.c.image2_a_id,
            IMAGE_PAIR.c.image2_b_id,
            IMAGE.c.width,
            IMAGE.c.height,
        ).select_from(
            EXAMPLE.join(ANNOTATION, ANNOTATION.c.id == EXAMPLE.c.annotation_id)
            .join(IMAGE_PAIR, IMAGE_PAIR.c.id == ANNOTATION.c.pair_id)
            .join(IMAGE, IMAGE.c.id == EXAMPLE.c.image_id)
        )
    ).all()
    wanted = {i for r in rows for i in (r.image1_a_id, r.image1_b_id, r.image2_a_id, r.image2_b_id)}
    instances = (
        {
            r.id: r
            for r in session.execute(
                select(INSTANCE.c.id, INSTANCE.c.segmentation, INSTANCE.c.bbox).where(
                    INSTANCE.c.id.in_(wanted)
                )
            )
        }
        if wanted
        else {}
    )
    out: dict[int, PairShapes] = {}
    for r in rows:
        if not (r.width and r.height):
            continue
        a_id, b_id = (
            (r.image1_a_id, r.image1_b_id)
            if r.image_id == r.image1_id
            else (r.image2_a_id, r.image2_b_id)
        )
        subj_id, obj_id = (a_id, b_id) if r.subj == r.concept_a else (b_id, a_id)
        if subj_id not in instances or obj_id not in instances:
            continue
        s, o = instances[subj_id], instances[obj_id]
        out[r.id] = PairShapes(
            instance_shape(s.segmentation, list(s.bbox), r.width, r.height),
            instance_shape(o.segmentation, list(o.bbox), r.width, r.height),
            r.width,
            r.height,
        )
    return out
