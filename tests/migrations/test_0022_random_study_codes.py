"""Migration 0022 on a 0021 database, SQLite and PostgreSQL: a study with the fixed
VSRDONE / VSRSCREEN codes (or none stored) gets random codes of its own; a code the lab
chose stays."""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlalchemy import text
from sqlmodel import Session

from migrations.runner import upgrade
from vsr_core.db import make_engine
from vsr_core.studies.settings import load_study_config


def test_fixed_codes_are_replaced_by_random_ones(database_at: Callable[[str], str]) -> None:
    url = database_at("0021")
    engine = make_engine(url)
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO studysetting (study_id, key, value, updated_at) "
                "VALUES (1, 'completion_code', :v, CURRENT_TIMESTAMP)"
            ),
            {"v": '"VSRDONE"'},
        )
        c.execute(
            text(
                "INSERT INTO study (slug, name, definition, definition_hash, language, "
                "is_default, created_at) SELECT 'two', 'two', definition, definition_hash, "
                "language, :f, CURRENT_TIMESTAMP FROM study WHERE id = 1"
            ),
            {"f": False},
        )
        two = c.execute(text("SELECT id FROM study WHERE slug = 'two'")).scalar_one()
        c.execute(
            text(
                "INSERT INTO studysetting (study_id, key, value, updated_at) "
                "VALUES (:s, 'completion_code', :v, CURRENT_TIMESTAMP)"
            ),
            {"s": two, "v": '"LABCHOSEN1"'},
        )
    engine.dispose()
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        one, other = load_study_config(session, 1), load_study_config(session, two)
    engine.dispose()
    code = re.compile(r"[A-Z0-9]{12}")
    assert code.fullmatch(one.completion_code) and code.fullmatch(one.screenout_code)
    assert code.fullmatch(other.screenout_code)
    assert other.completion_code == "LABCHOSEN1"
    assert len({one.completion_code, one.screenout_code, other.screenout_code}) == 3
