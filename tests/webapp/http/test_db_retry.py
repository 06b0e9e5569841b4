"""HTML routes survive a database connection PostgreSQL terminates in the middle of the
request (docs/security.md), under the same rule as the JSON API: run once more on a fresh
connection when that cannot store anything twice (webapp.http.db_retry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.webapp_coco import client_for, form_field, lease_id_of, make_app, set_study
from tests.webapp.validate.test_routes import seed_examples, start
from vsr_core.db import make_engine
from vsr_core.models import Assignment, LeaseStatus, Vote


class Terminator:
    """Terminates the backend of the connection running the next matching statement (or
    COMMIT), once, and waits until it is gone: that statement then fails as on a restart."""

    def __init__(self, pg_url: str) -> None:
        self.dsn = pg_url.replace("postgresql+psycopg://", "postgresql://")
        self.armed: str | None = None
        self.fired = 0

    def arm(self, on: str) -> None:
        self.armed, self.fired = on, 0

    def _kill(self, conn: Any) -> None:
        pid = conn.connection.dbapi_connection.info.backend_pid
        with psycopg.connect(self.dsn, autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        self.armed = None
        self.fired += 1

    def before_execute(self, conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if self.armed is not None and self.armed != "commit" and self.armed in statement:
            self._kill(conn)

    def before_commit(self, conn: Any) -> None:
        if self.armed == "commit":
            self._kill(conn)

    def attach(self, engine: Engine) -> None:
        event.listen(engine, "before_cursor_execute", self.before_execute)
        event.listen(engine, "commit", self.before_commit)


@pytest.fixture
def dropping_site(pg_url: str, coco_dir: Path, tmp_path: Path) -> Any:
    engine = make_engine(pg_url)
    with Session(engine) as s:
        seed_examples(s, coco_dir)
    engine.dispose()
    set_study(pg_url, gold_rate=0.0)
    app = make_app(pg_url, tmp_path, image_root=coco_dir / "images")
    terminator = Terminator(pg_url)
    terminator.attach(app.state.engine)
    return app, terminator, pg_url


def _rows(pg_url: str) -> tuple[list[tuple[int, bool]], int]:
    engine = make_engine(pg_url)
    with Session(engine) as s:
        votes = [(v.assignment_id, v.value) for v in s.exec(select(Vote).order_by(col(Vote.id)))]
        active = len(
            s.exec(select(Assignment).where(Assignment.status == LeaseStatus.active)).all()
        )
    engine.dispose()
    return votes, active  # type: ignore[return-value]


@pytest.mark.parametrize("kill_on", ["SELECT", "INSERT INTO assignment", "commit"])
def test_task_page_survives_a_terminated_backend(dropping_site: Any, kill_on: str) -> None:
    app, terminator, pg_url = dropping_site
    client = client_for(app)
    start(client, "droppage")
    terminator.arm(kill_on)
    page = client.get("/validate")
    assert terminator.fired == 1
    assert page.status_code == 200, page.text
    lease = form_field(page.text, "assignment_id")
    assert _rows(pg_url) == ([], 1)
    assert form_field(client.get("/validate").text, "assignment_id") == lease


@pytest.mark.parametrize("kill_on", ["SELECT", "INSERT INTO vote", "commit"])
def test_vote_form_survives_a_terminated_backend(dropping_site: Any, kill_on: str) -> None:
    """Also when the connection dies during COMMIT (the vote may or may not be stored):
    the second attempt finds it, or stores it, once."""
    app, terminator, pg_url = dropping_site
    client = client_for(app)
    csrf = start(client, "dropvote")
    lease = form_field(client.get("/validate").text, "assignment_id")
    terminator.arm(kill_on)
    r = client.post(
        "/validate",
        data={"csrf": csrf, "assignment_id": lease, "answer": "true"},
        follow_redirects=False,
    )
    assert terminator.fired == 1
    assert (r.status_code, r.headers.get("location")) == (303, "/validate"), r.text
    votes, _ = _rows(pg_url)
    assert votes == [(lease_id_of(lease), True)]
    assert client.get("/validate").status_code == 200


def test_a_committed_non_idempotent_post_is_not_repeated() -> None:
    """A POST that may already be stored is not run twice: the admin sees the 500 page."""
    from webapp.http.db_retry import may_retry

    post = {"method": "POST", "path": "/admin/settings/invites"}
    assert may_retry(post, committed=False) and not may_retry(post, committed=True)
    assert may_retry({"method": "POST", "path": "/validate"}, committed=True)
    assert may_retry({"method": "GET", "path": "/admin/data"}, committed=True)


@pytest.fixture
def server_without_database(tmp_path: Path) -> Any:
    """A real uvicorn serving the app over a PostgreSQL address where nothing listens (the
    database down, or restarting)."""
    import threading
    import time

    import uvicorn

    from tests.support.browser import free_port

    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/vsr_down"
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(make_app(url, tmp_path), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def test_a_database_that_is_down_gets_503_with_retry_after_on_a_kept_connection(
    server_without_database: int,
) -> None:
    """Before: an unhandled 500 after which uvicorn closed the connection; nginx met a reset
    on its next request over it and took the replica out (502 "no live upstreams")."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server_without_database, timeout=20)
    sockets = []
    for path, accept in (
        ("/healthz", "application/json"),
        ("/start/validate?PROLIFIC_PID=down1&STUDY_ID=s&SESSION_ID=s", "text/html"),
        ("/s/default/start/validate?PROLIFIC_PID=down1&STUDY_ID=s&SESSION_ID=s", "text/html"),
        ("/healthz", "application/json"),
    ):
        conn.request("GET", path, headers={"Accept": accept})
        r = conn.getresponse()
        body = r.read().decode()
        assert r.status == 503, (path, r.status, body[:300])
        assert r.getheader("Retry-After") == "2", path
        assert (r.getheader("Connection") or "").lower() != "close", path
        assert "database is unavailable" in body, body[:300]
        assert "Traceback" not in body
        sockets.append(conn.sock)
    assert all(s is sockets[0] and s is not None for s in sockets)  # one connection, kept
    conn.close()


def test_a_connection_lost_after_the_answer_is_no_error(dropping_site: Any) -> None:
    """PostgreSQL going away between a route's last statement and the session's closing
    ROLLBACK: the answer stands. Before, the ROLLBACK's error reached the server after the
    response had started, and uvicorn dropped the keep-alive connection (nginx: a 502 for
    the next request on it)."""
    from fastapi.testclient import TestClient

    app, terminator, _ = dropping_site

    def after(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.strip().lower() == "select 1" and not terminator.fired:
            terminator._kill(conn)

    event.listen(app.state.engine, "after_cursor_execute", after)
    client = TestClient(app)  # raises what the app raises
    r = client.get("/healthz")
    assert r.status_code == 200 and terminator.fired == 1
    assert client.get("/healthz").status_code == 200
