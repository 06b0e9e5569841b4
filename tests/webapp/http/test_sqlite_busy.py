"""On SQLite a writer waits a bounded time for another's write lock, then gets a 503 with
Retry-After in plain words (``vsr_core.db.SQLITE_BUSY_TIMEOUT_SECONDS``). Before, it waited
30 s: concurrent settings saves held every server thread, clients timed out at 30 s."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlmodel import Session

from tests.support.admins import create_owner
from tests.support.webapp_coco import client_for, make_app
from tests.webapp.http.test_malformed_tokens import PASSWORD, _admin
from vsr_core.db import SQLITE_BUSY_TIMEOUT_SECONDS, make_engine


def test_a_writer_blocked_by_another_gets_503_with_retry_after(
    sqlite_url: str, tmp_path: Path
) -> None:
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    engine.dispose()
    client = client_for(make_app(sqlite_url, tmp_path))
    token = _admin(client)
    # Another process holds the write lock (a bulk import, a stuck transaction).
    holder = sqlite3.connect(str(make_url(sqlite_url).database), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        r = client.post(
            "/admin/settings",
            data={"csrf_token": token, "validate_batch_size": "20"},
            headers={"Accept": "text/html"},
        )
        waited = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.status_code == 503, (r.status_code, r.text[:300])
    assert r.headers["retry-after"] == "2"
    assert "try again in a few seconds" in r.text
    assert waited < SQLITE_BUSY_TIMEOUT_SECONDS * 2 + 3, waited
    assert client.get("/admin").status_code == 200  # the lock gone, the site answers
