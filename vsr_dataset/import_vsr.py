"""Import a VSR-format release into the database: Workers, Images, Examples and Votes.

One file is one transaction: a malformed line (reported with its number) or a conflicting
vote rolls the whole file back. Importing the same file again changes nothing: Examples are
found by ``Example.source_key`` (a hash of image, caption, label and annotator), Workers by
(source "imported", external id = the VSR number), Images by COCO id, Votes by
(Example, Worker). The release's files overlap (validated and split files repeat raw
records), so importing all of them adds each Example once and only fills in what a later
file adds (``reference_frame`` from the validated file). A split file
(``splits/random/dev.jsonl``) also records which part of which scheme the release put each
of its records in (vsr_dataset.release_splits), which ``build-dataset --vsr-compatible``
writes back.

Decisions (docs/dataset.md):
- Images that are not in the database yet get width = height = 0 ("unknown"): the release
  has no sizes, and ``vsr sample`` fills real ones from COCO annotations. An Image already
  in the database is kept as it is.
- Imported Examples are settled for the validation queue (``queue_open`` false): their
  validation happened in the release.

New rows go in through each backend's bulk path (vsr_core/bulk.py: COPY on PostgreSQL,
executemany on SQLite) rather than the ORM unit of work: the real release (12,809 records,
39,057 votes) imports in seconds, and 100 times it in a time proportional to its size. The
first file into a study on PostgreSQL takes the one-pass path of vsr_dataset.import_stream
(streamed, memory independent of the file's size, indexes built after the load); later
files, files that repeat a record, and SQLite parse the whole file first and merge it here.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import ARRAY, any_, bindparam, insert, select, update
from sqlalchemy.engine import Connection, Engine

from vsr_core import audit, bulk
from vsr_core.audit import Actor
from vsr_core.limits import LimitError, check_row
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    AuditKind,
    ExampleOrigin,
    ReleaseScheme,
    SplitPart,
    WorkerSource,
)
from vsr_core.tables import EXAMPLE, IMAGE, VOTE, WORKER
from vsr_core.types import utcnow
from vsr_dataset.import_stream import RepeatedRecords, stream_import, study_is_empty
from vsr_dataset.release_splits import record_split, split_of_path
from vsr_dataset.vsr_format import FileSummary, VsrFormatError, VsrRecord, read_vsr_file

SOURCE = WorkerSource.imported.value
CHUNK = 500  # ids per IN (...) list on SQLite: far below its parameter limit
PG_CHUNK = 50_000  # keys per array parameter on PostgreSQL

Progress = Callable[[int], None]


@dataclass
class ImportResult:
    path: str
    records: int = 0
    examples_added: int = 0
    examples_updated: int = 0
    votes_added: int = 0
    workers_added: int = 0
    workers_updated: int = 0
    images_added: int = 0
    repeated_votes: int = 0
    subj_obj_mismatches: int = 0
    release_split: str | None = None  # "random/dev" for a release split file
    split_rows_added: int = 0

    def line(self) -> str:
        parts = [
            f"{self.records:,} records",
            f"+{self.examples_added:,} examples",
            f"+{self.votes_added:,} votes",
            f"+{self.workers_added:,} workers",
            f"+{self.images_added:,} images",
        ]
        if self.examples_updated:
            parts.append(f"{self.examples_updated:,} examples updated")
        if self.workers_updated:
            parts.append(f"{self.workers_updated:,} workers updated")
        if self.release_split is not None:
            parts.append(f"+{self.split_rows_added:,} in the release's {self.release_split}")
        if self.repeated_votes:
            parts.append(f"{self.repeated_votes:,} repeated validator ids kept as '#n' workers")
        if self.subj_obj_mismatches:
            parts.append(
                f"{self.subj_obj_mismatches:,} subj/obj fields disagree with the caption "
                "(caption used)"
            )
        return f"{self.path}: " + ", ".join(parts)


# --- JSONL records ----------------------------------------------------------------------


def import_vsr_file(
    engine: Engine, path: Path, progress: Progress | None = None, actor: Actor | None = None
) -> ImportResult:
    """Import one JSONL file atomically (with ``actor``, and its audit record).

    On PostgreSQL, into a study with no Examples yet, in one streamed pass into COPY with the
    indexes built after the load (vsr_dataset.import_stream); otherwise, or when the file
    repeats a record, the whole file is parsed first and merged with what is there."""
    split = split_of_path(path)
    # A release's split file records its parts on the incremental path, so only a plain
    # file takes the streamed one.
    if split is None and bulk.uses_copy_engine(engine):
        try:
            with engine.begin() as conn:
                result = _streamed(conn, path, progress) if study_is_empty(conn) else None
                if result is not None:
                    _audit(conn, actor, path, result)
        except RepeatedRecords:
            result = None  # rolled back; the incremental import merges the repeats
        if result is not None:
            _analyze(engine, result)
            return result
    records, summary = read_vsr_file(path, progress)
    with engine.begin() as conn:
        result = import_vsr_records(conn, records, path=str(path), split=split)
        _audit(conn, actor, path, result)
    _analyze(engine, result)
    result.subj_obj_mismatches = summary.subj_obj_mismatches
    return result


def _streamed(conn: Connection, path: Path, progress: Progress | None) -> ImportResult:
    summary = FileSummary(str(path))
    added = stream_import(conn, path, summary, progress)
    return ImportResult(
        str(path),
        records=summary.records,
        examples_added=added["examples"],
        votes_added=added["votes"],
        workers_added=added["workers"],
        workers_updated=added["workers_updated"],
        images_added=added["images"],
        repeated_votes=added["repeated_votes"],
        subj_obj_mismatches=summary.subj_obj_mismatches,
    )


def _audit(conn: Connection, actor: Actor | None, path: Path, result: ImportResult) -> None:
    if actor is None:
        return
    audit.record_in(
        conn,
        actor,
        AuditKind.release_import,
        study_id=DEFAULT_STUDY_ID,  # imported releases live in the default study
        target=path.name,
        change={
            "records": result.records,
            "examples_added": result.examples_added,
            "examples_updated": result.examples_updated,
            "votes_added": result.votes_added,
            "workers_added": result.workers_added,
            "images_added": result.images_added,
            "release_split": result.release_split,
            "split_rows_added": result.split_rows_added,
        },
    )


def _analyze(engine: Engine, result: ImportResult) -> None:
    if engine.dialect.name == "postgresql" and (result.examples_added or result.votes_added):
        # A bulk import can grow the tables tenfold before autovacuum's next ANALYZE: until
        # then the planner works from the old row counts (at 10x VSR, nested loops over
        # "a few" votes). Fresh statistics now, outside the import's transaction.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in ("worker", "image", "example", "vote"):
                conn.exec_driver_sql(f"ANALYZE {table}")


def import_vsr_records(
    conn: Connection,
    records: Sequence[VsrRecord],
    *,
    path: str = "<records>",
    split: tuple[ReleaseScheme, SplitPart] | None = None,
) -> ImportResult:
    """Write parsed records inside the caller's transaction (idempotent); ``split``: the
    release's (scheme, part) of every record (a release split file)."""
    result = ImportResult(path, records=len(records))
    worker_ids = _ensure_workers(conn, _roles_needed(records), result)
    image_ids = _ensure_images(conn, records, result)
    example_ids, old_examples = _ensure_examples(conn, records, worker_ids, image_ids, result)
    _ensure_votes(conn, records, worker_ids, example_ids, old_examples, result)
    if split is not None:
        scheme, part = split
        result.release_split = f"{scheme.value}/{part.value}"
        result.split_rows_added = record_split(
            conn,
            [example_ids[rec.source_key] for rec in records],
            [rec.line for rec in records],
            scheme,
            part,
            path,
        )
    return result


