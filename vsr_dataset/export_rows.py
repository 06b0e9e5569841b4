"""Read every Example with its votes in one streamed query and turn it into a VSR record.

Records keep VSR's field names and types (``label`` 0/1, validator ids as JSON lists of
ints) and add ``subj``/``obj`` (as the zero-shot files do), ``reference_frame`` when known,
``relation_category``, ``agreement``, ``origin`` and ``example_id``.

An adjudicated Example (vsr_core.adjudication) carries its final label as ``label``, its
settlement under ``adjudication`` (decision, reason, by, at, and the writer's
``label_before``) and its votes unchanged; an excluded one is written to all_raw only. Every
record says how it was decided (``verdict``: kept, rejected, excluded or unvoted, by
``decided_by``: adjudication, a label model's name, or agreement), the rule of vsr_core.kept.

Worker ids in the export are integers: an imported Worker keeps its VSR number (a repeated
vote stored as ``"17#2"`` is written as 17 again); any other Worker is written as
``offset + Worker.id`` with ``offset`` the largest imported number, so the two never collide
and no platform id (Prolific PID, MTurk workerId) is published.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import orjson
from sqlalchemy import literal_column, select
from sqlalchemy.engine import Connection

from vsr_core.agreement import ItemVotes
from vsr_core.kept import Verdict
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    WorkerSource,
)
from vsr_core.relations import category_of
from vsr_core.tables import ANNOTATION, EXAMPLE, IMAGE, IMAGE_PAIR, INSTANCE, VOTE, WORKER
from vsr_core.verdicts import Verdicts, load_verdicts
from vsr_dataset.vsr_format import export_id_of

COCO_BASE = "http://images.cocodataset.org"


VoteDetail = tuple[int, int, str | None, int | None]


@dataclass(slots=True)
class ExportRow:
    """One Example: what splits, stats and figures need, plus its serialised record."""

    id: int
    label: bool  # the label it carries into the dataset (an adjudicated one's final label)
    relation: str
    subj: str
    obj: str
    origin: str
    author: int | None  # export id of the caption writer
    group: Hashable
    parent: int | None  # the query Example of a machine-made negative
    true_ids: list[int]  # export ids of the validators who voted True, in vote order
    false_ids: list[int]
    n_agree: int
    kept: bool
    record: dict[str, Any]  # the JSONL record; serialised when written (see ``jsonl``)
    # Each vote as all_raw.jsonl writes it: (validator, answer, reference frame, time), a
    # tuple until written (a dict per vote is ~3x the memory: 3.9 million votes at 100x).
    votes: list[VoteDetail] = field(default_factory=list)
    writer_label: bool | None = None  # the caption writer's label (None: same as label)
    adjudication: str | None = None  # its AdjudicationDecision value, when settled
    model_agrees: bool | None = None  # the keep rule's label model agrees with its label
    verdict: str = Verdict.unvoted.value

    @property
    def n_votes(self) -> int:
        return len(self.true_ids) + len(self.false_ids)

    def raw_record(self) -> dict[str, Any]:
        """The record as all_raw.jsonl has it: with every vote in full."""
        return {
            **self.record,
            "votes": [
                {"validator_id": w, "label": v, "reference_frame": f, "duration_ms": ms}
                for w, v, f, ms in self.votes
            ],
        }

    def item_votes(self) -> ItemVotes:
        votes = tuple((w, True) for w in self.true_ids) + tuple((w, False) for w in self.false_ids)
        return ItemVotes(self.id, self.label, votes, self.relation)


def worker_export_ids(conn: Connection) -> dict[int, int]:
    rows = conn.execute(select(WORKER.c.id, WORKER.c.source, WORKER.c.external_id)).all()
    imported = {
        wid: n
        for wid, source, ext in rows
        if source == WorkerSource.imported.value and (n := export_id_of(ext)) is not None
    }
    offset = max(imported.values(), default=0)
    return {wid: imported.get(wid, offset + wid) for wid, _, _ in rows}


def read_rows(
    conn: Connection,
    *,
    threshold: Fraction,
    origins: list[str] | None = None,
    aggregates: dict[Hashable, tuple[bool, float]] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
    tags: dict[str, Any] | None = None,
    verdicts: Verdicts | None = None,
) -> list[ExportRow]:
    """The study's Examples (optionally of some origins) in id order, serialised; every
    record carries ``tags`` (the study's slug and language).

    Two plain queries (Examples, then Votes ordered by Example) merged in one pass: about
    twice as fast as one LEFT JOIN that repeats every Example's columns once per vote. Both
    run in the caller's transaction, so they see the same snapshot.
    """
    with gc_paused():
        return _read_rows(
            conn,
            threshold=threshold,
            origins=origins,
            aggregates=aggregates,
            study_id=study_id,
            tags=tags or {},
            verdicts=verdicts or study_verdicts(conn, study_id, threshold),
        )


def study_verdicts(conn: Connection, study_id: int, threshold: Fraction) -> Verdicts:
    """The study's adjudications and its keep rule (its setting) with this threshold: what
    decides its Examples besides their votes, as on the dashboard."""
    from sqlmodel import Session

    from vsr_core.studies.settings import load_study_config

    with Session(bind=conn) as session:
        rule = load_study_config(session, study_id).keep_rule
    return load_verdicts(conn, study_id, threshold, rule)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building rows: hundreds of thousands of new,
    acyclic lists and dicts trigger full collections that scan them all again (~40% of the
    read time at 200,000 Examples). Reference counting still frees everything."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_rows(
    conn: Connection,
    *,
    threshold: Fraction,
    origins: list[str] | None,
    aggregates: dict[Hashable, tuple[bool, float]] | None,
    study_id: int,
    tags: dict[str, Any],
    verdicts: Verdicts,
) -> list[ExportRow]:
    ids = worker_export_ids(conn)
    # A literal (an int, never user text): _fetch runs parameterless statements.
    in_study = EXAMPLE.c.study_id == literal_column(str(int(study_id)))
    images = {
        iid: ImageInfo(name, split, coco_id, width or None, height or None, licence)
        for iid, name, split, coco_id, width, height, licence in conn.execute(
            select(
                IMAGE.c.id,
                IMAGE.c.file_name,
                IMAGE.c.coco_split,
                IMAGE.c.coco_id,
                IMAGE.c.width,
                IMAGE.c.height,
                IMAGE.c.license_id,
            )
        )
    }
    # Per Example: [True voters], [False voters], [each vote in full], filled in one pass
    # over the sorted votes.
    votes: dict[int, tuple[list[int], list[int], list[VoteDetail]]] = {}
    vote_stmt = (
        select(
            VOTE.c.example_id,
            VOTE.c.worker_id,
            VOTE.c.value,
            VOTE.c.reference_frame,
            VOTE.c.duration_ms,
        )
        .where(VOTE.c.example_id.in_(select(EXAMPLE.c.id).where(in_study)))
        .order_by(VOTE.c.example_id, VOTE.c.id)
    )
    current = None
    t: list[int] = []
    f: list[int] = []
    d: list[VoteDetail] = []
    for eid, wid, value, vframe, ms in _fetch(conn, vote_stmt):
        if eid != current:
            current, t, f, d = eid, [], [], []
            votes[eid] = (t, f, d)
        (t if value else f).append(ids[wid])
        d.append((ids[wid], int(bool(value)), vframe, ms))
    stmt = (
        select(
            EXAMPLE.c.id,
            EXAMPLE.c.image_id,
            EXAMPLE.c.caption,
            EXAMPLE.c.label,
            EXAMPLE.c.relation,
            EXAMPLE.c.subj,
            EXAMPLE.c.obj,
            EXAMPLE.c.author_id,
            EXAMPLE.c.reference_frame,
            EXAMPLE.c.origin,
            EXAMPLE.c.annotation_id,
            EXAMPLE.c.parent_example_id,
        )
        .where(in_study)
        .order_by(EXAMPLE.c.id)
    )
    wanted = set(origins) if origins else None
    # Re-validation copies (vsr_core.revalidation) are a study of the data, not more data.
    left_out = set() if wanted else {"revalidation"}
    empty: tuple[list[int], list[int], list[VoteDetail]] = ([], [], [])
    marked = _marked_instances(conn, in_study)
    out = [
        _row(ex, votes.get(ex[0], empty), ids, images, marked, verdicts, aggregates, tags)
        for ex in _fetch(conn, stmt)
        if (wanted is None or ex[9] in wanted) and ex[9] not in left_out
    ]
    _resolve_groups(out)
    _pair_up(out)
    return out


@dataclass(frozen=True, slots=True)
class ImageInfo:
    file_name: str
    coco_split: str
    coco_id: int
    width: int | None  # None: unknown (imported releases have no sizes)
    height: int | None
    license_id: int | None


Marked = dict[tuple[int, int], dict[str, tuple[int, list[float]]]]


def _marked_instances(conn: Connection, in_study: Any) -> Marked:
    """(annotation id, image id) -> concept -> (COCO annotation id, box) of the two
    instances the pair marked on that image (what the caption writer saw)."""
    stmt = (
        select(
            ANNOTATION.c.id,
            IMAGE_PAIR.c.concept_a,
            IMAGE_PAIR.c.concept_b,
            IMAGE_PAIR.c.image1_id,
            IMAGE_PAIR.c.image1_a_id,
            IMAGE_PAIR.c.image1_b_id,
            IMAGE_PAIR.c.image2_id,
            IMAGE_PAIR.c.image2_a_id,
            IMAGE_PAIR.c.image2_b_id,
        )
        .select_from(ANNOTATION.join(IMAGE_PAIR, IMAGE_PAIR.c.id == ANNOTATION.c.pair_id))
        .where(
            ANNOTATION.c.id.in_(
                select(EXAMPLE.c.annotation_id).where(
                    in_study, EXAMPLE.c.annotation_id.is_not(None)
                )
            )
        )
    )
    rows = conn.execute(stmt).all()
    wanted = {i for r in rows for i in (r[4], r[5], r[7], r[8])}
    inst: dict[int, tuple[int, list[float]]] = {}
    ordered = sorted(wanted)
    for k in range(0, len(ordered), 1000):
        chunk = ordered[k : k + 1000]
        for iid, ann, bbox in conn.execute(
            select(INSTANCE.c.id, INSTANCE.c.coco_ann_id, INSTANCE.c.bbox).where(
                INSTANCE.c.id.in_(chunk)
            )
        ):
            inst[iid] = (ann, [float(x) for x in bbox])
    out: Marked = {}
    for ann_id, ca, cb, im1, a1, b1, im2, a2, b2 in rows:
        for image_id, ia, ib in ((im1, a1, b1), (im2, a2, b2)):
            out[(ann_id, image_id)] = {ca: inst[ia], cb: inst[ib]}
    return out


def jsonl(records: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """JSONL lines, serialised one at a time as they are written.

    Keeping 200,000 serialised lines alive cost ~3.5 us each (orjson over-allocates and
    shrinks every buffer), 15x the serialisation itself; a line that is written and dropped
    at once avoids that, so rows keep their dicts and are serialised per write.
    """
    dumps, opt = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    for rec in records:
        yield dumps(rec, option=opt)


def _fetch(conn: Connection, stmt: Any, chunk: int = 50_000) -> Iterator[tuple[Any, ...]]:
    """Rows of a parameterless SELECT straight from the DB-API cursor, in the connection's
    current transaction. SQLAlchemy's Row objects cost a few microseconds each, which on
    the ~800,000 votes of a 200,000-Example export was most of the time (bench/export.py).

    On PostgreSQL a server-side cursor: a client-side one holds the whole result in the
    client (at 100x VSR, 3.9 million votes) before the first row is read.
    """
    sql = str(stmt.compile(dialect=conn.dialect))
    dbapi = conn.connection.driver_connection
    server_side = conn.dialect.name == "postgresql" and not dbapi.autocommit  # type: ignore[union-attr]
    if server_side:
        cur = dbapi.cursor(name=f"export_{next(_CURSOR_IDS)}")  # type: ignore[union-attr]
        cur.itersize = chunk
    else:
        cur = dbapi.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql)
        while batch := cur.fetchmany(chunk):
            yield from batch
    finally:
        cur.close()


_CURSOR_IDS = itertools.count()


_CATEGORY: dict[str, str] = {}


def _category(relation: str) -> str:
    cat = _CATEGORY.get(relation)
    if cat is None:
        try:
            cat = category_of(relation)
        except ValueError:
            cat = "Unknown"
        _CATEGORY[relation] = cat
    return cat


def _row(
    ex: tuple[Any, ...],
    export_votes: tuple[list[int], list[int], list[VoteDetail]],
    ids: dict[int, int],
    images: dict[int, ImageInfo],
    marked: Marked,
    verdicts: Verdicts,
    aggregates: dict[Hashable, tuple[bool, float]] | None,
    tags: dict[str, Any],
) -> ExportRow:
    (
        eid,
        image_id,
        caption,
        label,
        relation,
        subj,
        obj,
        author_id,
        frame,
        origin,
        annotation_id,
        parent_id,
    ) = ex
    writer_label = bool(label)
    true_ids, false_ids, vote_detail = export_votes
    n = len(true_ids) + len(false_ids)
    verdict = verdicts.of(eid, writer_label, len(true_ids if writer_label else false_ids), n)
    label = verdicts.label_of(eid, writer_label)
    n_agree = len(true_ids) if label else len(false_ids)
    img = images[image_id]
    record: dict[str, Any] = {
        "image": img.file_name,
        "image_link": f"{COCO_BASE}/{img.coco_split}/{img.file_name}",
        "caption": caption,
        "label": int(label),
        "relation": relation,
        "subj": subj,
        "obj": obj,
        "annotator_id": ids[author_id] if author_id is not None else None,
        "vote_true_validator_id": true_ids,
        "vote_false_validator_id": false_ids,
    }
    record["reference_frame"] = frame
    record["relation_category"] = _CATEGORY.get(relation) or _category(relation)
    record["agreement"] = round(n_agree / n, 4) if n else None
    record["origin"] = origin
    record["example_id"] = eid
    record["pair_id"] = None  # filled in by _pair_up
    record["pair_example_id"] = None
    record["coco_image_id"] = img.coco_id
    record["image_width"] = img.width
    record["image_height"] = img.height
    record["image_license_id"] = img.license_id
    boxes = marked.get((annotation_id, image_id), {}) if annotation_id is not None else {}
    s_inst, o_inst = boxes.get(subj), boxes.get(obj)
    record["subj_instance_id"] = s_inst[0] if s_inst else None
    record["subj_bbox"] = s_inst[1] if s_inst else None
    record["obj_instance_id"] = o_inst[0] if o_inst else None
    record["obj_bbox"] = o_inst[1] if o_inst else None
    record.update(tags)
    settled = verdicts.adjudications.get(eid)
    model_label = verdicts.model_labels.get(eid)
    record["verdict"] = verdict.value
    record["decided_by"] = (
        "adjudication"
        if settled is not None
        else verdicts.rule
        if model_label is not None and n
        else "agreement"
    )
    record["adjudication"] = (
        settled.as_record() | {"label_before": int(writer_label)} if settled else None
    )
    if aggregates is not None and eid in aggregates:
        agg_label, conf = aggregates[eid]
        record["aggregate_label"] = int(agg_label)
        record["aggregate_confidence"] = round(conf, 4)
    # Annotation halves share a group; imported Examples have no Annotation row, and their
    # halves share caption and author. Adversarial negatives follow their parent (resolved
    # after the pass, see _resolve_groups).
    group: Hashable
    if annotation_id is not None:
        group = ("annotation", annotation_id)
    elif parent_id is not None:
        group = ("parent", parent_id)
    else:
        group = ("caption", author_id, caption)
    return ExportRow(
        eid,
        label,
        relation,
        subj,
        obj,
        origin,
        record["annotator_id"],
        group,
        parent_id,
        true_ids,
        false_ids,
        n_agree,
        verdict is Verdict.kept,
        record,
        vote_detail,
        writer_label,
        settled.decision if settled else None,
        None if model_label is None else model_label == writer_label,
        verdict.value,
    )


def _resolve_groups(rows: list[ExportRow]) -> None:
    by_id = {r.id: r for r in rows}
    for r in rows:
        seen = set()
        g = r.group
        while isinstance(g, tuple) and g[0] == "parent" and g[1] in by_id and g[1] not in seen:
            seen.add(g[1])
            g = by_id[g[1]].group
        r.group = g


def instance_shapes(conn: Connection, rows: Iterable[ExportRow]) -> list[dict[str, Any]]:
    """The marked instances of these rows with their COCO polygons (``instances.jsonl``,
    ``--polygons``), by COCO annotation id."""
    wanted = sorted(
        {
            i
            for r in rows
            for i in (r.record["subj_instance_id"], r.record["obj_instance_id"])
            if i is not None
        }
    )
    out: list[dict[str, Any]] = []
    for k in range(0, len(wanted), 1000):
        stmt = (
            select(
                INSTANCE.c.coco_ann_id,
                IMAGE.c.coco_id,
                INSTANCE.c.category,
                INSTANCE.c.bbox,
                INSTANCE.c.iscrowd,
                INSTANCE.c.segmentation,
            )
            .select_from(INSTANCE.join(IMAGE, IMAGE.c.id == INSTANCE.c.image_id))
            .where(INSTANCE.c.coco_ann_id.in_(wanted[k : k + 1000]))
            .order_by(INSTANCE.c.coco_ann_id)
        )
        out += [
            {
                "instance_id": ann,
                "coco_image_id": coco_id,
                "category": category,
                "bbox": [float(x) for x in bbox],
                "iscrowd": bool(crowd),
                "segmentation": seg,
            }
            for ann, coco_id, category, bbox, crowd, seg in conn.execute(stmt)
        ]
    return out


def _pair_up(rows: list[ExportRow]) -> None:
    """The contrastive pair of each Example written by people: the True and the False half
    of one caption (one annotation; for imported Examples, one caption of one writer).
    ``pair_id`` is the smaller of the two Example ids; a group that is not exactly one True
    and one False Example (some imported captions) has no pair."""
    groups: dict[Hashable, list[ExportRow]] = {}
    for r in rows:
        if r.origin in ("human", "imported"):
            groups.setdefault(r.group, []).append(r)
    for members in groups.values():
        # By the writers' labels: an adjudicated half keeps its pair.
        if len(members) != 2 or _writer(members[0]) == _writer(members[1]):
            continue
        a, b = members
        pid = min(a.id, b.id)
        for one, other in ((a, b), (b, a)):
            one.record["pair_id"] = pid
            one.record["pair_example_id"] = other.id


def _writer(row: ExportRow) -> bool:
    return row.label if row.writer_label is None else row.writer_label
