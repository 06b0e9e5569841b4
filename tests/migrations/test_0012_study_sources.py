"""Migration 0012 on a 0010 database, SQLite and PostgreSQL: stored study definitions that
still hold the never-read ``image_root`` / ``image_url`` of [[sources]] (every database made
before: the default study's text had two ``image_url`` lines) lose those lines, keep every
other byte, get the hash of their new text, and parse again."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from migrations.runner import upgrade
from vsr_core.db import make_engine
from vsr_core.studies.definition import StudyFileError, parse_study

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def _with_old_keys(current: str, key: str, value: str) -> str:
    """The text as earlier versions stored it: the key under each ``format = "coco"``."""
    return current.replace('format = "coco"\n', f'format = "coco"\n{key} = {value}\n')


@pytest.fixture
def old_url(database_at: Callable[[str], str]) -> str:
    return database_at("0010")


def test_stored_definitions_lose_the_never_read_keys(old_url: str) -> None:
    vsr = (STUDIES / "vsr.toml").read_text(encoding="utf-8")
    zh = (STUDIES / "vsr-zh.toml").read_text(encoding="utf-8")
    old_vsr = _with_old_keys(
        vsr, "image_url", '"http://images.cocodataset.org/train2017/{file_name}"'
    )
    old_zh = _with_old_keys(zh, "image_root", "'/data/coco/images'  # the lab's copy")
    for old in (old_vsr, old_zh):
        with pytest.raises(StudyFileError) as refused:
            parse_study(old, "old.toml")
        assert "no longer read" in refused.value.problems[0]
    engine = make_engine(old_url)
    with engine.begin() as c:
        c.execute(
            text("UPDATE study SET definition = :d, definition_hash = 'old' WHERE id = 1"),
            {"d": old_vsr},
        )
        c.execute(
            text(
                "INSERT INTO study (slug, name, definition, definition_hash, language, "
                "is_default, created_at) VALUES ('vsr-zh', 'zh', :d, 'old', 'zh-Hans', "
                ":f, CURRENT_TIMESTAMP)"
            ),
            {"d": old_zh, "f": False},
        )
    engine.dispose()

    upgrade(old_url)
    engine = make_engine(old_url)
    with engine.connect() as c:
        rows: dict[str, str] = {
            str(s): str(d) for s, d in c.execute(text("SELECT slug, definition FROM study"))
        }
        hashes: dict[str, str] = {
            str(s): str(h) for s, h in c.execute(text("SELECT slug, definition_hash FROM study"))
        }
    engine.dispose()
    assert rows == {"vsr": vsr, "vsr-zh": zh}
    for slug, stored in rows.items():
        assert hashes[slug] == hashlib.sha256(stored.encode("utf-8")).hexdigest()
        assert parse_study(stored, slug).slug == slug
