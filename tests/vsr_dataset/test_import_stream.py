"""The one-pass import (vsr_dataset.import_stream): a first import into a study on PostgreSQL,
streamed into COPY with the indexes built after the load. Checked against the incremental
import on the real release, for its indexes, its all-or-nothing failure and its memory.

See docs/scaling.md (import) and docs/dataset.md.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
import weakref
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.conftest import _truncate_all
from tests.vsr_dataset.test_import_bulk import RAW, contents, counts, vsr
from vsr_core.db import make_engine
from vsr_dataset.import_stream import records, stream_import, study_is_empty
from vsr_dataset.import_vsr import import_vsr_file, import_vsr_records
from vsr_dataset.vsr_format import FileSummary, VsrFormatError, read_vsr_file

ROOT = Path(__file__).resolve().parents[2]
INDEXES = text(
    "SELECT tablename, indexname, indexdef, ix.indisvalid FROM pg_indexes "
    "JOIN pg_class c ON c.relname = indexname JOIN pg_index ix ON ix.indexrelid = c.oid "
    "WHERE tablename IN ('worker', 'image', 'example', 'vote') ORDER BY indexname"
)


def indexes(url: str) -> list[tuple[str, str, str, bool]]:
    engine = make_engine(url)
    with engine.connect() as c:
        rows = [tuple(r) for r in c.execute(INDEXES)]
    engine.dispose()
    return rows


def sample(vsr_dir: Path, tmp_path: Path, lines: int) -> Path:
    path = tmp_path / "sample.jsonl"
    with (vsr_dir / RAW).open() as fh:
        path.write_text("".join(next(fh) for _ in range(lines)))
    return path


def test_one_pass_writes_the_rows_the_incremental_import_writes(
    pg_url: str, vsr_dir: Path, tmp_path: Path
) -> None:
    path = sample(vsr_dir, tmp_path, 3_000)
    engine = make_engine(pg_url)
    with engine.begin() as conn:
        assert study_is_empty(conn)
        old = import_vsr_records(conn, read_vsr_file(path)[0], path=str(path))
    before = contents(pg_url)
    _truncate_all(engine)
    new = import_vsr_file(engine, path)
    after = contents(pg_url)
    engine.dispose()
    assert old.examples_added == new.examples_added == 3_000
    assert (old.votes_added, old.workers_added, old.images_added) == (
        new.votes_added,
        new.workers_added,
        new.images_added,
    )
    assert old.repeated_votes == new.repeated_votes
    for part in ("workers", "images", "examples", "votes"):
        assert after[part] == before[part], part


def test_the_indexes_exist_after_the_import_and_after_a_failed_one(
    pg_url: str, vsr_dir: Path, tmp_path: Path
) -> None:
    before = indexes(pg_url)
    assert any(name == "ix_example_caption_trgm" for _, name, _, _ in before)
    bad = tmp_path / "bad.jsonl"
    bad.write_text((vsr_dir / RAW).read_text() + '{"image": oops\n')
    proc = vsr("import-vsr", str(bad), "--database-url", pg_url, "-q")
    assert proc.returncode == 1 and "not valid JSON" in proc.stderr
    assert counts(pg_url) == {"worker": 0, "image": 0, "example": 0, "vote": 0}
    assert indexes(pg_url) == before
    proc = vsr("import-vsr", str(vsr_dir / RAW), "--database-url", pg_url, "-q")
    assert proc.returncode == 0, proc.stderr
    assert counts(pg_url)["vote"] == 39_057
    after = indexes(pg_url)
    assert after == before and all(valid for *_, valid in after)


def test_a_file_that_repeats_a_record_is_merged(pg_url: str, vsr_dir: Path, tmp_path: Path) -> None:
    # The unique index finds the repeat after the load; the import starts over on the
    # incremental path, which merges it: one Example, its votes once.
    path = sample(vsr_dir, tmp_path, 200)
    first = path.read_text().splitlines()[0]
    path.write_text(path.read_text() + first + "\n")
    engine = make_engine(pg_url)
    result = import_vsr_file(engine, path)
    engine.dispose()
    assert (result.records, result.examples_added) == (201, 200)
    assert counts(pg_url)["example"] == 200
    assert all(valid for *_, valid in indexes(pg_url))


def test_records_are_parsed_one_at_a_time(vsr_dir: Path, tmp_path: Path) -> None:
    # The parser hands out one record and keeps none but the one it just gave: each earlier
    # record is gone once the caller lets it go, and a bad line is found only when reached.
    path = sample(vsr_dir, tmp_path, 50)
    path.write_text(path.read_text() + "not json\n")
    summary = FileSummary(str(path))
    seen: list[weakref.ref[object]] = []
    it = records(path, summary)
    for _ in range(50):
        seen.append(weakref.ref(next(it)))
        gc.collect()
        assert all(ref() is None for ref in seen[:-1])
    assert summary.records == 50
    with pytest.raises(VsrFormatError, match=":51: not valid JSON"):
        next(it)


def test_the_one_pass_import_does_not_hold_the_file(pg_url: str, tmp_path: Path) -> None:
    # Three times the release (38,427 records): the one-pass import's peak Python memory is
    # a small part of what parsing the whole file holds (the incremental path's first step).
    path = tmp_path / "vsr3x.jsonl"
    gen = [sys.executable, str(ROOT / "bench/gen10x.py"), str(path), "--factor", "3"]
    subprocess.run(gen, check=True, capture_output=True)
    tracemalloc.start()
    parsed = read_vsr_file(path)
    whole = tracemalloc.get_traced_memory()[1]
    del parsed
    gc.collect()
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    engine = make_engine(pg_url)
    with engine.connect() as conn, conn.begin() as tx:
        added = stream_import(conn, path, FileSummary(str(path)))
        streamed = tracemalloc.get_traced_memory()[1] - start
        tx.rollback()
    tracemalloc.stop()
    engine.dispose()
    assert added["examples"] == 38_427
    assert streamed < whole / 4, (streamed, whole)
    assert counts(pg_url)["example"] == 0
    assert json.loads(path.read_text().splitlines()[0])  # the file itself was left as it was


def test_an_empty_study_beside_another_one_streams_with_its_indexes_kept(
    pg_url: str, vsr_dir: Path, tmp_path: Path
) -> None:
    # Another study already has an Example: the default study is still empty, so the import
    # streams, into an example table that keeps its indexes (it is not empty).
    from sqlmodel import Session

    from tests.support.qualification import study_text
    from vsr_core.models import Example, Image
    from vsr_core.studies.store import create_study

    engine = make_engine(pg_url)
    with Session(engine) as s:
        study = create_study(s, study_text(), "lab.toml")
        image = Image(
            coco_id=1, file_name="000000000001.jpg", coco_split="val2017", width=1, height=1
        )
        s.add(image)
        s.commit()
        assert study.id is not None and image.id is not None
        s.add(
            Example(
                study_id=study.id,
                image_id=image.id,
                caption="The cat is on the bed.",
                relation="on",
                subj="cat",
                obj="bed",
                label=True,
            )
        )
        s.commit()
    with engine.connect() as conn:
        assert study_is_empty(conn)
    path = sample(vsr_dir, tmp_path, 300)
    result = import_vsr_file(engine, path)
    engine.dispose()
    assert (result.examples_added, counts(pg_url)["example"]) == (300, 301)
    assert all(valid for *_, valid in indexes(pg_url))
    proc = vsr("import-vsr", str(path), "--database-url", pg_url, "-q")  # again: no change
    assert proc.returncode == 0 and "+0 examples" in proc.stdout, proc.stdout + proc.stderr


def test_an_empty_file_is_one_line_with_the_progress_bar(pg_url: str, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    proc = vsr("import-vsr", str(path), "--database-url", pg_url)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "no records" in proc.stderr
