"""No whole-study figure computed in a request, and the start-up warm-up (docs/dashboard.md).

On a new database set up as a large study (the in-request threshold lowered to 0, real VSR
records, both backends, through HTTP), every page of the dashboard bench's generated list
answers while a hook fails any whole-study computation that runs in the request's thread
(every figure function of ``webapp.admin.stats`` and the study's vote count); the pages say
they are computing. The warm-up ``vsr serve`` starts then computes every figure in the
background (progress on the pages meanwhile), and the same pages show their figures
without a computation in the request either. On SQLite the warm-up's reads hold no write
lock: a write goes through while one is open.
"""

from __future__ import annotations

import fcntl
import functools
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bench.dashboard_pages import pages, read_choices
from tests.support.admin_seed import read_raw, seed
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import login, make_admin_app
from tests.webapp.admin.test_dashboard_pages import _values
from vsr_core import authenticity_db, label_fit
from vsr_core.models import DEFAULT_STUDY_ID
from webapp.admin import pages as admin_pages
from webapp.admin import stats, warmup
from webapp.admin.cache import FigureCache, in_background

# Every function that reads the whole study (all its Examples or votes) for a figure.
WHOLE_STUDY = (
    "counted_figures",
    "relation_table",
    "quality",
    "concept_counts",
    "frame_answers",
    "negatives_check",
    "agreement_coefficients",
    "worker_table",
    "add_pace",
    "throughput",
    "distinct_values",
    "flip_preview",
    "count_and_few",
)


class InRequest(AssertionError):
    pass


