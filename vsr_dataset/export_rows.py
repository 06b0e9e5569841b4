"""Read every Example with its votes in one streamed query and turn it into a VSR record.

Records keep VSR's field names and types (``label`` 0/1, validator ids as JSON lists of
ints) and add ``subj``/``obj`` (as the zero-shot files do), ``reference_frame`` when known,
``relation_category``, ``agreement``, ``origin`` and ``example_id``.

Worker ids in the export are integers: an imported Worker keeps its VSR number (a repeated
vote stored as ``"17#2"`` is written as 17 again); any other Worker is written as
``offset + Worker.id`` with ``offset`` the largest imported number, so the two never collide
and no platform id (Prolific PID, MTurk workerId) is published.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import orjson
from sqlalchemy import literal_column, select
from sqlalchemy.engine import Connection

from vsr_core.agreement import ItemVotes, keep_rule
from vsr_core.models import DEFAULT_STUDY_ID, Example, Image, Vote, Worker, WorkerSource
from vsr_core.relations import category_of
from vsr_dataset.vsr_format import export_id_of

EXAMPLE = Example.__table__  # type: ignore[attr-defined]
VOTE = Vote.__table__  # type: ignore[attr-defined]
WORKER = Worker.__table__  # type: ignore[attr-defined]
IMAGE = Image.__table__  # type: ignore[attr-defined]
COCO_BASE = "http://images.cocodataset.org"


@dataclass(slots=True)
class ExportRow:
    """One Example: what splits, stats and figures need, plus its serialised record."""

    id: int
    label: bool
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
) -> list[ExportRow]:
    """The study's Examples (optionally of some origins) in id order, serialised; every
    record carries ``tags`` (the study's slug and language).

    Two plain queries (Examples, then Votes ordered by Example) merged in one pass: about
    twice as fast as one LEFT JOIN that repeats every Example's columns once per vote. Both
    run in the caller's transaction, so they see the same snapshot.
    """
    with gc_paused():
        return _read_rows(conn, threshold=threshold, origins=origins, aggregates=aggregates,
                          study_id=study_id, tags=tags or {})


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
) -> list[ExportRow]:
    ids = worker_export_ids(conn)
    # A literal (an int, never user text): _fetch runs parameterless statements.
    in_study = EXAMPLE.c.study_id == literal_column(str(int(study_id)))
    images = {
        iid: (name, split)
        for iid, name, split in conn.execute(
            select(IMAGE.c.id, IMAGE.c.file_name, IMAGE.c.coco_split)
        )
    }
    # Per Example: [True voters], [False voters], filled in one pass over the sorted votes.
    votes: dict[int, tuple[list[int], list[int]]] = {}
    vote_stmt = (
        select(VOTE.c.example_id, VOTE.c.worker_id, VOTE.c.value)
        .where(VOTE.c.example_id.in_(select(EXAMPLE.c.id).where(in_study)))
        .order_by(VOTE.c.example_id, VOTE.c.id)
    )
    current = None
    t: list[int] = []
    f: list[int] = []
    for eid, wid, value in _fetch(conn, vote_stmt):
        if eid != current:
            current, t, f = eid, [], []
            votes[eid] = (t, f)
        (t if value else f).append(ids[wid])
    stmt = select(
        EXAMPLE.c.id, EXAMPLE.c.image_id, EXAMPLE.c.caption, EXAMPLE.c.label,
        EXAMPLE.c.relation, EXAMPLE.c.subj, EXAMPLE.c.obj, EXAMPLE.c.author_id,
        EXAMPLE.c.reference_frame, EXAMPLE.c.origin, EXAMPLE.c.annotation_id,
        EXAMPLE.c.parent_example_id,
    ).where(in_study).order_by(EXAMPLE.c.id)
    wanted = set(origins) if origins else None
    # Re-validation copies (vsr_core.revalidation) are a study of the data, not more data.
    left_out = set() if wanted else {"revalidation"}
    empty: tuple[list[int], list[int]] = ([], [])
    kept = keep_rule(threshold)
    out = [
        _row(ex, votes.get(ex[0], empty), ids, images, kept, aggregates, tags)
        for ex in _fetch(conn, stmt)
        if (wanted is None or ex[9] in wanted) and ex[9] not in left_out
    ]
    _resolve_groups(out)
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
    """
    sql = str(stmt.compile(dialect=conn.dialect))
    cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql)
        while batch := cur.fetchmany(chunk):
            yield from batch
    finally:
        cur.close()


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


def frame_value(frame: str | None) -> float | str | None:
    """VSR writes reference_frame as a number (0.0/1.0/2.0); our own values are words."""
    if frame is None:
        return None
    try:
        return float(frame)
    except ValueError:
        return frame


def _row(
    ex: tuple[Any, ...],
    export_votes: tuple[list[int], list[int]],
    ids: dict[int, int],
    images: dict[int, tuple[str, str]],
    kept: Callable[[int, int], bool],
    aggregates: dict[Hashable, tuple[bool, float]] | None,
    tags: dict[str, Any],
) -> ExportRow:
    (eid, image_id, caption, label, relation, subj, obj, author_id, frame, origin,
     annotation_id, parent_id) = ex
    label = bool(label)
    true_ids, false_ids = export_votes
    n_agree = len(true_ids) if label else len(false_ids)
    n = len(true_ids) + len(false_ids)
    file_name, split = images[image_id]
    record: dict[str, Any] = {
        "image": file_name,
        "image_link": f"{COCO_BASE}/{split}/{file_name}",
        "caption": caption,
        "label": int(label),
        "relation": relation,
        "subj": subj,
        "obj": obj,
        "annotator_id": ids[author_id] if author_id is not None else None,
        "vote_true_validator_id": true_ids,
        "vote_false_validator_id": false_ids,
    }
    if frame is not None:
        record["reference_frame"] = frame_value(frame)
    record["relation_category"] = _CATEGORY.get(relation) or _category(relation)
    record["agreement"] = round(n_agree / n, 4) if n else None
    record["origin"] = origin
    record["example_id"] = eid
    record.update(tags)
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
        eid, label, relation, subj, obj, origin, record["annotator_id"], group, parent_id,
        true_ids, false_ids, n_agree, kept(n_agree, n), record,
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
