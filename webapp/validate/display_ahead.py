"""Reading what validators are shown for a run of Examples at once (``webapp.validate.view``).

On a display-cache miss the server reads the Example asked for and the open Examples just
above it in id order, the order the queue serves them in: each server process keeps its own
cache, so without this nearly every other item was a miss costing two statements (five for a
human Example: its annotation, image pair and two instances). Here a run costs three: the
Examples with their image and image pair, the instances of the images the pair does not
settle, and the instances shown. The result is the same as ``view.display_one`` per Example
(tests/webapp/validate/test_display_ahead.py).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, bindparam, func, true
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from vsr_core.models import Annotation, Image, Instance
from vsr_core.tables import EXAMPLE, IMAGE_PAIR
from webapp.validate.display_cache import (
    DisplayCache,
    displayed,
    only_instance_ids,
    pair_instance_ids,
    remember,
)

AHEAD = 32  # Examples read per miss
SPAN = 256  # at most this far above the missed id (a bounded primary-key range)

_parent = EXAMPLE.alias("parent")
_FROM = bindparam("q_id", type_=Integer)
_AHEAD_ROWS = (
    sa_select(
        EXAMPLE.c.id,
        EXAMPLE.c.caption,
        EXAMPLE.c.subj,
        EXAMPLE.c.obj,
        EXAMPLE.c.relation,
        EXAMPLE.c.annotation_id,
        EXAMPLE.c.parent_example_id,
        EXAMPLE.c.image_id,
        col(Image.coco_url),
        col(Image.width),
        col(Image.height),
        col(Image.coco_id),
        col(Image.license_name),
        IMAGE_PAIR.c.id.label("pair_id"),
        IMAGE_PAIR.c.concept_a,
        IMAGE_PAIR.c.image1_id,
        IMAGE_PAIR.c.image2_id,
        IMAGE_PAIR.c.image1_a_id,
        IMAGE_PAIR.c.image1_b_id,
        IMAGE_PAIR.c.image2_a_id,
        IMAGE_PAIR.c.image2_b_id,
    )
    .select_from(
        EXAMPLE.join(Image, col(Image.id) == EXAMPLE.c.image_id)
        .outerjoin(_parent, _parent.c.id == EXAMPLE.c.parent_example_id)
        # view._instances: an Example without an annotation of its own takes its parent's.
        .outerjoin(
            Annotation,
            col(Annotation.id) == func.coalesce(EXAMPLE.c.annotation_id, _parent.c.annotation_id),
        )
        .outerjoin(IMAGE_PAIR, IMAGE_PAIR.c.id == col(Annotation.pair_id))
    )
    .where(
        EXAMPLE.c.id >= _FROM,
        EXAMPLE.c.id < _FROM + SPAN,
        (EXAMPLE.c.id == _FROM) | (EXAMPLE.c.queue_open == true()),
    )
    .order_by(EXAMPLE.c.id)
    .limit(AHEAD)
)


def _from_pair(row: Any) -> tuple[int, int] | None:
    """(subj, obj) instance ids from the row's image pair, as view._instances takes them."""
    return None if row.pair_id is None else pair_instance_ids(row, row.image_id, row.subj)


def fill_ahead(session: Session, example_id: int, local_images: bool, cache: DisplayCache) -> None:
    """Put ``example_id`` and the open Examples just above it (not cached yet) in ``cache``."""
    conn = session.connection()
    rows = [
        r
        for r in conn.execute(_AHEAD_ROWS, {"q_id": example_id})
        if r.id == example_id or r.id not in cache
    ]
    if not rows:
        return
    by_pair = {r.id: _from_pair(r) for r in rows}
    loaded = _load(session, {i for pair in by_pair.values() if pair is not None for i in pair})
    # The (subj, obj) instances each row shows: its pair's where they exist, else, as
    # view._instances does, the image's only instance of each concept.
    chosen = {
        k: pair for k, pair in by_pair.items() if pair is not None and set(pair) <= loaded.keys()
    }
    fallback = [r for r in rows if r.id not in chosen]
    if fallback:
        by_image: dict[int, list[tuple[int, str]]] = {}
        found: Any = conn.execute(
            sa_select(col(Instance.id), col(Instance.image_id), col(Instance.category)).where(
                col(Instance.image_id).in_({r.image_id for r in fallback})
            )
        )
        for inst_id, image_id, category in found:
            by_image.setdefault(image_id, []).append((inst_id, category))
        for r in fallback:
            only = only_instance_ids(by_image.get(r.image_id, []), r.subj, r.obj)
            if only is not None:
                chosen[r.id] = only
        picked = {i for r in fallback if r.id in chosen for i in chosen[r.id]}
        loaded.update(_load(session, picked - loaded.keys()))
    for r in rows:
        ids = chosen.get(r.id)
        insts = (loaded[ids[0]], loaded[ids[1]]) if ids and set(ids) <= loaded.keys() else None
        remember(cache, r.id, displayed(r, insts, local_images))


def _load(session: Session, ids: set[int]) -> dict[int, Instance]:
    if not ids:
        return {}
    return {
        i.id: i
        for i in session.exec(select(Instance).where(col(Instance.id).in_(ids)))
        if i.id is not None
    }
