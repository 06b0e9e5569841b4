"""The database-kept limits hold under concurrent bursts on PostgreSQL: a real
`vsr serve --workers 2` (two processes, each with its thread pool) gets bursts of requests
released at one instant. Before the limits were atomic, failed admin logins got 82 of 100
password checks past a limit of 5, new identities per address 16-34 past 10, new batches 47
past 30 (SQLite held: it runs one writing transaction at a time)."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from tests.support.admins import create_owner
from tests.support.browser import free_port
from tests.support.webapp_coco import make_pairs
from tests.webapp.test_serve_hardening import PASSWORD, _serve, _stop
from vsr_core.db import make_engine
from vsr_core.models import Batch, Worker

ADDRESS = "198.51.100.7"  # every burst comes from here (a trusted proxy forwards it)
BURST = 40
LIMITS = {
    "NEW_WORKERS_PER_ADDRESS": "10",
    "NEW_WORKERS_PER_STUDY": "0",
    "NEW_BATCHES_PER_ADDRESS": "30",
    "TRUSTED_PROXIES": "127.0.0.1",
}


@pytest.fixture
def server(pg_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    engine = make_engine(pg_url)
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
        make_pairs(s, coco_dir, 3)
    engine.dispose()
    port = free_port()
    proc = _serve(pg_url, port, tmp_path / "server.log", **LIMITS)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


def _burst(
    n: int, prepare: Callable[[int], httpx.Client], fire: Callable[[int, httpx.Client], int]
) -> Counter[int]:
    """``n`` threads each prepare a client, then all fire at the same instant."""
    clients = [prepare(k) for k in range(n)]
    gate = threading.Barrier(n)
    codes: list[int] = []

    def one(k: int) -> None:
        gate.wait()
        codes.append(fire(k, clients[k]))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    return Counter(codes)


def _client(base: str, address: str = ADDRESS) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=60, headers={"X-Forwarded-For": address})


def test_failed_logins_get_at_most_the_limit_of_password_checks(server: str) -> None:
    def prepare(_k: int) -> httpx.Client:
        c = _client(server)
        c.get("/admin/login")  # the pre-login cookie
        return c

    def fire(_k: int, c: httpx.Client) -> int:
        form = c.get("/admin/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token
        return c.post(
            "/admin/login",
            data={"username": "alice", "password": "wrong-password", "csrf_token": token.group(1)},
        ).status_code

    codes = _burst(BURST, prepare, fire)
    assert codes == Counter({401: 5, 429: BURST - 5}), codes  # 401: a password was checked


def test_new_identities_and_batches_per_address_stop_exactly_at_the_limit(
    server: str, pg_url: str
) -> None:
    def fire_start(k: int, c: httpx.Client) -> int:
        return c.get(
            f"/start/generate?PROLIFIC_PID=burst{k:03d}&STUDY_ID=s&SESSION_ID=s"
        ).status_code

    codes = _burst(BURST, lambda _k: _client(server), fire_start)
    assert codes == Counter({303: 10, 429: BURST - 10}), codes
    engine = make_engine(pg_url)
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Worker)).one() == 10

    # New batches: BURST workers, each entered from an address of its own, begin at once
    # from one address (a NAT); 30 may.
    csrf: dict[int, str] = {}

    def prepare(k: int) -> httpx.Client:
        c = _client(server, f"203.0.113.{k + 1}")
        r = c.get(f"/start/generate?PROLIFIC_PID=batch{k:03d}&STUDY_ID=s&SESSION_ID=s")
        assert r.status_code == 303, r.text[:300]
        token = re.search(r'name="csrf" value="([^"]+)"', c.get("/consent/generate").text)
        assert token
        csrf[k] = token.group(1)
        c.post("/consent/generate", data={"decision": "agree", "csrf": csrf[k]})
        c.headers["X-Forwarded-For"] = ADDRESS
        return c

    def fire_begin(k: int, c: httpx.Client) -> int:
        return c.post("/begin/generate", data={"csrf": csrf[k]}).status_code

    codes = _burst(BURST, prepare, fire_begin)
    assert codes == Counter({303: 30, 429: BURST - 30}), codes
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Batch)).one() == 30
    engine.dispose()
