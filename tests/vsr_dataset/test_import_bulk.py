"""`vsr import-vsr` through each backend's bulk path (COPY on PostgreSQL, executemany on
SQLite), run as a user runs it: the CLI's entry point in a subprocess, on the real release.

See docs/dataset.md (import) and vsr_core/bulk.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from vsr_core.db import make_engine
from vsr_core.tables import EXAMPLE, IMAGE, VOTE, WORKER

RAW = "data/data_files/all_vsr_raw_data.jsonl"
VALIDATED = "data/data_files/all_vsr_validated_data.jsonl"


def vsr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from vsr_cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def import_ok(url: str, *paths: Path) -> None:
    proc = vsr("import-vsr", *map(str, paths), "--database-url", url, "-q")
    assert proc.returncode == 0, proc.stderr


def contents(url: str) -> dict[str, Any]:
    """Every imported row by its natural key (ids differ between databases; timestamps are
    the import's), plus the order of the Examples' and Votes' ids (they follow the file).
    Images by COCO id: the one-pass import numbers them as the file first names them."""
    engine = make_engine(url)
    author = WORKER.alias("author")
    with engine.connect() as c:
        workers = sorted(
            (ext, tuple(roles), blocked, flagged, demo is None)
            for ext, roles, blocked, flagged, demo in c.execute(
                select(
                    WORKER.c.external_id,
                    WORKER.c.roles,
                    WORKER.c.blocked,
                    WORKER.c.flagged,
                    WORKER.c.demographics,
                )
            )
        )
        image_cols = [c_ for c_ in IMAGE.c if c_.name != "id"]
        images = [tuple(r) for r in c.execute(select(*image_cols).order_by(IMAGE.c.coco_id))]
        skip = {"id", "image_id", "author_id", "created_at"}
        example_cols = [c_ for c_ in EXAMPLE.c if c_.name not in skip]
        examples = [
            tuple(r)
            for r in c.execute(
                select(IMAGE.c.coco_id, author.c.external_id, *example_cols)
                .join(IMAGE, IMAGE.c.id == EXAMPLE.c.image_id)
                .outerjoin(author, author.c.id == EXAMPLE.c.author_id)
                .order_by(EXAMPLE.c.id)
            )
        ]
        votes = [
            tuple(r)
            for r in c.execute(
                select(
                    EXAMPLE.c.source_key,
                    WORKER.c.external_id,
                    VOTE.c.value,
                    VOTE.c.reference_frame,
                    VOTE.c.duration_ms,
                    VOTE.c.assignment_id,
                )
                .join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id)
                .join(WORKER, WORKER.c.id == VOTE.c.worker_id)
                .order_by(VOTE.c.id)
            )
        ]
    engine.dispose()
    return {"workers": workers, "images": images, "examples": examples, "votes": votes}


def counts(url: str) -> dict[str, int]:
    engine = make_engine(url)
    with engine.connect() as c:
        out = {
            t.name: c.execute(select(func.count()).select_from(t)).scalar_one()
            for t in (WORKER, IMAGE, EXAMPLE, VOTE)
        }
    engine.dispose()
    return out


def test_copy_stores_the_rows_executemany_stores(
    pg_url: str, sqlite_url: str, vsr_dir: Path
) -> None:
    # The release's raw file, then the validated one (updates reference_frame and finds
    # every record again), as a user imports them, on both backends.
    for url in (pg_url, sqlite_url):
        import_ok(url, vsr_dir / RAW, vsr_dir / VALIDATED)
    pg, lite = contents(pg_url), contents(sqlite_url)
    assert len(pg["examples"]) == 12_809 and len(pg["votes"]) == 39_057
    for part in ("workers", "images", "examples", "votes"):
        assert pg[part] == lite[part], part
    # Importing the same files again adds nothing on PostgreSQL either.
    import_ok(pg_url, vsr_dir / RAW, vsr_dir / VALIDATED)
    assert contents(pg_url) == pg


def test_reference_frames_come_from_the_validated_file(pg_url: str, vsr_dir: Path) -> None:
    import_ok(pg_url, vsr_dir / RAW)
    engine = make_engine(pg_url)
    frame_count = select(func.count()).where(EXAMPLE.c.reference_frame.is_not(None))
    with engine.connect() as c:
        before = c.execute(frame_count).scalar_one()
    import_ok(pg_url, vsr_dir / VALIDATED)
    with engine.connect() as c:
        after = c.execute(frame_count).scalar_one()
    engine.dispose()
    assert before == 0 and after > 0


def _release_with_last_line(vsr_dir: Path, tmp_path: Path, last: str) -> Path:
    path = tmp_path / "release.jsonl"
    path.write_text((vsr_dir / RAW).read_text().rstrip("\n") + "\n" + last + "\n")
    return path


def _first_record(vsr_dir: Path) -> dict[str, Any]:
    with (vsr_dir / RAW).open() as fh:
        rec: dict[str, Any] = json.loads(fh.readline())
    return rec


@pytest.mark.parametrize("case", ["bad json", "conflicting vote", "too long"])
def test_a_bad_last_line_leaves_nothing(
    backend: str, db_url: str, vsr_dir: Path, tmp_path: Path, case: str
) -> None:
    # 12,809 good records, then one bad line: one line on stderr naming it, exit 1 and not
    # one row written, whether the line fails to parse (before any write), names a vote that
    # contradicts line 1 (found while the votes stream into COPY) or holds a value the column
    # cannot (found before the write).
    first = _first_record(vsr_dir)
    n = 12_810
    if case == "bad json":
        last, expected = '{"image": "000000419052.jpg", oops', f":{n}: not valid JSON"
    elif case == "conflicting vote":
        flipped = {
            **first,
            "vote_true_validator_id": first["vote_false_validator_id"],
            "vote_false_validator_id": first["vote_true_validator_id"],
        }
        last, expected = json.dumps(flipped), f":{n}: validator "
    else:
        subj = "cat" * 30  # a concept longer than the column's 64 characters
        long_caption = {**first, "caption": f"The {subj} is on the bed.", "relation": "on"}
        last, expected = json.dumps(long_caption), f":{n}: subj is 90 characters long"
    path = _release_with_last_line(vsr_dir, tmp_path, last)
    proc = vsr("import-vsr", str(path), "--database-url", db_url, "-q")
    assert proc.returncode == 1
    err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(err) == 1, proc.stderr
    assert expected in err[0] and "nothing from this file was imported" in err[0], err[0]
    assert "Traceback" not in proc.stderr
    assert counts(db_url) == {"worker": 0, "image": 0, "example": 0, "vote": 0}
