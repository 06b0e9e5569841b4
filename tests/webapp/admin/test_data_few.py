"""The data page of a filter that selects few Examples or none (docs/admin.md, docs/scaling.md):
once its count is cached the page is read by primary key from the cached matches, never by
walking the study in search of them (at 1.28 million Examples `agreement=excluded` cost
308 ms of PostgreSQL CPU and matched nothing); its pages are the rows OFFSET gives; a
bare page number beyond the bound is sent to the keyset pages. Real VSR release records,
through HTTP with a logged-in admin, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.admin_seed import Seeded, read_raw, seed
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import csrf_of, login, make_admin_app
from tests.webapp.admin.test_data_keyset import offset_ids, page_of, walk
from webapp.admin.routes import data as data_routes
from webapp.admin.routes.data import PAGE


@pytest.fixture(scope="module")
def records(vsr_dir: Path) -> list[dict[str, Any]]:
    return read_raw(vsr_dir, every=40)  # 321 Examples: 7 pages of 50


@pytest.fixture
def seeded(engine: Engine, records: list[dict[str, Any]]) -> Seeded:
    return seed(engine, records)


@pytest.fixture
def client(db_url: str, engine: Engine, tmp_path: Path, seeded: Seeded) -> TestClient:
    with Session(engine) as s:
        create_owner(s, "alice", "correct horse battery")
    c = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(c)
    return c


def _settle(client: TestClient, ids: list[int], decision: str) -> None:
    token = csrf_of(client.get(f"/admin/examples/{ids[0]}").text)
    for eid in ids:
        r = client.post(
            f"/admin/examples/{eid}/adjudicate",
            data={"csrf_token": token, "decision": decision, "reason": "checked the photo"},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text[:300]


@pytest.fixture
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL of every statement run on ``engine`` while the test collects."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        seen.append(sql)

    event.listen(engine, "before_cursor_execute", record)
    yield seen
    event.remove(engine, "before_cursor_execute", record)


def _row_reads(sql: list[str]) -> list[str]:
    """The statements that read the page's rows (the Examples with their captions)."""
    return [s for s in sql if "caption" in s and re.search(r"FROM example\b", s)]


@pytest.mark.parametrize(
    "query", ["agreement=excluded", "agreement=adjudicated", "flips=mace", "q=zzzz_no_match"]
)
def test_a_filter_that_selects_nothing_reads_no_rows(
    client: TestClient, statements: list[str], query: str
) -> None:
    rows, _, body = page_of(client, f"/admin/data?{query}")  # counts, and caches the count
    assert rows == [] and "No Examples match" in body
    statements.clear()
    rows, _, body = page_of(client, f"/admin/data?{query}")
    assert rows == [] and "No Examples match" in body
    assert _row_reads(statements) == [], "an empty filter walked the Examples"


def test_a_filter_that_selects_a_few_pages_by_primary_key_as_offset_does(
    client: TestClient, engine: Engine, seeded: Seeded, statements: list[str]
) -> None:
    settled = seeded.example_ids[5:140:2]  # 68 Examples excluded: 2 pages
    _settle(client, settled, "excluded")
    expected = offset_ids(engine, agreement="excluded")
    assert expected == sorted(settled)
    forward = walk(client, "/admin/data?agreement=excluded", "next")
    assert [i for p in forward for i in p] == expected and len(forward) == 2
    _, links, _ = page_of(client, "/admin/data?agreement=excluded")
    assert walk(client, links["last"], "previous") == forward[::-1]
    statements.clear()
    page_of(client, links["last"])
    reads = _row_reads(statements)
    assert reads and all(re.search(r"example\.id IN", s) for s in reads), reads
    # Adjudicated the same way; and the page after a new adjudication shows it at once
    # (admin actions clear the cached figures).
    assert [i for p in walk(client, "/admin/data?agreement=adjudicated", "next") for i in p] == (
        expected
    )
    _settle(client, [seeded.example_ids[1]], "excluded")
    rows, _, _ = page_of(client, "/admin/data?agreement=excluded")
    assert rows[0] == seeded.example_ids[1]


def test_a_bare_page_number_beyond_the_bound_goes_to_the_keyset_pages(
    client: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = offset_ids(engine)  # 7 pages
    monkeypatch.setattr(data_routes, "BARE_PAGE_LIMIT", 2)
    monkeypatch.setattr(data_routes, "FEW_MATCHES", 0)  # the keyset walk, as at scale
    rows, _, _ = page_of(client, "/admin/data?page=2")  # within the bound: by OFFSET
    assert rows == ids[PAGE : 2 * PAGE]
    for page, where in (("3", "first"), ("5", "last"), ("7", "last"), ("25618", "last")):
        r = client.get(f"/admin/data?page={page}", follow_redirects=False)
        assert r.status_code == 303, (page, r.status_code)
        rows, _, body = page_of(client, r.headers["location"])
        if where == "first":
            assert rows == ids[:PAGE]
        else:
            assert rows == ids[6 * PAGE :] and "page 7 of 7" in body
    # With a filter the redirect keeps it.
    r = client.get("/admin/data?agreement=kept&page=99", follow_redirects=False)
    assert r.status_code == 303 and "agreement=kept" in r.headers["location"]
    assert (
        page_of(client, r.headers["location"])[0]
        == offset_ids(engine, agreement="kept")[
            -(len(offset_ids(engine, agreement="kept")) % PAGE or PAGE) :
        ]
    )
