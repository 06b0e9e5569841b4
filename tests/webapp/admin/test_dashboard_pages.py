"""The dashboard bench's page list (bench/dashboard_pages.py) covers every page a user can
reach: every admin GET route, and every value of every filter, sort order and link that the
rendered pages offer. The pages are crawled as an admin clicks through them (real VSR
release records, logged in, both backends); what they offer is read from their HTML, not
from the code the list is generated from, so a new drop-down entry, sort order or link on a
page fails this test until the bench times it. Every listed page also answers."""

from __future__ import annotations

import dataclasses
import html
import re
from collections import deque
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bench.dashboard_pages import NEEDS_ROWS, Choices, Page, admin_get_routes, pages, read_choices
from tests.support.admin_seed import read_raw, seed
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import login, make_admin_app
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.tables import EXAMPLE, VOTE, WORKER

# Values that are positions (a page number, a keyset cursor, an id): the list must reach
# the parameter, not each of its values.
POSITIONS = {"page", "after", "before", "last", "ps", "actor"}
PAGER = re.compile(r'<a class="btn small" href="([^"]+)">[^<]*?\b(first|previous|next|last)\b')
# Not pages: a download the browser saves, POST-only forms are not crawled at all.
NOT_CRAWLED = ("/admin/logout", "/admin/jobs/")


