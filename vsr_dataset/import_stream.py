"""Import a VSR JSONL file into a study with no Examples yet, on PostgreSQL, in one pass and
in memory that does not grow with the file's records.

Each line is parsed and checked as it is read; its Example and Votes are written at once, as
COPY text, to temporary files, with ids drawn from the tables' sequences in blocks; only a
map of the images and workers met so far stays in memory (about 100 bytes per distinct
image). At the end the new Workers, Images, Examples and Votes go in by ``COPY ... FROM
STDIN`` from those files, into tables whose secondary indexes are built once after the load
when the table was empty (vsr_core.deferred_indexes). Everything is one transaction: a bad
line, a value the column cannot hold, or a failed index build leaves nothing behind.

A file that repeats a record (the same ``source_key`` twice: the release's validated and
split files repeat raw records, a raw file does not) is not this path's to merge: the
unique index finds the repeat and :class:`RepeatedRecords` asks the caller to roll back
and use the incremental import (vsr_dataset.import_vsr), which merges repeats.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from vsr_core import bulk
from vsr_core.deferred_indexes import built_after_load, is_empty
from vsr_core.limits import LimitError, check_row
from vsr_core.models import DEFAULT_STUDY_ID, ExampleOrigin, WorkerSource
from vsr_core.tables import EXAMPLE, IMAGE, VOTE, WORKER
from vsr_core.types import utcnow
from vsr_dataset.vsr_format import FileSummary, VsrFormatError, VsrRecord, parse_record

ID_BLOCK = 10_000  # ids drawn from a sequence per round trip
SPOOL_LINES = 2_000  # COPY lines joined per write to a temporary file

IMAGE_COLUMNS = ("id", "coco_id", "file_name", "coco_split", "width", "height", "coco_url")
EXAMPLE_COLUMNS = (
    "id",
    "image_id",
    "caption",
    "relation",
    "subj",
    "obj",
    "label",
    "origin",
    "author_id",
    "reference_frame",
    "is_gold",
    "source_key",
    "created_at",
    "queue_votes",
    "queue_agree",
    "queue_leases",
    "queue_settled",
    "queue_open",
)
VOTE_COLUMNS = ("example_id", "worker_id", "value", "created_at")


class RepeatedRecords(Exception):
    """The file holds one record twice; the incremental import merges such files."""


def study_is_empty(conn: Connection) -> bool:
    """True when the study imports go into has no Examples: the one-pass path applies."""
    return not conn.execute(
        select(EXAMPLE.c.id).where(EXAMPLE.c.study_id == DEFAULT_STUDY_ID).limit(1)
    ).first()


class _Ids:
    """New ids of one table, drawn from its sequence ID_BLOCK at a time."""

    def __init__(self, conn: Connection, table: Any) -> None:
        self.conn, self.table = conn, table
        self.block: Iterator[int] = iter(())

    def next(self) -> int:
        for i in self.block:
            return i
        self.block = iter(bulk.allocate_ids(self.conn, self.table, ID_BLOCK))
        return next(self.block)


class _Spool:
    """A temporary file of COPY text lines, written in chunks."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh, self.lines, self.rows = fh, list[str](), 0

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.rows += 1
        if len(self.lines) >= SPOOL_LINES:
            self.flush()

    def flush(self) -> None:
        self.fh.write("".join(self.lines).encode())
        self.lines.clear()

    def rewound(self) -> IO[bytes]:
        self.flush()
        self.fh.seek(0)
        return self.fh


