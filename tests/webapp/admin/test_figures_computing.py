"""No figure computed in the request (docs/admin.md): a dashboard figure no one has asked for
yet (a Workers sort order, the throughput chart, a data filter's count) is computed in the
background; a request that finds it not ready answers at once, says it is computing and for
how long, and the figure is there on a later request. On SQLite and PostgreSQL, real VSR
records, through HTTP, set up as a large study is: the figures computed off the request
(a small database computes them in the request) and ``wait_first=0``, the server does not
wait for the figure at all, as on a study where none is ready in 0.25 s."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.admin_seed import read_raw, seed
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import login, make_admin_app
from vsr_core.models import Example
from webapp.admin import pages, stats
from webapp.admin.cache import FigureCache
from webapp.admin.routes import data as data_routes


@pytest.fixture
def client(
    db_url: str, engine: Engine, tmp_path: Path, vsr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> TestClient:
    # As on a large study: figures computed in the background, and not waited for at all.
    monkeypatch.setattr(pages, "IN_REQUEST_BELOW_EXAMPLES", 0)
    seed(engine, read_raw(vsr_dir, every=80))
    with Session(engine) as s:
        create_owner(s, "alice", "correct horse battery")
    app = make_admin_app(db_url, engine, tmp_path)
    settings = app.state.settings
    app.state.admin_cache = FigureCache(
        directory=pages.figure_cache_dir(settings),
        secret=settings.secret_key.encode(),
        wait_first=0.0,
    )
    c = TestClient(app)
    login(c)
    return c


def _until(client: TestClient, url: str, ready: str, gone: str = "\0") -> str:
    """The page once it shows ``ready`` and no longer ``gone`` (polled for up to 10 s)."""
    for _ in range(200):
        r = client.get(url)
        assert r.status_code == 200
        if ready in r.text and gone not in r.text:
            return r.text
        time.sleep(0.05)
    raise AssertionError(f"{url} never showed {ready!r}")


def test_a_sort_order_no_one_asked_for_answers_at_once_then_shows_the_table(
    client: TestClient,
) -> None:
    t0 = time.perf_counter()
    r = client.get("/admin/workers?order=agreement")
    assert r.status_code == 200 and time.perf_counter() - t0 < 5
    assert re.search(r"Computing the worker table in this order \(\d+ s so far", r.text)
    assert 'data-worker="' not in r.text  # no rows yet, and no half table
    assert "No workers yet" not in r.text and "appears here once it is computed" in r.text
    j = client.get("/admin/api/workers.json?order=gold").json()
    assert j["workers"] == [] and j["computing_seconds"] is not None
    body = _until(client, "/admin/workers?order=agreement", 'data-worker="')
    assert "Computing the worker table" not in body
    assert re.search(r"\d+ workers · sort by", body)
    j = _until(client, "/admin/api/workers.json?order=gold", '"computing_seconds":null')
    assert '"workers":[{' in j


def test_the_throughput_chart_and_a_data_count_say_they_are_computing(
    client: TestClient,
) -> None:
    svg = client.get("/admin/charts/throughput.svg")
    assert svg.status_code == 200 and "Computing this chart" in svg.text
    drawn = _until(client, "/admin/charts/throughput.svg", "<svg", gone="Computing this chart")
    assert "<title>" in drawn  # bars with their values
    first = client.get("/admin/data?agreement=kept")
    assert first.status_code == 200 and "counting the matching Examples" in first.text
    # The rows are read already while the count is computed.
    assert 'href="/admin/examples/' in first.text
    body = _until(client, "/admin/data?agreement=kept", "matching Examples <small")
    assert "counting the matching Examples" not in body


def test_the_quality_page_says_it_is_computing_then_shows_its_figures(
    client: TestClient,
) -> None:
    page = client.get("/admin/quality")
    assert page.status_code == 200
    assert re.search(r"Computing the data quality figures \(\d+ s so far", page.text)
    body = _until(client, "/admin/quality", "Examples ·", gone="Computing the data quality")
    assert "Fleiss" in body
    assert "examples" in client.get("/admin/api/quality.json").json()


def test_a_page_read_while_its_matches_are_counted_walks_a_bounded_window(
    client: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A window of 3 Examples: a page that read more (a walk through the study in search
    # of its rows) would show rows beyond them, or no "read on" link past them.
    monkeypatch.setattr(data_routes, "WALK_WITHIN", 3)
    # The counts wait until the test has read its pages (the study is small: they would
    # otherwise be ready before the second request).
    counted_may_finish = threading.Event()
    count_and_few = stats.count_and_few

    def held_count(*args: Any, **kwargs: Any) -> Any:
        counted_may_finish.wait(10)
        return count_and_few(*args, **kwargs)

    monkeypatch.setattr(stats, "count_and_few", held_count)
    with Session(engine) as s:
        ids = [i for i in s.exec(select(Example.id).order_by(col(Example.id))) if i is not None]
    assert len(ids) > 6
    first = client.get("/admin/data?agreement=kept")
    assert first.status_code == 200 and "counting the matching Examples" in first.text
    assert 'data-walked="3"' in first.text
    shown = {int(i) for i in re.findall(r'name="ids" value="(\d+)"', first.text)}
    assert shown and shown <= set(ids[:3])
    # The pager reads on from where the walk stopped, and so does "last" from the end; it
    # names no page count it does not know yet.
    assert f"after={ids[2]}&amp;page=2" in first.text
    assert '<span class="muted">page 1</span>' in first.text
    second = client.get(f"/admin/data?agreement=kept&after={ids[2]}&page=2")
    shown = {int(i) for i in re.findall(r'name="ids" value="(\d+)"', second.text)}
    assert shown <= set(ids[3:6]) and 'data-walked="3"' in second.text
    last = client.get("/admin/data?agreement=kept&last=1&page=2")
    shown = {int(i) for i in re.findall(r'name="ids" value="(\d+)"', last.text)}
    assert shown <= set(ids[-3:])
    # A filter matching nothing says so only once counted; meanwhile: what the walk read.
    none = client.get("/admin/data?q=no-such-caption-text")
    assert "No Examples match." not in none.text and 'data-walked="3"' in none.text
    assert f"after={ids[2]}&amp;page=2" in none.text
    # A bare page number is not an OFFSET walk meanwhile either: the first page.
    bare = client.get("/admin/data?agreement=rejected&page=5", follow_redirects=False)
    assert bare.status_code == 303 and "agreement=rejected" in bare.headers["location"]
    counted_may_finish.set()
    counted = _until(client, "/admin/data?agreement=kept", "matching Examples <small")
    assert "data-walked" not in counted
    assert len(re.findall(r'name="ids" value="(\d+)"', counted)) == min(50, len(ids))


def test_a_small_study_in_a_database_of_high_ids_computes_in_the_request(
    db_url: str, engine: Engine, tmp_path: Path, vsr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids grow with every study of a database (and never go back), so the newest id alone
    would call a study of a few Examples large once other studies pushed the ids past the
    bound: its overview would say "computing" for figures that take milliseconds. The
    study's own size decides."""
    seed(engine, read_raw(vsr_dir, every=80))
    with Session(engine) as s:
        mine = s.exec(select(Example)).all()
        n = len(mine)
        last = max(e.id or 0 for e in mine)
        first = mine[0]
        s.add(Example(**first.model_dump(exclude={"id", "source_key"}), id=last + 10 * n + 1000))
        create_owner(s, "alice", "correct horse battery")
        s.commit()
    monkeypatch.setattr(pages, "IN_REQUEST_BELOW_EXAMPLES", n + 2)  # above the study's n + 1
    app = make_admin_app(db_url, engine, tmp_path)
    c = TestClient(app)
    login(c)
    j = c.get("/admin/api/overview.json").json()
    assert "computing_seconds" not in j and j["examples"] >= n
    monkeypatch.setattr(pages, "IN_REQUEST_BELOW_EXAMPLES", n + 1)  # now the study is large
    app.state.admin_large = {}
    app.state.admin_cache = FigureCache(wait_first=0.0)
    j = c.get("/admin/api/overview.json").json()
    assert "computing_seconds" in j
