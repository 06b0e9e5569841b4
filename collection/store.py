"""Write sampled pairs to the database: Images and Instances upserted, ImagePairs added once.

Everything happens in one transaction, so a failure leaves nothing half-written. Inserts use
``ON CONFLICT DO NOTHING`` (SQLite and PostgreSQL both have it): running the sampler twice,
or two samplers at once, never duplicates an image, an instance or a pair (``uq_pair``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import aliased
from sqlmodel import Session

from collection.coco import CocoIndex, ProgressFn
from collection.errors import SamplerError
from collection.pairs import PairKey, SampledPair
from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.db import is_postgres, session_scope
from vsr_core.limits import LimitError, check_row
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    AuditKind,
    Image,
    ImagePair,
    Instance,
    PairStatus,
)
from vsr_core.tables import IMAGE, IMAGE_PAIR, INSTANCE
from vsr_core.types import utcnow

_CHUNK = 500  # rows per statement: well under SQLite's variable limit, few round trips


@dataclass
class StoreResult:
    stored: int
    skipped: int  # pairs another run stored between our read and our write
    images: int  # distinct images the stored pairs use
    instances: int


def existing_pair_keys(engine: Engine, study_id: int = DEFAULT_STUDY_ID) -> set[PairKey]:
    """The study's pairs already in the database, by concepts and COCO image ids (images are
    shared by all studies; each study samples its own pairs)."""
    img1, img2 = aliased(Image), aliased(Image)
    stmt = (
        select(ImagePair.concept_a, ImagePair.concept_b, img1.coco_id, img2.coco_id)  # type: ignore[call-overload]
        .join(img1, img1.id == ImagePair.image1_id)
        .join(img2, img2.id == ImagePair.image2_id)
        .where(ImagePair.study_id == study_id)
    )
    with Session(engine) as s:
        return {(a, b, min(i1, i2), max(i1, i2)) for a, b, i1, i2 in s.execute(stmt).all()}


def _chunks(rows: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for k in range(0, len(rows), size):
        yield rows[k : k + size]


def _insert_ignore(
    session: Session, table: Table, rows: list[dict[str, Any]], keys: list[str]
) -> None:
    """INSERT ... ON CONFLICT (keys) DO NOTHING, as one cached Core statement run executemany.

    (A multi-row ``.values([...])`` statement is recompiled for every chunk, which made
    storing 3,000 pairs take 9 s; executemany reuses one compiled statement.)
    """
    if not rows:
        return
    conn = session.connection()
    if is_postgres(conn.engine):
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt: Any = pg_insert(table).on_conflict_do_nothing(index_elements=keys)
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(table).on_conflict_do_nothing(index_elements=keys)
    for chunk in _chunks(rows):
        conn.execute(stmt, list(chunk))


def _id_map(session: Session, column: Any, pk: Any, wanted: list[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for chunk in _chunks(wanted):
        for ext, pk_value in session.execute(select(column, pk).where(column.in_(chunk))).all():
            out[int(ext)] = int(pk_value)
    return out


def store_pairs(
    engine: Engine,
    index: CocoIndex,
    pairs: Sequence[SampledPair],
    run_id: str,
    progress: ProgressFn | None = None,
    study_id: int = DEFAULT_STUDY_ID,
    *,
    actor: Actor | None = None,
    params: Mapping[str, Any] | None = None,
) -> StoreResult:
    """Store the pairs in the study, with their images and instances; returns what was
    actually added. With ``actor`` (a run at the CLI), the audit record of the run and its
    ``params`` commits with the pairs."""
    image_ids = sorted({p.image1 for p in pairs} | {p.image2 for p in pairs})
    inst = {}
    for p in pairs:
        for img in (p.image1, p.image2):
            for cat in (p.cat_a, p.cat_b):
                i = index.eligible[img][cat]
                inst[i.id] = i
    names = index.categories
    licenses = index.licenses
    image_rows = [
        {
            "coco_id": im.id,
            "file_name": im.file_name,
            "coco_split": im.split,
            "width": im.width,
            "height": im.height,
            "coco_url": im.coco_url,
            "flickr_url": im.flickr_url,
            "license_id": im.license_id,
            "license_name": licenses.get(im.license_id) if im.license_id is not None else None,
        }
        for im in (index.images[i] for i in image_ids)
    ]
    total_steps = len(image_rows) + len(inst) + len(pairs)
    # Before the transaction: a value the database cannot hold is one plain line, not a
    # driver error (the loader checked the ids, geometry and names; this covers the rest).
    try:
        for row in image_rows:
            check_row(IMAGE, row, f"COCO image {row['coco_id']}")
        for i in inst.values():
            check_row(
                INSTANCE, {"category_id": i.category_id, "area": i.area}, f"COCO annotation {i.id}"
            )
    except LimitError as exc:
        raise SamplerError(str(exc)) from None
    with session_scope(engine) as session:
        _insert_ignore(session, IMAGE, image_rows, ["coco_id"])
        img_pk = _id_map(session, Image.coco_id, Image.id, image_ids)
        if progress is not None:
            progress("store", len(image_rows), total_steps)
        inst_rows = [
            {
                "coco_ann_id": i.id,
                "image_id": img_pk[i.image_id],
                "category_id": i.category_id,
                "category": names[i.category_id],
                "bbox": i.bbox,
                "area": i.area,
                "iscrowd": False,
                "segmentation": i.segmentation,
            }
            for i in sorted(inst.values(), key=lambda x: x.id)
        ]
        _insert_ignore(session, INSTANCE, inst_rows, ["coco_ann_id"])
        inst_pk = _id_map(session, Instance.coco_ann_id, Instance.id, sorted(inst))
        if progress is not None:
            progress("store", len(image_rows) + len(inst_rows), total_steps)
        pair_rows = []
        now = utcnow()
        for p in pairs:
            e1, e2 = index.eligible[p.image1], index.eligible[p.image2]
            pair_rows.append(
                {
                    "study_id": study_id,
                    "concept_a": p.concept_a,
                    "concept_b": p.concept_b,
                    "image1_id": img_pk[p.image1],
                    "image1_a_id": inst_pk[e1[p.cat_a].id],
                    "image1_b_id": inst_pk[e1[p.cat_b].id],
                    "image2_id": img_pk[p.image2],
                    "image2_a_id": inst_pk[e2[p.cat_a].id],
                    "image2_b_id": inst_pk[e2[p.cat_b].id],
                    "geometry": p.geometry,
                    "contrast": p.contrast,
                    "status": PairStatus.available.value,
                    "sample_run": run_id,
                    "created_at": now,  # Core inserts skip the model's default_factory
                }
            )
        keys = ["study_id", "image1_id", "image2_id", "concept_a", "concept_b"]
        for k, chunk in enumerate(_chunks(pair_rows)):
            _insert_ignore(session, IMAGE_PAIR, list(chunk), keys)
            if progress is not None:
                done = len(image_rows) + len(inst_rows) + min((k + 1) * _CHUNK, len(pair_rows))
                progress("store", done, total_steps)
        stored = session.execute(
            select(func.count())
            .select_from(ImagePair)
            .where(
                ImagePair.sample_run == run_id,  # type: ignore[arg-type]
                ImagePair.study_id == study_id,  # type: ignore[arg-type]
            )
        ).scalar_one()
        if actor is not None:
            audit.record(
                session,
                actor,
                AuditKind.sample_run,
                study_id=study_id,
                target=f"sample run {run_id}",
                change={"params": dict(params or {}), "stored": int(stored)},
            )
    return StoreResult(
        stored=int(stored),
        skipped=len(pairs) - int(stored),
        images=len(image_ids),
        instances=len(inst),
    )