def records(
    path: Path, summary: FileSummary, progress: Callable[[int], None] | None = None
) -> Iterator[VsrRecord]:
    """Parse a VSR JSONL file one line at a time (the first malformed line raises
    VsrFormatError); no record is kept once the caller moves on."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise VsrFormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    lineno = 0
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if progress and lineno % 1000 == 0:
                progress(1000)
            if not raw.strip():
                continue
            rec = parse_record(raw, lineno, path)
            summary.records += 1
            summary.subj_obj_mismatches += rec.subj_obj_mismatch
            yield rec
        if progress:
            progress(lineno % 1000)
    if not summary.records:
        raise VsrFormatError(f"{path}: no records (an empty file is not a VSR release)")


def _check(table: Any, row: dict[str, Any], what: str) -> None:
    try:
        check_row(table, row, "")
    except LimitError as exc:
        raise VsrFormatError(f"{what}{exc}") from None


def stream_import(
    conn: Connection,
    path: Path,
    summary: FileSummary,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Write the file's records inside the caller's transaction; returns the counts added
    (``workers``, ``workers_updated``, ``images``, ``examples``, ``votes``,
    ``repeated_votes``). Raises RepeatedRecords for a file that repeats a record."""
    source = WorkerSource.imported.value
    workers: dict[str, int] = {}
    roles: dict[str, set[str]] = {}
    for wid, ext, had in conn.execute(
        select(WORKER.c.id, WORKER.c.external_id, WORKER.c.roles).where(WORKER.c.source == source)
    ):
        workers[ext] = wid
        roles[ext] = set(had or [])
    known_roles = {ext: frozenset(r) for ext, r in roles.items()}
    images: dict[int, int] = {
        cid: iid for cid, iid in conn.execute(select(IMAGE.c.coco_id, IMAGE.c.id))
    }
    worker_ids, image_ids, example_ids = _Ids(conn, WORKER), _Ids(conn, IMAGE), _Ids(conn, EXAMPLE)
    now = utcnow()
    repeated = 0
    line = bulk.copy_text_line
    imported = ExampleOrigin.imported.value

    def worker(ext: str, role: str) -> int:
        wid = workers.get(ext)
        if wid is None:
            wid = workers[ext] = worker_ids.next()
            roles[ext] = set()
        roles[ext].add(role)
        return wid

    with ExitStack() as stack:
        spools = {
            t: _Spool(stack.enter_context(tempfile.TemporaryFile(prefix=f"vsr-import-{t}-")))
            for t in ("image", "example", "vote")
        }
        for rec in records(path, summary, progress):
            where = f"{path}:{rec.line}"
            image_id = images.get(rec.coco_id)
            if image_id is None:
                image = {
                    "coco_id": rec.coco_id,
                    "file_name": rec.image,
                    "coco_split": rec.coco_split,
                    "coco_url": rec.image_link,
                }
                _check(IMAGE, image, f"{path}: image {rec.coco_id}")
                image_id = images[rec.coco_id] = image_ids.next()
                spools["image"].add(
                    line((image_id, rec.coco_id, rec.image, rec.coco_split, 0, 0, rec.image_link))
                )
            author = (
                None if rec.annotator_id is None else worker(str(rec.annotator_id), "annotator")
            )
            key = rec.source_key
            _check(
                EXAMPLE,
                {
                    "caption": rec.caption,
                    "relation": rec.relation,
                    "subj": rec.subj,
                    "obj": rec.obj,
                    "reference_frame": rec.reference_frame,
                },
                where,
            )
            eid = example_ids.next()
            votes = rec.votes()
            agree = len(rec.true_ids) if rec.label else len(rec.false_ids)
            # Validation happened in the release: never served to our validators.
            spools["example"].add(
                line(
                    (
                        eid,
                        image_id,
                        rec.caption,
                        rec.relation,
                        rec.subj,
                        rec.obj,
                        rec.label,
                        imported,
                        author,
                        rec.reference_frame,
                        False,
                        key,
                        now,
                        len(votes),
                        agree,
                        0,
                        True,
                        False,
                    )
                )  # fmt: skip
            )
            for ext, value in votes:
                repeated += "#" in ext
                spools["vote"].add(line((eid, worker(ext, "validator"), value, now)))

        new_workers = [ext for ext in workers if ext not in known_roles]
        for ext in new_workers:
            _check(WORKER, {"external_id": ext}, f"{path}: worker {ext[:40]!r}")
        if new_workers:  # a few thousand at most: the ORM's executemany is fine
            rows = [
                {
                    "id": workers[ext],
                    "source": source,
                    "external_id": ext,
                    "roles": sorted(roles[ext]),
                    "blocked": False,
                    "flagged": False,
                    "flag_reason": None,
                    "demographics": None,
                    "created_at": now,
                }
                for ext in sorted(new_workers)
            ]
            conn.execute(insert(WORKER), rows)
        updated = 0
        for ext, had in known_roles.items():
            if not roles[ext] <= had:
                conn.execute(
                    update(WORKER)
                    .where(WORKER.c.id == workers[ext])
                    .values(roles=sorted(roles[ext] | had))
                )
                updated += 1
        # Only a table that is empty now has its indexes built after the load: on a table
        # with other studies' rows the rebuild would cost more than it saves.
        empty = [t for t in ("image", "example", "vote") if is_empty(conn, t)]
        try:
            with built_after_load(conn, empty):
                bulk.copy_from_file(conn, IMAGE, IMAGE_COLUMNS, spools["image"].rewound())
                bulk.copy_from_file(conn, EXAMPLE, EXAMPLE_COLUMNS, spools["example"].rewound())
                bulk.copy_from_file(conn, VOTE, VOTE_COLUMNS, spools["vote"].rewound())
        except Exception as exc:  # the driver's own error from COPY, SQLAlchemy's from DDL
            if _violates(exc, "example_source_key_key"):
                raise RepeatedRecords(str(path)) from None
            raise
        return {
            "workers": len(new_workers),
            "workers_updated": updated,
            "images": spools["image"].rows,
            "examples": spools["example"].rows,
            "votes": spools["vote"].rows,
            "repeated_votes": repeated,
        }


def _violates(exc: Exception, constraint: str) -> bool:
    """Whether ``exc`` is a unique violation (SQLSTATE 23505) of ``constraint``."""
    err = getattr(exc, "orig", None) or exc
    if getattr(err, "sqlstate", None) != "23505":
        return False
    diag = getattr(err, "diag", None)
    return getattr(diag, "constraint_name", None) == constraint or constraint in str(err)