def _roles_needed(records: Iterable[VsrRecord]) -> dict[str, set[str]]:
    roles: dict[str, set[str]] = {}
    for rec in records:
        if rec.annotator_id is not None:
            roles.setdefault(str(rec.annotator_id), set()).add("annotator")
        for ext, _ in rec.votes():
            roles.setdefault(ext, set()).add("validator")
    return roles


def _ensure_workers(
    conn: Connection, needed: dict[str, set[str]], result: ImportResult
) -> dict[str, int]:
    existing = {
        ext: (wid, list(roles or []))
        for wid, ext, roles in conn.execute(
            select(WORKER.c.id, WORKER.c.external_id, WORKER.c.roles).where(
                WORKER.c.source == SOURCE
            )
        )
    }
    now = utcnow()
    new = [
        {
            "source": SOURCE,
            "external_id": ext,
            "roles": sorted(roles),
            "blocked": False,
            "flagged": False,
            "flag_reason": None,
            "demographics": None,
            "created_at": now,
        }
        for ext, roles in sorted(needed.items())
        if ext not in existing
    ]
    _check_rows(WORKER, new, lambda row: f"{result.path}: worker {row['external_id'][:40]!r}")
    if new:
        conn.execute(insert(WORKER), new)
        result.workers_added = len(new)
    for ext, roles in needed.items():
        if ext in existing and not roles <= set(existing[ext][1]):
            merged = sorted(set(existing[ext][1]) | roles)
            conn.execute(update(WORKER).where(WORKER.c.id == existing[ext][0]).values(roles=merged))
            result.workers_updated += 1
    return {
        ext: wid
        for wid, ext in conn.execute(
            select(WORKER.c.id, WORKER.c.external_id).where(WORKER.c.source == SOURCE)
        )
    }