class Recounts(list[str]):
    """The whole-study computations that ran in a request thread; background ones wait for
    ``gate`` (so every page meets its figure not ready, as on a study where a recount takes
    seconds), then run as before."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()


@pytest.fixture
def recounts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recounts]:
    """Each whole-study computation in a request also raises there, so a page that computes
    one fails loudly."""
    ran = Recounts()

    def guard(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if not in_background():
                ran.append(name)
                raise InRequest(f"{name} computed in a request")
            ran.gate.wait(60)
            return fn(*args, **kwargs)

        return wrapped

    for name in WHOLE_STUDY:
        monkeypatch.setattr(stats, name, guard(name, getattr(stats, name)))
    count = label_fit.study_vote_count
    monkeypatch.setattr(label_fit, "study_vote_count", guard("study_vote_count", count))
    for name in ("assess_workers", "batch_assessments"):  # all of a worker's answers
        monkeypatch.setattr(authenticity_db, name, guard(name, getattr(authenticity_db, name)))
    yield ran


@pytest.fixture
def app(
    db_url: str, engine: Engine, tmp_path: Path, vsr_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Any:
    # As on a large study (>= 20,000 Examples): nothing counted in a request, nothing waited
    # for; a new database, so no figure kept on disk either.
    monkeypatch.setattr(admin_pages, "IN_REQUEST_BELOW_EXAMPLES", 0)
    seed(engine, read_raw(vsr_dir, every=60))
    with Session(engine) as s:
        create_owner(s, "alice", "correct horse battery")
    app = make_admin_app(db_url, engine, tmp_path)
    settings = app.state.settings
    app.state.admin_cache = FigureCache(
        directory=admin_pages.figure_cache_dir(settings),
        secret=settings.secret_key.encode(),
        wait_first=0.0,
    )
    return app


@pytest.fixture
def urls(app: Any, engine: Engine) -> list[str]:
    """Every URL of the bench's generated page list (pager links not followed: their cursor
    pages are the same handler as the first page)."""
    with Session(engine) as s:
        listed = pages(read_choices(s, DEFAULT_STUDY_ID))
    values = _values(engine)
    return sorted({p.path.format(**values) for p in listed if "{job}" not in p.path})


def test_no_page_computes_a_whole_study_figure_and_the_warm_up_fills_them(
    app: Any, urls: list[str], recounts: Recounts
) -> None:
    client = TestClient(app)
    login(client)
    assert len(urls) > 50
    said: dict[str, str] = {}
    for url in urls:
        r = client.get(url, follow_redirects=False)
        assert r.status_code in (200, 303, 307), (url, r.status_code, r.text[:300])
        said[url] = r.text
    assert recounts == []
    # Every page whose figure is not ready says so instead of waiting for it.
    assert "Computing the study's counts" in said["/admin"]
    assert "Computing the data quality figures" in said["/admin/quality"]
    assert "Computing the worker table" in said["/admin/workers"]
    assert "Computing this chart" in said["/admin/charts/throughput.svg"]
    assert "counting the matching Examples" in said["/admin/data?agreement=excluded"]
    assert "Computing what each keep rule would change" in said["/admin/settings"]
    worker = next(u for u in urls if u.startswith("/admin/workers/"))
    assert "Computing this worker's totals" in said[worker]
    assert "Computing this worker's authenticity evidence" in said[worker]

    # The warm-up, as `vsr serve` starts it, computes them in the background; the pages say
    # how far it is meanwhile, and show the figures once it is done.
    app.state.admin_cache = FigureCache(
        directory=admin_pages.figure_cache_dir(app.state.settings) / "fresh",
        secret=app.state.settings.secret_key.encode(),
        wait_first=0.0,
    )
    recounts.gate.set()
    app.state.admin_warmup = warmup.WarmUp(total=30, done=4, current="the worker table by id")
    during = client.get("/admin/quality").text
    assert "figures in the background (4 of 30 ready: the worker table by id)" in during
    state = warmup.start(app)
    assert state.thread is not None
    state.thread.join(120)
    assert state.finished and state.done == state.total > 20
    for url in ("/admin", "/admin/quality", "/admin/workers", "/admin/settings"):
        body = client.get(url).text
        assert "Computing" not in body, url
        assert "figures in the background" not in body, url
    # A worker's page: their totals from the warmed Workers table; their own evidence (not
    # warmed: one per worker) is computed in the background on the first visit.
    assert "Computing this worker's totals" not in client.get(worker).text
    for _ in range(200):
        body = client.get(worker).text
        if "Computing" not in body:
            break
        time.sleep(0.05)
    assert "Computing" not in body and "score " in body
    overview = client.get("/admin/api/overview.json").json()
    assert overview["examples"] > 0 and "computing_seconds" not in overview
    assert "Fleiss" in client.get("/admin/quality").text
    assert 'data-worker="' in client.get("/admin/workers?order=agreement").text
    assert "<title>" in client.get("/admin/charts/throughput.svg").text
    settings_page = client.get("/admin/settings").text
    assert "none flip" in settings_page or "that flip</a>" in settings_page
    assert recounts == []


def test_the_warm_up_holds_no_write_lock_on_sqlite(app: Any, engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL readers never block writers")
    with admin_pages.reading_session(engine) as s:
        s.connection().execute(text("SELECT count(*) FROM example")).scalar_one()
        # Another connection writes while this reading transaction is open.
        db = engine.url.database
        assert db is not None
        other = sqlite3.connect(db, timeout=0.5, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("UPDATE example SET is_gold = is_gold WHERE id = 1")
            other.execute("COMMIT")
        finally:
            other.close()


def test_no_page_compiles_a_template_once_the_server_started(
    app: Any, urls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the start-up does before the server answers; a page rendered afterwards with a
    # template it left out would compile it in the request, and fail here.
    assert warmup.compile_templates(app) > 30
    env = app.state.templates.env

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a template compiled in a request")

    monkeypatch.setattr(env, "compile", refuse)
    client = TestClient(app)
    login(client)
    # One page of each route (every template the dashboard renders).
    routes = {u.split("?")[0].rstrip("0123456789"): u for u in urls}
    assert len(routes) > 15
    for url in routes.values():
        r = client.get(url, follow_redirects=False)
        assert r.status_code in (200, 303, 307), (url, r.status_code, r.text[:300])


def test_one_process_of_a_server_warms_up_the_others_skip(app: Any) -> None:
    """The worker processes of one server share the figures' folder: while one holds the
    warm-up lock (another process: an open file description of its own), a second warm-up
    computes nothing; once the lock is free, a warm-up computes the figures."""
    folder = admin_pages.app_figure_cache(app).directory
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "warmup.lock").open("a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        skipped = warmup.start(app)
        assert skipped.thread is not None
        skipped.thread.join(30)
        assert skipped.finished and skipped.total == 0 and skipped.done == 0
        fcntl.flock(other, fcntl.LOCK_UN)
    ran = warmup.start(app)
    assert ran.thread is not None
    ran.thread.join(120)
    assert ran.finished and ran.done == ran.total > 0
