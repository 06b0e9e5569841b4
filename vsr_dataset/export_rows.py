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
import sys
from collections.abc import Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, overload

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
    """One Example as the compact pass holds it: what splits, pairs, statistics and figures
    need (its full record is built only while a file is written: ``RecordSource.records``)."""

    id: int
    label: bool  # the label it carries into the dataset (an adjudicated one's final label)
    relation: str
    subj: str
    obj: str
    origin: str
    author: int | None  # export id of the caption writer
    group: Hashable  # a small int once the pass is done (_resolve_groups)
    parent: int | None  # the query Example of a machine-made negative
    # Export ids of the validators who voted True (False), in vote order: tuples, exact in
    # size (most Examples have three votes; the empty tuple is shared).
    true_ids: tuple[int, ...]
    false_ids: tuple[int, ...]
    n_agree: int
    kept: bool
    writer_label: bool | None = None  # the caption writer's label (None: same as label)
    adjudication: str | None = None  # its AdjudicationDecision value, when settled
    model_agrees: bool | None = None  # the keep rule's label model agrees with its label
    verdict: str = Verdict.unvoted.value
    pair_id: int | None = None  # the contrastive pair (_pair_up)
    pair_example_id: int | None = None

    @property
    def n_votes(self) -> int:
        return len(self.true_ids) + len(self.false_ids)

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
    """The study's Examples (optionally of some origins) in id order, as compact rows."""
    return read_export(
        conn,
        threshold=threshold,
        origins=origins,
        aggregates=aggregates,
        study_id=study_id,
        tags=tags,
        verdicts=verdicts,
    )[0]


def read_export(
    conn: Connection,
    *,
    threshold: Fraction,
    origins: list[str] | None = None,
    aggregates: dict[Hashable, tuple[bool, float]] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
    tags: dict[str, Any] | None = None,
    verdicts: Verdicts | None = None,
) -> tuple[list[ExportRow], RecordSource]:
    """The compact pass: the study's Examples (optionally of some origins) in id order, with
    what splits, pairs and statistics read, and the source that writes their full records
    later (``RecordSource.records``, a second streamed pass in the same transaction); every
    record carries ``tags`` (the study's slug and language).

    Two plain queries (Examples, then Votes ordered by Example) merged as they stream: about
    twice as fast as one LEFT JOIN that repeats every Example's columns once per vote. Both
    run in the caller's transaction, so they see the same snapshot.
    """
    with gc_paused():
        source = RecordSource.of(
            conn,
            study_id=study_id,
            origins=origins,
            aggregates=aggregates,
            tags=tags or {},
            verdicts=verdicts or study_verdicts(conn, study_id, threshold),
        )
        rows = [
            _row(ex, true_ids, false_ids, source.ids, source.verdicts)
            for ex, true_ids, false_ids, _ in source.examples(detail=False, full=False)
        ]
        _resolve_groups(rows)
        _pair_up(rows)
    return rows, source


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


ExampleColumns = tuple[Any, ...]