def _check_rows(table: Any, rows: list[dict[str, Any]], what: Any) -> None:
    """Values the database cannot hold (NUL, too long, out of range) as one plain line
    naming the record, before the INSERT (instead of a driver error quoting the SQL)."""
    for row in rows:
        try:
            check_row(table, row, "")
        except LimitError as exc:
            raise VsrFormatError(f"{what(row)}{exc}") from None


def _ensure_images(
    conn: Connection, records: Sequence[VsrRecord], result: ImportResult
) -> dict[int, int]:
    wanted: dict[int, VsrRecord] = {}
    for rec in records:
        wanted.setdefault(rec.coco_id, rec)
    found = _lookup(conn, IMAGE.c.coco_id, IMAGE.c.id, wanted)
    new = [
        {
            "coco_id": cid,
            "file_name": rec.image,
            "coco_split": rec.coco_split,
            "width": 0,  # unknown: the release has no sizes (see module docstring)
            "height": 0,
            "coco_url": rec.image_link,
            "flickr_url": None,
            "license_id": None,
            "license_name": None,
        }
        for cid, rec in sorted(wanted.items())
        if cid not in found
    ]
    _check_rows(IMAGE, new, lambda row: f"{result.path}: image {row['coco_id']}")
    if new:
        found.update(_write_new(conn, IMAGE, new, "coco_id"))
        result.images_added = len(new)
    return found


def _write_new(
    conn: Connection, table: Any, rows: list[dict[str, Any]], key: str
) -> dict[Any, int]:
    """Insert ``rows`` (one shape) and return ``row[key]`` -> new id."""
    columns = list(rows[0])
    if bulk.uses_copy(conn):
        ids = bulk.allocate_ids(conn, table, len(rows))
        bulk.insert_rows(
            conn,
            table,
            ["id", *columns],
            ((i, *row.values()) for i, row in zip(ids, rows, strict=True)),
        )
        return {row[key]: i for i, row in zip(ids, rows, strict=True)}
    bulk.insert_rows(conn, table, columns, (tuple(row.values()) for row in rows))
    return _lookup(conn, table.c[key], table.c.id, [row[key] for row in rows])


