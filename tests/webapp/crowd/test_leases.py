"""Leases under concurrency, on PostgreSQL (FOR UPDATE SKIP LOCKED) and SQLite (BEGIN IMMEDIATE).

Many workers asking at the same moment must never receive the same pair; two submits of one
answer at once must store it once; two tabs opening a batch at once must open one batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import text
from sqlmodel import Session, select

from tests.support.webapp_coco import answer, client_for, make_app, make_pairs, start_prolific, task
from vsr_core.db import make_engine
from vsr_core.models import Annotation, Assignment, Batch, Example, ImagePair, Worker
from vsr_core.studies.settings import StudyConfig
from webapp.crowd import batches
from webapp.crowd.leases import PairStrategy, take_next

T = TypeVar("T")
STRATEGY = PairStrategy()


def _race(n: int, fn: Callable[[int], T]) -> list[T]:
    """Run fn(0..n-1) in n threads released at the same instant by a barrier."""
    barrier = threading.Barrier(n)

    def run(i: int) -> T:
        barrier.wait()
        return fn(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def _open_batches(engine: Any, n: int) -> list[int]:
    ids = []
    with Session(engine) as s:
        for i in range(n):
            worker = Worker(source="prolific", external_id=f"w{i}")
            s.add(worker)
            s.flush()
            batch = batches.open_or_resume(s, worker, "generate", StudyConfig(), STRATEGY)
            ids.append(batch.id)
        s.commit()
    return [i for i in ids if i is not None]


def test_many_workers_at_once_never_get_the_same_pair(db_url: str, coco_dir: Path) -> None:
    engine = make_engine(db_url)
    with Session(engine) as s:
        pair_ids = make_pairs(s, coco_dir, 10)
    batch_ids = _open_batches(engine, 14)

    def grab(i: int) -> int | None:
        with Session(engine) as s:
            batch = s.get(Batch, batch_ids[i])
            assert batch is not None
            lease = take_next(s, batch, STRATEGY, lease_minutes=10)
            pair_id = lease.pair_id if lease else None
            s.commit()
            return pair_id

    got = _race(len(batch_ids), grab)
    taken = [p for p in got if p is not None]
    assert len(taken) == len(set(taken)) == len(pair_ids)  # every pair once, 4 workers none
    assert got.count(None) == len(batch_ids) - len(pair_ids)
    with Session(engine) as s:
        leases = s.exec(select(Assignment)).all()
        assert len(leases) == len(pair_ids)
        assert {p.status for p in s.exec(select(ImagePair))} == {"leased"}
    engine.dispose()


def test_concurrent_http_task_requests_get_distinct_pairs(  # type: ignore[no-untyped-def]
    db_url: str, engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        make_pairs(s, coco_dir, 8)
    app = make_app(db_url, tmp_path)
    clients = [client_for(app) for _ in range(10)]
    for i, c in enumerate(clients):
        start_prolific(c, f"http{i}", f"s{i}")
    responses = _race(len(clients), lambda i: clients[i].get("/api/generate/task"))
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] * 8 + [409] * 2, codes
    pairs = [r.json()["pair_id"] for r in responses if r.status_code == 200]
    assert len(set(pairs)) == 8


def test_skip_locked_does_not_wait_for_a_held_lease(pg_url: str, coco_dir: Path) -> None:
    """PostgreSQL: while one transaction holds pair 1, another takes pair 2 without blocking."""
    engine = make_engine(pg_url)
    with Session(engine) as s:
        first, second = make_pairs(s, coco_dir, 2)
    b1, b2 = _open_batches(engine, 2)
    with Session(engine) as holder, Session(engine) as other:
        lease = take_next(holder, holder.get(Batch, b1), STRATEGY, 10)  # type: ignore[arg-type]
        assert lease is not None and lease.pair_id == first  # not committed: row lock held
        other.exec(text("SET LOCAL lock_timeout = '2s'"))  # type: ignore[call-overload]
        lease2 = take_next(other, other.get(Batch, b2), STRATEGY, 10)  # type: ignore[arg-type]
        assert lease2 is not None and lease2.pair_id == second
        other.commit()
        holder.commit()
    engine.dispose()


def test_concurrent_submits_of_one_answer_store_it_once(  # type: ignore[no-untyped-def]
    db_url: str, engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        make_pairs(s, coco_dir, 3)
    app = make_app(db_url, tmp_path)
    client = client_for(app)
    start_prolific(client, "clicker")
    fields = task(client)
    cookies = dict(client.cookies)
    copies = [client_for(app) for _ in range(6)]
    for c in copies:
        c.cookies.update(cookies)
    # half the retries reuse the form token, half come from a re-rendered form (new token)
    payloads = [
        answer(fields, client_token=fields["client_token"] if i % 2 else f"retry-token-{i}")
        for i in range(len(copies))
    ]
    responses = _race(
        len(copies), lambda i: copies[i].post("/generate", data=payloads[i], follow_redirects=False)
    )
    assert {r.status_code for r in responses} == {303}
    with Session(engine) as s:
        assert len(s.exec(select(Annotation)).all()) == 1
        assert len(s.exec(select(Example)).all()) == 2


def test_two_tabs_opening_a_batch_at_once_open_one(db_url: str, engine) -> None:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        worker = Worker(source="prolific", external_id="two-tabs")
        s.add(worker)
        s.commit()
        worker_id = worker.id

    def open_one(_: int) -> int | None:
        eng = engine
        with Session(eng) as s:
            w = s.get(Worker, worker_id)
            assert w is not None
            batch = batches.open_or_resume(s, w, "generate", StudyConfig(), STRATEGY)
            s.commit()
            return batch.id

    ids = _race(4, open_one)
    assert len(set(ids)) == 1
    with Session(engine) as s:
        assert len(s.exec(select(Batch)).all()) == 1