@dataclass
class RecordSource:
    """What turns an Example's database row into its JSONL record, read once per export
    (workers' export ids, marked instances, verdicts): the full records are built by
    reading the Examples again, one at a time, while a file is written."""

    conn: Connection
    study_id: int
    ids: dict[int, int]
    marked: Marked
    verdicts: Verdicts
    aggregates: dict[Hashable, tuple[bool, float]] | None
    tags: dict[str, Any]
    wanted: set[str] | None
    left_out: set[str]

    @classmethod
    def of(
        cls,
        conn: Connection,
        *,
        study_id: int,
        origins: list[str] | None,
        aggregates: dict[Hashable, tuple[bool, float]] | None,
        tags: dict[str, Any],
        verdicts: Verdicts,
    ) -> RecordSource:
        wanted = set(origins) if origins else None
        return cls(
            conn,
            study_id,
            worker_export_ids(conn),
            _marked_instances(conn, _in_study(study_id)),
            verdicts,
            aggregates,
            tags,
            wanted,
            # Re-validation copies (vsr_core.revalidation) are a study of the data, not more data.
            set() if wanted else {"revalidation"},
        )

    def examples(
        self, *, detail: bool, full: bool = True
    ) -> Iterator[tuple[ExampleColumns, list[int], list[int], list[VoteDetail]]]:
        """Each exported Example's columns (``full``: with its image's, as ``_record`` reads
        them) with its True and False voters' export ids (and, with ``detail``, each vote in
        full), in id order: the Examples and the Votes ordered by Example, two cursors read
        side by side."""
        in_study = _in_study(self.study_id)
        vote_cols = [VOTE.c.example_id, VOTE.c.worker_id, VOTE.c.value]
        if detail:
            vote_cols += [VOTE.c.reference_frame, VOTE.c.duration_ms]
        vote_stmt = (
            select(*vote_cols)
            .where(VOTE.c.example_id.in_(select(EXAMPLE.c.id).where(in_study)))
            .order_by(VOTE.c.example_id, VOTE.c.id)
        )
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
                *(IMAGE_COLUMNS if full else ()),
            )
            .select_from(EXAMPLE.join(IMAGE, IMAGE.c.id == EXAMPLE.c.image_id) if full else EXAMPLE)
            .where(in_study)
            .order_by(EXAMPLE.c.id)
        )
        ids, wanted, left_out = self.ids, self.wanted, self.left_out
        votes = _fetch(self.conn, vote_stmt)
        vote = next(votes, None)
        for ex in _fetch(self.conn, stmt):
            eid = ex[0]
            t: list[int] = []
            f: list[int] = []
            d: list[VoteDetail] = []
            while vote is not None and vote[0] <= eid:
                if vote[0] == eid:
                    wid = ids[vote[1]]
                    (t if vote[2] else f).append(wid)
                    if detail:
                        d.append((wid, int(bool(vote[2])), vote[3], vote[4]))
                vote = next(votes, None)
            if (wanted is None or ex[9] in wanted) and ex[9] not in left_out:
                yield ex, t, f, d
        for _ in votes:  # close the cursor
            pass

    def records(
        self, rows: Sequence[ExportRow], keys: Sequence[int] | None = None, *, raw: bool = False
    ) -> Iterator[dict[str, Any]]:
        """The full records of ``rows`` (every exported Example, from the compact pass) whose
        ids are in ``keys`` (ascending; None: all), in id order, built one at a time;
        ``raw``: with every vote in full (all_raw.jsonl)."""
        with gc_paused():
            it = iter(rows)
            want = iter(keys) if keys is not None else None
            nxt = next(want, None) if want is not None else None
            for (ex, t, f, d), row in zip(self.examples(detail=raw), it, strict=False):
                assert row.id == ex[0]
                if want is not None:
                    while nxt is not None and nxt < row.id:  # a key of no row: none
                        nxt = next(want, None)
                    if nxt is None:
                        break
                    if row.id != nxt:
                        continue
                    nxt = next(want, None)
                rec = _record(ex, row, t, f, self)
                if raw:
                    rec["votes"] = _vote_dicts(d)
                yield rec

    def fan_out(
        self, rows: Sequence[ExportRow], wants: Sequence[tuple[Sequence[int] | None, bool]]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """One pass for many files: (i, record) for each record of each ``wants[i]`` (keys
        ascending, None: all; raw or not, as ``records``), in id order; each record is built
        once for all the files that hold it."""
        any_raw = any(raw for _, raw in wants)
        walks = [iter(keys) if keys is not None else None for keys, _ in wants]
        nexts = [next(w, None) if w is not None else None for w in walks]
        with gc_paused():
            for (ex, t, f, d), row in zip(self.examples(detail=any_raw), rows, strict=False):
                eid = row.id
                assert eid == ex[0]
                hit: list[int] = []
                for i, w in enumerate(walks):
                    if w is None:
                        hit.append(i)
                        continue
                    k = nexts[i]
                    while k is not None and k < eid:  # a key of no row: none
                        k = next(w, None)
                    if k == eid:
                        hit.append(i)
                        k = next(w, None)
                    nexts[i] = k
                if not hit:
                    if all(w is not None and k is None for w, k in zip(walks, nexts, strict=True)):
                        break
                    continue
                rec = _record(ex, row, t, f, self)
                raw_rec: dict[str, Any] | None = None
                for i in hit:
                    if wants[i][1]:
                        if raw_rec is None:
                            raw_rec = {**rec, "votes": _vote_dicts(d)}
                        yield i, raw_rec
                    else:
                        yield i, rec


def _vote_dicts(votes: list[VoteDetail]) -> list[dict[str, Any]]:
    return [
        {"validator_id": w, "label": v, "reference_frame": fr, "duration_ms": ms}
        for w, v, fr, ms in votes
    ]


class StreamedRecords(Sequence[dict[str, Any]]):
    """A file's records, read again from the database each time they are iterated (the JSONL
    file, the card's features, the Parquet copy): never more than one alive at a time."""

    def __init__(
        self,
        source: RecordSource,
        rows: Sequence[ExportRow],
        keys: Sequence[int] | None = None,
        *,
        raw: bool = False,
    ) -> None:
        self.source, self.rows, self.keys, self.raw = source, rows, keys, raw

    def __len__(self) -> int:
        return len(self.rows) if self.keys is None else len(self.keys)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.source.records(self.rows, self.keys, raw=self.raw)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return list(self)[i]  # never done by the export: it only iterates


def _in_study(study_id: int) -> Any:
    # A literal (an int, never user text): _fetch runs parameterless statements.
    return EXAMPLE.c.study_id == literal_column(str(int(study_id)))


# An image's columns each full record reads (joined to its Example: no table of every image
# is held).
IMAGE_COLUMNS = (
    IMAGE.c.file_name,
    IMAGE.c.coco_split,
    IMAGE.c.coco_id,
    IMAGE.c.width,
    IMAGE.c.height,
    IMAGE.c.license_id,
)


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


def _fetch(conn: Connection, stmt: Any, chunk: int = 10_000) -> Iterator[tuple[Any, ...]]:
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
        cur = dbapi.cursor(name=f"export_{next(_CURSOR_IDS)}", binary=True)  # type: ignore[union-attr]
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
    ex: ExampleColumns,
    true_ids: list[int],
    false_ids: list[int],
    ids: dict[int, int],
    verdicts: Verdicts,
) -> ExportRow:
    """The compact row of one Example: strings that repeat (relation, concepts, origin)
    interned, so 100,000 rows share a few hundred."""
    eid, _, caption, label, relation, subj, obj, author_id, _, origin, annotation_id, parent = ex[
        :12
    ]
    writer_label = bool(label)
    n = len(true_ids) + len(false_ids)
    verdict = verdicts.of(eid, writer_label, len(true_ids if writer_label else false_ids), n)
    label = verdicts.label_of(eid, writer_label)
    settled = verdicts.adjudications.get(eid)
    model_label = verdicts.model_labels.get(eid)
    # Annotation halves share a group; imported Examples have no Annotation row, and their
    # halves share caption and author. Adversarial negatives follow their parent (resolved
    # after the pass, see _resolve_groups).
    group: Hashable
    if annotation_id is not None:
        group = ("annotation", annotation_id)
    elif parent is not None:
        group = ("parent", parent)
    else:
        group = ("caption", author_id, caption)
    return ExportRow(
        eid,
        label,
        sys.intern(relation),
        sys.intern(subj),
        sys.intern(obj),
        sys.intern(origin),
        ids[author_id] if author_id is not None else None,
        group,
        parent,
        tuple(true_ids),
        tuple(false_ids),
        len(true_ids) if label else len(false_ids),
        verdict is Verdict.kept,
        writer_label,
        settled.decision if settled else None,
        None if model_label is None else model_label == writer_label,
        verdict.value,
    )


