"""The data page's keyset pages and caption search (docs/admin.md), on SQLite and PostgreSQL,
through HTTP with a logged-in admin, on real VSR release records: walking the pager's links
gives the rows OFFSET gave, in the same order, forwards and back, with Examples added
between two clicks; hostile cursors are refused in plain words; the caption search finds the
same rows with and without PostgreSQL's trigram index."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.admin_seed import Seeded, add_vote, read_raw, seed
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import login, make_admin_app
from vsr_core.models import Example, Worker
from vsr_core.studies.settings import StudyConfig
from webapp.admin import stats
from webapp.admin.routes import data as data_routes
from webapp.admin.routes.data import PAGE

# A row: its tick box (the bulk adjudication form's), then the Example's id as a link.
ROW_ID = re.compile(r'<tr>\s*(?:<td><input[^>]*></td>\s*)?<td><a href="/admin/examples/(\d+)">')
LINK = re.compile(r'<a class="btn small" href="([^"]+)">[^<]*?\b(first|previous|next|last)\b')


@pytest.fixture(scope="module")
def records(vsr_dir: Path) -> list[dict[str, Any]]:
    # Every 40th raw record: 321 Examples, 7 pages of 50.
    return read_raw(vsr_dir, every=40)


@pytest.fixture
def seeded(engine: Engine, records: list[dict[str, Any]]) -> Seeded:
    return seed(engine, records)


@pytest.fixture
def client(
    db_url: str, engine: Engine, tmp_path: Path, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> TestClient:
    # The keyset walk itself: no filter here is paged from its cached matches
    # (test_data_few.py covers those).
    monkeypatch.setattr(data_routes, "FEW_MATCHES", 0)
    with Session(engine) as s:
        create_owner(s, "alice", "correct horse battery")
    c = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(c)
    return c


def page_of(client: TestClient, url: str) -> tuple[list[int], dict[str, str], str]:
    r = client.get(url)
    assert r.status_code == 200, (url, r.status_code, r.text[:300])
    links = {name: html.unescape(href) for href, name in LINK.findall(r.text)}
    return [int(i) for i in ROW_ID.findall(r.text)], links, r.text


def offset_ids(engine: Engine, **filters: Any) -> list[int]:
    """Every matching Example in the order OFFSET pages gave (the page before keyset)."""
    with Session(engine) as s:
        rows, total = stats.browse_examples(s, StudyConfig(), offset=0, limit=10**6, **filters)
    assert len(rows) == total
    return [int(r["id"]) for r in rows]


def walk(client: TestClient, start: str, link: str) -> list[list[int]]:
    """Pages from ``start`` following ``link`` ("next" or "previous") until there is none."""
    pages = []
    url: str | None = start
    while url is not None:
        ids, links, _ = page_of(client, url)
        pages.append(ids)
        url = links.get(link)
        assert len(pages) < 100, "the pager goes round in circles"
    return pages


FILTERS: list[dict[str, str]] = [
    {},
    {"agreement": "kept"},
    {"agreement": "rejected"},
    {"relation": "touching"},
    {"q": "the"},
    {"concept": "person", "agreement": "unanimous"},
]


@pytest.mark.parametrize(
    "filters", FILTERS, ids=lambda f: "&".join(f"{k}={v}" for k, v in f.items())
)
def test_keyset_pages_give_the_offset_rows_in_order(
    client: TestClient, engine: Engine, filters: dict[str, str]
) -> None:
    expected = offset_ids(
        engine,
        relation=filters.get("relation"),
        concept=filters.get("concept"),
        agreement=filters.get("agreement"),
        q=filters.get("q"),
    )
    assert expected and (filters or len(expected) > 6 * PAGE), "the sample should span pages"
    query = "&".join(f"{k}={v}" for k, v in filters.items())
    forward = walk(client, f"/admin/data?{query}", "next")
    assert [i for p in forward for i in p] == expected
    assert all(len(p) == PAGE for p in forward[:-1])
    # The same pages backwards from the last page (the pager's "last" link).
    _, links, _ = page_of(client, f"/admin/data?{query}")
    if len(forward) > 1:
        backward = walk(client, links["last"], "previous")
        assert backward == forward[::-1]
        _, _, body = page_of(client, links["last"])
        assert f"page {len(forward)} of {len(forward)}" in body
    # Each page is what OFFSET gave for that page number.
    for n, ids in enumerate(forward, start=1):
        assert ids == expected[(n - 1) * PAGE : n * PAGE]


def test_walking_across_pages_with_examples_added_between_clicks(
    client: TestClient, engine: Engine, seeded: Seeded
) -> None:
    before = offset_ids(engine)
    _, links, _ = page_of(client, "/admin/data")
    _, links, body = page_of(client, links["next"])
    page2, links, body = page_of(client, links["next"])
    assert "page 3 of 7" in body and page2 == before[2 * PAGE : 3 * PAGE]
    # New Examples arrive (a study going on); ids only grow, so they join the end.
    with Session(engine) as s:
        model = s.get(Example, before[0])
        assert model is not None
        voter = s.exec(select(Worker).order_by(col(Worker.id))).first()
        assert voter is not None
        added = []
        for k in range(60):
            ex = Example(
                image_id=model.image_id,
                caption=f"The keyset test caption number {k}.",
                relation=model.relation,
                subj=model.subj,
                obj=model.obj,
                label=True,
                origin="human",
                study_id=model.study_id,
            )
            s.add(ex)
            s.flush()
            assert ex.id is not None
            add_vote(s, ex.id, voter.id, True)  # type: ignore[arg-type]
            added.append(ex.id)
        s.commit()
    # "next" from page 3 continues right after it: no row skipped or repeated ...
    after_ids, _, _ = page_of(client, links["next"])
    assert after_ids == before[3 * PAGE : 4 * PAGE]
    # ... "previous" from page 3 is page 2 as it was ...
    prev_ids, _, _ = page_of(client, links["previous"])
    assert prev_ids == before[PAGE : 2 * PAGE]
    # ... and walking on to the end reaches the new Examples, in id order.
    rest = walk(client, links["next"], "next")
    assert [i for p in rest for i in p] == before[3 * PAGE :] + added
    assert offset_ids(engine) == before + added


HOSTILE = [
    "after=-1",
    "after=abc",
    "after=99999999999999999999",
    "after=1e3",
    "after=%D9%A3",  # an Arabic-Indic digit three
    "after=1%00",
    "before=0",
    "before=",
    "last=2",
    "last=yes",
    "after=5&before=9",
    "after=5&last=1",
    "page=0",
    "page=100001",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_cursors_are_refused_in_plain_words(client: TestClient, query: str) -> None:
    r = client.get(f"/admin/data?{query}")
    assert 400 <= r.status_code < 500, (query, r.status_code)
    assert "Traceback" not in r.text and "sqlalchemy" not in r.text.lower()
    words = r.text if "text/html" in r.headers["content-type"] else str(r.json())
    assert re.search(r"after|before|last|page|one of", words), words[:500]


def test_cursor_past_either_end_shows_no_rows_and_a_way_back(
    client: TestClient, engine: Engine
) -> None:
    ids = offset_ids(engine)
    rows, links, body = page_of(client, "/admin/data?after=2147483647&page=9")
    assert rows == [] and "No Examples match" in body and "previous" in links
    back, _, _ = page_of(client, links["previous"])
    assert back == ids[-PAGE:]
    rows, links, body = page_of(client, f"/admin/data?before={ids[0]}&page=2")
    assert rows == [] and "next" in links
    onwards, _, _ = page_of(client, links["next"])
    assert onwards == ids[:PAGE]
    # A cursor between rows (an id that does not match the filter) works like any other.
    rows, _, _ = page_of(client, f"/admin/data?after={ids[10] - 0}&page=1")
    assert rows == ids[11 : 11 + PAGE]


SEARCHES = ["dog", "DOG", "touch", "zzzz_no_match", "the cat", "ab", "e", "giraffe", "_", "%", "\\"]


def _search(client: TestClient, q: str) -> list[int]:
    return [i for p in walk(client, "/admin/data?" + urlencode({"q": q}), "next") for i in p]


def test_search_rows_are_the_substring_matches(
    client: TestClient, engine: Engine, seeded: Seeded, records: list[dict[str, Any]]
) -> None:
    by_caption = dict(zip(seeded.example_ids, (r["caption"] for r in records), strict=True))
    for q in SEARCHES:
        expected = sorted(i for i, c in by_caption.items() if q.lower() in c.lower())
        assert _search(client, q) == expected, q


def test_search_is_the_same_with_and_without_the_trigram_index(
    client: TestClient, engine: Engine
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("the trigram index is PostgreSQL's; SQLite reads every caption")
    with engine.connect() as c:
        c.exec_driver_sql("SET enable_seqscan = off")  # the table is small: make it choose
        plan = "\n".join(
            r[0]
            for r in c.execute(
                text("EXPLAIN SELECT id FROM example WHERE caption ILIKE :q"), {"q": "%giraffe%"}
            )
        )
    assert "ix_example_caption_trgm" in plan, plan
    with_index = {q: _search(client, q) for q in SEARCHES}
    assert with_index["dog"] and not with_index["zzzz_no_match"]
    with engine.begin() as c:
        c.exec_driver_sql("DROP INDEX ix_example_caption_trgm")
    try:
        client.app.state.admin_cache.clear()  # type: ignore[attr-defined]
        without = {q: _search(client, q) for q in SEARCHES}
    finally:
        with engine.begin() as c:
            c.exec_driver_sql(
                "CREATE INDEX ix_example_caption_trgm ON example USING gin (caption gin_trgm_ops)"
            )
    assert without == with_index
