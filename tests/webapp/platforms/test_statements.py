"""plan() and the Platforms page cost a fixed number of SQL statements whatever the number
of submissions (grouped queries): the same count for 2 as for 200 (it was about 4 per
submission on the page and 8 in plan)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlmodel import Session

from tests.support import platform_work as work
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from vsr_core.models import PlatformStudy
from webapp.platforms.engine import Rules, plan


@contextmanager
def counted(engine: Engine) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


def _study(session: Session, n: int, ext: str) -> PlatformStudy:
    row = PlatformStudy(
        platform="prolific",
        external_id=ext,
        settings={"kind": "generate", "reward_cents": 100, "rules": {"bonus_cents_per_kept": 10}},
    )
    session.add(row)
    session.commit()
    work.crowd(session, row, n, start=1000 * len(ext))
    return row


def _statements(engine: Engine, job: Callable[[], object]) -> int:
    with counted(engine) as seen:
        job()
    return len(seen)


def test_plan_and_page_statements_do_not_grow_with_submissions(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
        small, large = _study(s, 2, "aa"), _study(s, 200, "bbbb")
        ids = small.id, large.id
    rules = Rules(min_items=1, bonus_cents_per_kept=10)
    counts = []
    for ps in ids:
        with Session(engine) as s:
            row = s.get(PlatformStudy, ps)
            assert row is not None
            s.commit()
            counts.append(_statements(engine, partial(plan, s, row, rules)))
    assert counts[0] == counts[1], counts
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(client)
    pages = []
    for ps in ids:
        client.get(f"/admin/platform?ps={ps}")  # warm-up: caches of the study settings
        pages.append(_statements(engine, partial(client.get, f"/admin/platform?ps={ps}")))
    assert pages[0] == pages[1], pages
    page = client.get(f"/admin/platform?ps={ids[1]}").text
    assert page.count('<td class="paid">1 votes') == 0 and page.count("0 votes, 1 written") == 200