def _record(
    ex: ExampleColumns,
    row: ExportRow,
    true_ids: list[int],
    false_ids: list[int],
    source: RecordSource,
) -> dict[str, Any]:
    """The JSONL record of one Example, from its columns and its compact row."""
    eid, image_id, caption, _, relation, subj, obj, _, frame, origin, annotation_id, _ = ex[:12]
    verdicts = source.verdicts
    n = len(true_ids) + len(false_ids)
    file_name, coco_split, coco_id, width, height, licence = ex[12:18]
    record: dict[str, Any] = {
        "image": file_name,
        "image_link": f"{COCO_BASE}/{coco_split}/{file_name}",
        "caption": caption,
        "label": int(row.label),
        "relation": relation,
        "subj": subj,
        "obj": obj,
        "annotator_id": row.author,
        "vote_true_validator_id": true_ids,
        "vote_false_validator_id": false_ids,
    }
    record["reference_frame"] = frame
    record["relation_category"] = _CATEGORY.get(relation) or _category(relation)
    record["agreement"] = round(row.n_agree / n, 4) if n else None
    record["origin"] = origin
    record["example_id"] = eid
    record["pair_id"] = row.pair_id
    record["pair_example_id"] = row.pair_example_id
    record["coco_image_id"] = coco_id
    record["image_width"] = width or None  # unknown (imported releases have no sizes)
    record["image_height"] = height or None
    record["image_license_id"] = licence
    boxes = source.marked.get((annotation_id, image_id), {}) if annotation_id is not None else {}
    s_inst, o_inst = boxes.get(subj), boxes.get(obj)
    record["subj_instance_id"] = s_inst[0] if s_inst else None
    record["subj_bbox"] = s_inst[1] if s_inst else None
    record["obj_instance_id"] = o_inst[0] if o_inst else None
    record["obj_bbox"] = o_inst[1] if o_inst else None
    record.update(source.tags)
    settled = verdicts.adjudications.get(eid)
    model_label = verdicts.model_labels.get(eid)
    record["verdict"] = row.verdict
    record["decided_by"] = (
        "adjudication"
        if settled is not None
        else verdicts.rule
        if model_label is not None and n
        else "agreement"
    )
    writer_label = row.label if row.writer_label is None else row.writer_label
    record["adjudication"] = (
        settled.as_record() | {"label_before": int(writer_label)} if settled else None
    )
    aggregates = source.aggregates
    if aggregates is not None and eid in aggregates:
        agg_label, conf = aggregates[eid]
        record["aggregate_label"] = int(agg_label)
        record["aggregate_confidence"] = round(conf, 4)
    return record


def _resolve_groups(rows: list[ExportRow]) -> None:
    by_id = {r.id: r for r in rows}
    for r in rows:
        seen = set()
        g = r.group
        while isinstance(g, tuple) and g[0] == "parent" and g[1] in by_id and g[1] not in seen:
            seen.add(g[1])
            g = by_id[g[1]].group
        r.group = g
    # Each group as a small int: the imported ones' (caption, author) keys are freed.
    numbers: dict[Hashable, int] = {}
    for r in rows:
        r.group = numbers.setdefault(r.group, len(numbers))


def instance_shapes(conn: Connection, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The marked instances of these records with their COCO polygons (``instances.jsonl``,
    ``--polygons``), by COCO annotation id."""
    wanted = sorted(
        {i for r in records for i in (r["subj_instance_id"], r["obj_instance_id"]) if i is not None}
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
            one.pair_id = pid
            one.pair_example_id = other.id


def _writer(row: ExportRow) -> bool:
    return row.label if row.writer_label is None else row.writer_label
