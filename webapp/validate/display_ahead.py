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

from vsr_core.models import Annotation, Example, Image, ImagePair, Instance
from webapp.validate.shown import (
    DisplayCache,
    displayed,
    only_instance_ids,
    pair_instance_ids,
    remember,
)

AHEAD = 32  # Examples read per miss
SPAN = 256  # at most this far above the missed id (a bounded primary-key range)

_parent = Example.__table__.alias("parent")  # type: ignore[attr-defined]
_E = Example.__table__  # type: ignore[attr-defined]
_P = ImagePair.__table__  # type: ignore[attr-defined]
_FROM = bindparam("q_id", type_=Integer)
_AHEAD_ROWS = (
    sa_select(
        _E.c.id, _E.c.caption, _E.c.subj, _E.c.obj, _E.c.relation, _E.c.annotation_id,
        _E.c.parent_example_id, _E.c.image_id,
        col(Image.coco_url), col(Image.width), col(Image.height), col(Image.coco_id),
        col(Image.license_name),
        _P.c.id.label("pair_id"), _P.c.concept_a, _P.c.image1_id, _P.c.image2_id,
        _P.c.image1_a_id, _P.c.image1_b_id, _P.c.image2_a_id, _P.c.image2_b_id,
    )
    .select_from(
        _E.join(Image, col(Image.id) == _E.c.image_id)
        .outerjoin(_parent, _parent.c.id == _E.c.parent_example_id)
        # view._instances: an Example without an annotation of its own takes its parent's.
        .outerjoin(Annotation, col(Annotation.id) == func.coalesce(
            _E.c.annotation_id, _parent.c.annotation_id))
        .outerjoin(_P, _P.c.id == col(Annotation.pair_id))
    )
    .where(
        _E.c.id >= _FROM, _E.c.id < _FROM + SPAN,
        (_E.c.id == _FROM) | (_E.c.queue_open == true()),
    )
    .order_by(_E.c.id)
    .limit(AHEAD)
)


def _from_pair(row: Any) -> tuple[int, int] | None:
    """(subj, obj) instance ids from the row's image pair, as view._instances takes them."""
    return None if row.pair_id is None else pair_instance_ids(row, row.image_id, row.subj)


def fill_ahead(session: Session, example_id: int, local_images: bool, cache: DisplayCache) -> None:
    """Put ``example_id`` and the open Examples just above it (not cached yet) in ``cache``."""
    conn = session.connection()
    rows = [r for r in conn.execute(_AHEAD_ROWS, {"q_id": example_id})
            if r.id == example_id or r.id not in cache]
    if not rows:
        return
    by_pair = {r.id: _from_pair(r) for r in rows}
    loaded = _load(session, {i for pair in by_pair.values() if pair is not None for i in pair})
    # The (subj, obj) instances each row shows: its pair's where they exist, else, as
    # view._instances does, the image's only instance of each concept.
    chosen = {k: pair for k, pair in by_pair.items()
              if pair is not None and set(pair) <= loaded.keys()}
    fallback = [r for r in rows if r.id not in chosen]
    if fallback:
        by_image: dict[int, list[tuple[int, str]]] = {}
        found: Any = conn.execute(
            sa_select(col(Instance.id), col(Instance.image_id), col(Instance.category))
            .where(col(Instance.image_id).in_({r.image_id for r in fallback}))
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
    return {i.id: i for i in session.exec(select(Instance).where(col(Instance.id).in_(ids)))
            if i.id is not None}