def _ensure_examples(
    conn: Connection,
    records: Sequence[VsrRecord],
    worker_ids: dict[str, int],
    image_ids: dict[int, int],
    result: ImportResult,
) -> tuple[dict[str, int], set[int]]:
    """Ids by source key, and the ids of the Examples that existed before this file."""
    first: dict[str, VsrRecord] = {}
    for rec in records:
        first.setdefault(rec.source_key, rec)
    found: dict[str, tuple[int, str | None]] = {}
    for eid, key, frame in _select_in(
        conn,
        select(EXAMPLE.c.id, EXAMPLE.c.source_key, EXAMPLE.c.reference_frame),
        EXAMPLE.c.source_key,
        list(first),
    ):
        found[key] = (eid, frame)
    now = utcnow()
    has_queue = "queue_open" in EXAMPLE.c
    new = []
    for key, rec in first.items():
        if key in found:
            eid, frame = found[key]
            if frame is None and rec.reference_frame is not None:
                conn.execute(
                    update(EXAMPLE)
                    .where(EXAMPLE.c.id == eid)
                    .values(reference_frame=rec.reference_frame)
                )
                result.examples_updated += 1
            continue
        row: dict[str, Any] = {
            "image_id": image_ids[rec.coco_id],
            "caption": rec.caption,
            "relation": rec.relation,
            "subj": rec.subj,
            "obj": rec.obj,
            "label": rec.label,
            "origin": ExampleOrigin.imported.value,
            "annotation_id": None,
            "author_id": (None if rec.annotator_id is None else worker_ids[str(rec.annotator_id)]),
            "parent_example_id": None,
            "reference_frame": rec.reference_frame,
            "is_gold": False,
            "gold_label": None,
            "target_votes": None,
            "source_key": key,
            "created_at": now,
        }
        if has_queue:
            # Validation happened in the release: never serve these to our validators.
            n = len(rec.true_ids) + len(rec.false_ids)
            agree = len(rec.true_ids) if rec.label else len(rec.false_ids)
            row.update(
                queue_votes=n,
                queue_agree=agree,
                queue_leases=0,
                queue_settled=True,
                queue_open=False,
            )
        new.append(row)
    lines = {key: rec.line for key, rec in first.items()}
    _check_rows(EXAMPLE, new, lambda row: f"{result.path}:{lines[row['source_key']]}")
    ids = {key: v[0] for key, v in found.items()}
    if new:
        ids.update(_write_new(conn, EXAMPLE, new, "source_key"))  # in file order: ids follow it
        result.examples_added = len(new)
    return ids, {eid for eid, _ in found.values()}


def _ensure_votes(
    conn: Connection,
    records: Sequence[VsrRecord],
    worker_ids: dict[str, int],
    example_ids: dict[str, int],
    old_examples: set[int],
    result: ImportResult,
) -> None:
    # A vote can meet another one on the same (Example, Worker) only on an Example that
    # existed before or that this file names more than once: only those are remembered.
    per_key = Counter(rec.source_key for rec in records)
    watched = old_examples | {example_ids[k] for k, n in per_key.items() if n > 1}
    have: dict[tuple[int, int], bool] = {}
    for eid, wid, value in _select_in(
        conn,
        select(VOTE.c.example_id, VOTE.c.worker_id, VOTE.c.value),
        VOTE.c.example_id,
        sorted(old_examples),
    ):
        have[(eid, wid)] = bool(value)
    now = utcnow()

    def new_votes() -> Iterator[tuple[Any, ...]]:
        for rec in records:
            eid = example_ids[rec.source_key]
            for ext, value in rec.votes():
                wid = worker_ids[ext]
                if eid in watched:
                    key = (eid, wid)
                    if key in have:
                        if have[key] != value:
                            raise VsrFormatError(
                                f"{result.path}:{rec.line}: validator {ext} voted "
                                f"{'True' if have[key] else 'False'} on this example before, "
                                f"{'True' if value else 'False'} here"
                            )
                        continue
                    have[key] = value
                result.repeated_votes += "#" in ext
                yield (eid, wid, value, None, None, None, now)

    result.votes_added = bulk.insert_rows(
        conn,
        VOTE,
        (
            "example_id",
            "worker_id",
            "value",
            "reference_frame",
            "duration_ms",
            "assignment_id",
            "created_at",
        ),
        new_votes(),
    )


def _select_in(conn: Connection, query: Any, key_col: Any, keys: list[Any]) -> Iterator[Any]:
    """Rows of ``query`` whose ``key_col`` is one of ``keys``: on PostgreSQL one array
    parameter per 50,000 keys; on SQLite ``IN`` lists within its parameter limit."""
    if not keys:
        return
    if bulk.uses_copy(conn):
        array = ARRAY(key_col.type)
        for i in range(0, len(keys), PG_CHUNK):
            chunk = bindparam("keys", keys[i : i + PG_CHUNK], type_=array)
            yield from conn.execute(query.where(key_col == any_(chunk)))
        return
    for i in range(0, len(keys), CHUNK):
        yield from conn.execute(query.where(key_col.in_(keys[i : i + CHUNK])))