class Offers(HTMLParser):
    """What one page offers: the links (href, src) and every option of its GET forms."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.options: list[tuple[str, str, str]] = []  # (form action, field, value)
        self._form: str | None = None  # action of the open GET form
        self._select: str | None = None
        self._option: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in ("a", "img") and (a.get("href") or a.get("src")):
            self.links.append(a.get("href") or a.get("src", ""))
        elif tag == "form":
            self._form = a.get("action", "") if a.get("method", "get").lower() == "get" else None
        elif tag == "select" and self._form is not None:
            self._select = a.get("name")
        elif tag == "option" and self._select is not None:
            self._option, self._text = a.get("value"), ""

    def handle_data(self, data: str) -> None:
        self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "option" and self._select is not None and self._form is not None:
            value = self._option if self._option is not None else self._text.strip()
            self.options.append((self._form, self._select, value))
            self._option = None
        elif tag == "select":
            self._select = None
        elif tag == "form":
            self._form = None


def offered(
    client: TestClient, starts: list[str], crawl: bool = True
) -> tuple[set[tuple[str, str, str]], set[str]]:
    """(path, parameter, value) of every option and link the pages reached from ``starts``
    offer (``crawl``: following their links), and the paths reached. One page per path and
    set of parameter names is read."""
    found: set[tuple[str, str, str]] = set()
    paths: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = deque(starts)
    while todo:
        url = todo.popleft()
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        key = (parts.path, frozenset(k for k, _ in query))
        if key in seen or parts.path.startswith(NOT_CRAWLED):
            continue
        seen.add(key)
        paths.add(parts.path)
        for k, v in query:
            found.add((parts.path, k, v))
        r = client.get(url, follow_redirects=False)
        assert r.status_code < 500, (url, r.status_code)
        if "html" not in r.headers.get("content-type", ""):
            continue
        page = Offers()
        page.feed(r.text)
        for action, name, value in page.options:
            target = urlsplit(urljoin(url, action or parts.path)).path
            if value:
                found.add((target, name, value))
        for link in page.links:
            full = urlsplit(urljoin(url, link))
            if crawl and full.netloc in ("", "testserver") and full.path.startswith("/admin"):
                todo.append(full.path + (f"?{full.query}" if full.query else ""))
    return found, paths


DATA_VALUES = {"relation", "concept", "origin", "actor", "round", "ps", "study"}


def _shape(p: Page) -> tuple[Any, ...]:
    """A listed page up to its data values: one of each shape is requested."""
    parts = urlsplit(p.path)
    query = parse_qsl(parts.query)
    return parts.path, p.follow, tuple((k, "*" if k in DATA_VALUES else v) for k, v in query)


def one_of_each(page_list: list[Page]) -> list[Page]:
    shapes: dict[tuple[Any, ...], Page] = {}
    for p in page_list:
        shapes.setdefault(_shape(p), p)
    return list(shapes.values())


def listed(client: TestClient, page_list: list[Page], values: dict[str, Any]) -> set[Any]:
    """(path, parameter, value) of every URL the list times, pager links followed (once per
    shape of page: following the pager of each relation's page reaches the same cursors)."""
    out: set[tuple[str, str, str]] = set()
    followed = set(map(id, one_of_each(page_list)))
    for p in page_list:
        url = p.path.format(**values)
        for name in (p.follow or "").split() if id(p) in followed else ():
            r = client.get(url)
            assert r.status_code == 200, (url, r.status_code)
            links = dict((n, h) for h, n in PAGER.findall(r.text))
            url = urljoin(url, html.unescape(links[name])) if name in links else url
        parts = urlsplit(url)
        out |= {(parts.path, k, v) for k, v in parse_qsl(parts.query)}
        out.add((parts.path, "", ""))
    return out


def _key(path: str, name: str, value: str) -> tuple[str, str, str]:
    if name in POSITIONS:
        return path, name, "<n>"
    if name == "study":  # the study switcher is on every page: any page takes it
        return "*", name, value
    return path, name, value


@pytest.fixture
def client(db_url: str, engine: Engine, tmp_path: Path, vsr_dir: Path) -> TestClient:
    seed(engine, read_raw(vsr_dir, every=100))  # 129 Examples: 3 data pages
    with Session(engine) as s:
        create_owner(s, "alice", "correct horse battery")
    c = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(c)
    return c


def _values(engine: Engine) -> dict[str, Any]:
    with engine.connect() as c:
        n_ex = c.execute(select(func.count()).select_from(EXAMPLE)).scalar_one()
        n_w = c.execute(select(func.count()).select_from(WORKER)).scalar_one()
        return {
            "worker": c.execute(select(func.max(VOTE.c.worker_id))).scalar_one(),
            "example": c.execute(select(func.max(EXAMPLE.c.id))).scalar_one(),
            "job": 0,
            "data_pages": -(-n_ex // 50),
            "worker_pages": -(-n_w // 50),
        }


def test_the_page_list_covers_every_route_and_every_value_the_pages_offer(
    client: TestClient, engine: Engine
) -> None:
    with Session(engine) as s:
        choices = read_choices(s, DEFAULT_STUDY_ID)
    page_list = pages(choices)
    values = _values(engine)

    # Every admin GET route (a job's pages once a job exists).
    routes = {p.route for p in pages(dataclasses.replace(choices, has_job=True))}
    assert set(admin_get_routes()) - routes == set()
    assert set(admin_get_routes()) >= NEEDS_ROWS

    starts = sorted({p.path.format(**values).split("?")[0] for p in page_list} - {"/admin/login"})
    found, _ = offered(client, starts)
    have = {_key(*t) for t in listed(client, page_list, values)}
    missing = sorted({_key(*t) for t in found} - have)
    assert missing == [], f"pages offer what the bench does not time: {missing}"

    # The list's own pages answer (a listed value the page refuses would time an error).
    for p in one_of_each(page_list):
        if p.follow is None and "/image" not in p.path:
            r = client.get(p.path.format(**values), follow_redirects=False)
            assert r.status_code in (200, 303, 307), (p.path, r.status_code, r.text[:200])


def test_a_value_a_page_offers_that_the_list_leaves_out_is_found(
    client: TestClient, engine: Engine
) -> None:
    """The check above can fail: without the keep-rule links and the agreement entries
    the list misses what the pages offer."""
    values = _values(engine)
    with Session(engine) as s:
        choices = read_choices(s, DEFAULT_STUDY_ID)
    fewer = [p for p in pages(choices) if "agreement=excluded" not in p.path and not p.follow]
    found, _ = offered(client, ["/admin/data"], crawl=False)
    have = {_key(*t) for t in listed(client, fewer, values)}
    assert ("/admin/data", "agreement", "excluded") in {_key(*t) for t in found} - have
    assert Choices().relations == []
