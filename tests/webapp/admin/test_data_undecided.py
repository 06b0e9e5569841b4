"""The data page's "undecided" filter (served by an expression index, migration 0021) shows
exactly the Examples a direct computation calls undecided, on SQLite and PostgreSQL, through
HTTP: with open, settled, short, own-target and adjudicated Examples, after the study's
votes_per_example changes, and after a new vote settles one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.admin_seed import Seeded, add_vote, read_raw, seed
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import login, make_admin_app
from tests.webapp.admin.test_data_keyset import walk
from vsr_core.models import Adjudication
from vsr_core.studies.settings import load_study_config, save_study_config
from vsr_core.tables import ADJUDICATION, EXAMPLE, VOTE
from webapp.admin.stats.shared import example_agreement

UNDECIDED = "/admin/data?agreement=undecided"


@pytest.fixture(scope="module")
def records(vsr_dir: Path) -> list[dict[str, Any]]:
    return read_raw(vsr_dir, every=40)  # 321 Examples


@pytest.fixture
def seeded(engine: Engine, records: list[dict[str, Any]]) -> Seeded:
    s = seed(engine, records)
    _mix_states(engine, s.example_ids)
    return s


@pytest.fixture
def client(db_url: str, engine: Engine, tmp_path: Path, seeded: Seeded) -> TestClient:
    with Session(engine) as s:
        create_owner(s, "alice", "correct horse battery")
    c = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(c)
    return c


def _mix_states(engine: Engine, ids: list[int]) -> None:
    """Every kind of Example the rule tells apart, by id modulo 8."""
    kinds: dict[int, dict[str, Any]] = {
        0: {"queue_open": True},
        1: {"queue_open": False, "target_votes": None},
        2: {"queue_open": False, "queue_votes": 2, "target_votes": None},
        3: {"queue_open": False, "queue_votes": 3, "target_votes": 5},
        4: {"queue_open": False, "queue_votes": 2, "target_votes": 2},
        5: {"queue_open": False, "queue_votes": 0, "target_votes": None},
        6: {"queue_open": False, "queue_votes": 1, "target_votes": None},  # adjudicated
        7: {"queue_open": False, "queue_votes": 4, "target_votes": None},
    }
    with Session(engine) as s:
        for i, eid in enumerate(ids):
            kind = i % 8
            s.execute(update(EXAMPLE).where(EXAMPLE.c.id == eid).values(**kinds[kind]))
            if kind == 6:
                s.add(Adjudication(example_id=eid, decision="true", reason="t", admin_name="t"))
        s.commit()


def direct_undecided(engine: Engine) -> list[int]:
    """The rule written out (docs/dashboard.md): not adjudicated, and its queue still open,
    or no votes, or fewer than its own target, else the study's votes_per_example."""
    with Session(engine) as s:
        per_example = load_study_config(s).votes_per_example
        adjudicated = {r[0] for r in s.connection().execute(select(ADJUDICATION.c.example_id))}
        rows = s.connection().execute(
            select(
                EXAMPLE.c.id, EXAMPLE.c.queue_open, EXAMPLE.c.queue_votes, EXAMPLE.c.target_votes
            ).order_by(EXAMPLE.c.id)
        )
        return [
            int(r.id)
            for r in rows
            if r.id not in adjudicated
            and (
                r.queue_open
                or r.queue_votes == 0
                or r.queue_votes < (r.target_votes or per_example)
            )
        ]


def decided_column_zero(engine: Engine) -> list[int]:
    """The same from the dashboard's own ``decided`` flag (the form the other figures use)."""
    with Session(engine) as s:
        ea = example_agreement(load_study_config(s), with_revalidation=True)
        stmt = select(ea.c.id).where(ea.c.decided == 0).order_by(ea.c.id)
        return [int(i) for (i,) in s.connection().execute(stmt)]


def shown(client: TestClient) -> list[int]:
    return [i for page in walk(client, UNDECIDED, "next") for i in page]


def check(client: TestClient, engine: Engine) -> list[int]:
    want = direct_undecided(engine)
    assert want == decided_column_zero(engine)
    assert shown(client) == want
    # and backwards from the last page, as the pager's "last" link reaches it
    back = walk(client, UNDECIDED + "&last=1", "previous")
    assert [i for page in reversed(back) for i in page] == want
    return want


def test_undecided_rows_are_exactly_the_rule(client: TestClient, engine: Engine) -> None:
    want = check(client, engine)
    assert 0 < len(want) < 321  # a mix, and more than one page of 50
    assert len(want) > 50


def test_undecided_follows_votes_per_example(client: TestClient, engine: Engine) -> None:
    before = check(client, engine)
    for per_example in (4, 2, 1):
        with Session(engine) as s:
            save_study_config(s, {"votes_per_example": per_example})
            s.commit()
        after = check(client, engine)
        assert (after != before) or per_example == 1
        before = after


def test_undecided_after_a_new_vote(client: TestClient, engine: Engine, seeded: Seeded) -> None:
    before = check(client, engine)
    with Session(engine) as s:
        eid = int(
            s.connection()
            .execute(
                select(EXAMPLE.c.id)
                .where(EXAMPLE.c.queue_open.is_(False), EXAMPLE.c.queue_votes == 2)
                .where(EXAMPLE.c.target_votes.is_(None))
                .where(EXAMPLE.c.id.not_in(select(ADJUDICATION.c.example_id)))
                .limit(1)
            )
            .scalar_one()
        )
        assert eid in before
        voted = {
            int(w)
            for (w,) in s.connection().execute(
                select(VOTE.c.worker_id).where(VOTE.c.example_id == eid)
            )
        }
        worker = next(w for w in seeded.worker_ids.values() if w not in voted)
        add_vote(s, eid, worker, True)
        s.commit()
    after = check(client, engine)
    assert after == [i for i in before if i != eid]
