"""Migration 0007 (studies) on a populated database, SQLite and PostgreSQL.

A database at 0006 is filled with real rows: a slice of the real VSR release (imported by
the importer, with its workers, images and votes), pairs sampled from the real COCO subset,
and a batch, lease, setting, job, matching run, invite and platform study. The rows are made
with today's code in a database at head and copied column by column into one at 0006 (the
code cannot write the old schema itself). Upgrading must keep every row and value and put
each owned row in the default study; downgrading with one study gives the 0006 rows back;
with two studies downgrade refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, inspect, select, text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from migrations.runner import downgrade, upgrade
from vsr_core.db import make_engine
from vsr_core.models import (
    Assignment,
    Batch,
    Example,
    InviteToken,
    Job,
    MatchRun,
    PlatformStudy,
    Worker,
)
from vsr_core.studies.settings import save_study_config
from vsr_core.types import utcnow

RAW = "data/data_files/all_vsr_raw_data.jsonl"
OWNED = (
    "imagepair",
    "example",
    "batch",
    "job",
    "matchrun",
    "invitetoken",
    "platformstudy",
    "studysetting",
)


@pytest.fixture
def old_url(database_at: Callable[[str], str]) -> str:
    """A fresh database of the current backend, migrated to 0006 only."""
    return database_at("0006")


def _populate(engine: Engine, vsr_dir: Path, coco_dir: Path, tmp_path: Path) -> None:
    from tests.support.webapp_coco import make_pairs
    from vsr_dataset.import_vsr import import_path

    lines = (vsr_dir / RAW).read_text().splitlines()
    part = tmp_path / "slice.jsonl"
    part.write_text("\n".join(line for i, line in enumerate(lines) if i % 50 == 0) + "\n")
    import_path(engine, part)
    with Session(engine) as s:
        make_pairs(s, coco_dir, 5)
        worker = s.get(Worker, s.scalars(select(Worker.id).limit(1)).one())  # type: ignore[call-overload]
        example = s.get(Example, s.scalars(select(Example.id).limit(1)).one())  # type: ignore[call-overload]
        assert worker is not None and worker.id is not None
        assert example is not None
        now = utcnow()
        batch = Batch(
            worker_id=worker.id, kind="validate", size=5, deadline=now + timedelta(hours=1)
        )
        s.add(batch)
        s.flush()
        assert batch.id is not None
        s.add(
            Assignment(
                batch_id=batch.id,
                worker_id=worker.id,
                kind="validate",
                example_id=example.id,
                lease_expires_at=now + timedelta(minutes=5),
            )
        )
        s.add(Job(kind="build-dataset", params={"out": "x"}))
        s.add(MatchRun(params={"seed": 1}))
        s.add(InviteToken(token="tok-0007", roles=["validator"]))
        s.add(PlatformStudy(platform="prolific", external_id="P-0007"))
        s.commit()
        save_study_config(s, {"gold_rate": 0.1, "completion_code": "OLDCODE"})


# Columns a later revision renamed (0011): (table, name at 0006) -> name now.
RENAMED = {
    ("platformsubmission", "study_id"): "platform_study_id",
    ("platformaction", "study_id"): "platform_study_id",
}


def _copy_into_old(source: Engine, old: Engine) -> None:
    """Every row of the 0006 tables, the 0006 columns only."""
    meta = MetaData()
    meta.reflect(old)
    current = MetaData()
    current.reflect(source)
    with source.connect() as src, old.begin() as dst:
        # The example -> annotation -> assignment cycle has no insert order: references are
        # checked at commit (SQLite) or not by triggers during the copy (PostgreSQL).
        if old.dialect.name == "sqlite":
            dst.exec_driver_sql("PRAGMA defer_foreign_keys=ON")
        else:
            dst.exec_driver_sql("SET LOCAL session_replication_role = replica")
        for table in meta.tables.values():
            if table.name == "alembic_version":
                continue
            here = current.tables[table.name]
            rows = (
                src.execute(
                    select(
                        *(
                            here.c[RENAMED.get((table.name, c.name), c.name)].label(c.name)
                            for c in table.columns
                        )
                    )
                )
                .mappings()
                .all()
            )
            if rows:
                dst.execute(table.insert(), [dict(r) for r in rows])
        if old.dialect.name == "postgresql":
            for table in meta.tables.values():
                if "id" in table.columns and table.name != "alembic_version":
                    dst.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                            f'coalesce((SELECT max(id) FROM "{table.name}"), 1))'
                        )
                    )


def _snapshot(engine: Engine, drop: tuple[str, ...] = ()) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows (sorted), without the columns in ``drop``."""
    meta = MetaData()
    meta.reflect(engine)
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in meta.tables.values():
            if table.name in ("alembic_version", "study"):
                continue
            cols = [c for c in table.columns if c.name not in drop]
            rows = conn.execute(select(*cols)).all()
            out[table.name] = sorted(tuple(repr(v) for v in r) for r in rows)
    return out


def test_upgrade_keeps_every_row_in_the_default_study(
    db_url: str, old_url: str, vsr_dir: Path, coco_dir: Path, tmp_path: Path
) -> None:
    source = make_engine(db_url)
    old = make_engine(old_url)
    try:
        _populate(source, vsr_dir, coco_dir, tmp_path)
        _copy_into_old(source, old)
        before = _snapshot(old)
        assert len(before["example"]) > 100 and len(before["vote"]) > 300
        assert all(before[t] for t in OWNED), {t: len(before[t]) for t in OWNED}
        old.dispose()

        upgrade(old_url, "0007")  # this migration alone (later ones add columns of their own)
        after = _snapshot(old, drop=("study_id",))
        for name, rows in before.items():
            if name in ("platformsubmission", "platformaction"):
                continue  # their study_id (0006: the platform study) is compared below
            assert after[name] == rows, f"{name} changed"
        with old.connect() as conn:
            studies = conn.execute(text("SELECT id, slug, is_default FROM study")).all()
            assert [tuple(s) for s in studies] == [(1, "vsr", True)]
            for name in OWNED:
                ids = conn.execute(text(f'SELECT DISTINCT study_id FROM "{name}"')).scalars()
                assert list(ids) == [1], name
            code = conn.execute(
                text(
                    "SELECT value FROM studysetting WHERE study_id = 1 AND key = 'completion_code'"
                )
            ).scalar_one()
            assert "OLDCODE" in str(code)
        cols = {c["name"] for c in inspect(old).get_columns("imagepair")}
        assert "study_id" in cols
        old.dispose()

        downgrade(old_url, "0006")
        assert _snapshot(old) == before
        old.dispose()
        upgrade(old_url)
    finally:
        source.dispose()
        old.dispose()


def test_downgrade_refuses_with_two_studies(db_url: str, tmp_path: Path) -> None:
    from vsr_core.studies.store import create_study

    url = f"sqlite:///{tmp_path / 'two.db'}" if db_url.startswith("sqlite") else db_url
    if url != db_url:
        upgrade(url)
    engine = make_engine(url)
    zh = Path(__file__).resolve().parents[2] / "studies" / "vsr-zh.toml"
    with Session(engine) as s:
        create_study(s, zh.read_text(encoding="utf-8"), str(zh))
        s.commit()
    engine.dispose()
    with pytest.raises(RuntimeError, match="holds 2 studies"):
        downgrade(url, "0006")
    engine = make_engine(url)
    assert "study" in inspect(engine).get_table_names()  # nothing was dropped
    engine.dispose()