def _lookup(conn: Connection, key_col: Any, id_col: Any, keys: Iterable[Any]) -> dict[Any, int]:
    return dict(_select_in(conn, select(key_col, id_col), key_col, list(keys)))


# --- annotator metadata CSV -------------------------------------------------------------


def import_meta_csv(engine: Engine, path: Path) -> ImportResult:
    """Attach the release's annotator demographics (meta_data.csv) to imported Workers.

    Keyed by the VSR id; a Worker that does not exist yet is created without roles (the
    release lists a few people who never appear in the JSONL files).
    """
    rows = read_meta_csv(path)
    result = ImportResult(str(path), records=len(rows))
    with engine.begin() as conn:
        existing = {
            ext: (wid, demo)
            for wid, ext, demo in conn.execute(
                select(WORKER.c.id, WORKER.c.external_id, WORKER.c.demographics).where(
                    WORKER.c.source == SOURCE
                )
            )
        }
        now = utcnow()
        new = []
        for vsr_id, demo in rows:
            ext = str(vsr_id)
            if ext not in existing:
                new.append(
                    {
                        "source": SOURCE,
                        "external_id": ext,
                        "roles": [],
                        "blocked": False,
                        "flagged": False,
                        "flag_reason": None,
                        "demographics": demo,
                        "created_at": now,
                    }
                )
            elif existing[ext][1] != demo:
                conn.execute(
                    update(WORKER).where(WORKER.c.id == existing[ext][0]).values(demographics=demo)
                )
                result.workers_updated += 1
        if new:
            conn.execute(insert(WORKER), new)
            result.workers_added = len(new)
    return result


def read_meta_csv(path: Path) -> list[tuple[int, dict[str, str]]]:
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise VsrFormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    rows: list[tuple[int, dict[str, str]]] = []
    seen: set[int] = set()
    with handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or "id" not in reader.fieldnames:
            raise VsrFormatError(f"{path}:1: the header has no 'id' column")
        for row in reader:
            line = reader.line_num
            if None in row or any(v is None for v in row.values()):
                raise VsrFormatError(f"{path}:{line}: wrong number of columns")
            raw_id = (row.get("id") or "").strip()
            if not raw_id.isdigit():
                raise VsrFormatError(f"{path}:{line}: id must be an integer, got {raw_id!r}")
            vsr_id = int(raw_id)
            if vsr_id in seen:
                raise VsrFormatError(f"{path}:{line}: id {vsr_id} appears twice")
            seen.add(vsr_id)
            rows.append((vsr_id, {k: v for k, v in row.items() if k != "id"}))
    if not rows:
        raise VsrFormatError(f"{path}: no rows")
    return rows


# --- a release directory ----------------------------------------------------------------


def release_files(path: Path) -> list[Path]:
    """The files of a VSR release directory in import order: raw first (it holds every
    record and vote), then the validated file, the split files and the annotator CSV."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise VsrFormatError(f"{path}: no such file or directory")
    files = [p for p in path.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".csv")]

    def order(p: Path) -> tuple[int, str]:
        if p.suffix == ".csv":
            return 3, str(p)
        if "raw" in p.name:
            return 0, str(p)
        return (1 if "validated" in p.name else 2), str(p)

    files.sort(key=order)
    if not files:
        raise VsrFormatError(f"{path}: no .jsonl or .csv files found")
    return files


def import_path(
    engine: Engine, path: Path, progress: Progress | None = None, actor: Actor | None = None
) -> ImportResult:
    """Import one JSONL or CSV file (a JSONL file recorded in the audit trail as ``actor``'s;
    the CSV adds image metadata only)."""
    if path.suffix == ".csv":
        return import_meta_csv(engine, path)
    return import_vsr_file(engine, path, progress, actor)
