"""Which statements a vote takes on PostgreSQL: the common vote (the worker's own active lease
in the request's study) is one statement (statements.vote_on_active), with no lock_lease and
no separate decision-state UPDATE; everything else falls back to the general path, and the
fallback leaves nothing of the first try behind."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from sqlmodel import Session, col, select

from tests.conftest import require_backend
from tests.webapp.validate.support import make_example, make_image, make_worker
from vsr_core.models import Assignment, Batch, Example, Vote, Worker
from vsr_core.studies.settings import StudyConfig
from webapp.validate import driver, statements
from webapp.validate import queue as vq
from webapp.validate.queue import VoteError
from webapp.validate.strategy import ExampleStrategy

CONFIG = StudyConfig(gold_rate=0.0, validate_batch_size=50)


@pytest.fixture
def backend() -> str:
    """PostgreSQL only (the one-statement path is PostgreSQL's): conftest's ``session``
    fixture, on that backend alone."""
    require_backend("postgresql")
    return "postgresql"


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The queue's prebuilt statements by name, as they run (on PostgreSQL every one goes
    through driver.execute)."""
    names = {
        id(getattr(statements.statements_for("postgresql"), f)): f
        for f in statements.Statements.__dataclass_fields__
    }
    seen: Counter[str] = Counter()
    plain = driver.execute

    def counting(connection: Any, stmt: Any, params: dict[str, Any]) -> Any:
        seen[names.get(id(stmt), "other")] += 1
        return plain(connection, stmt, params)

    monkeypatch.setattr(driver, "execute", counting)
    return seen


def _setup(s: Session, n: int = 4, target: int | None = None) -> tuple[Worker, ExampleStrategy]:
    image = make_image(s)
    author = make_worker(s, "author", ["generate"])
    for k in range(n):
        make_example(
            s,
            image,
            author=author,
            relation=("left of", "right of", "above", "below")[k % 4],
            target_votes=target,
        )
    worker = make_worker(s, "validator", ["validate"])
    strat = ExampleStrategy(config=CONFIG, rng=random.Random(0))
    vq.begin_batch(s, worker, strat)
    return worker, strat


def _lease(s: Session, worker: Worker, strat: ExampleStrategy) -> int:
    item = vq.next_item(s, worker, strat)
    assert item is not None and item.lease_id is not None
    return item.lease_id


def test_the_common_vote_is_one_statement(session: Session, ran: Counter[str]) -> None:
    worker, strat = _setup(session)
    lease_id = _lease(session, worker, strat)
    ran.clear()
    out = vq.record_vote(session, worker, lease_id, True, strat, then_next=True, duration_ms=700)
    assert ran["vote_on_active"] == 1 and ran["lease_regular"] == 1
    assert not ran["lock_lease"] and not ran["write_vote"] and not ran["set_state"]
    assert out.created and out.done == 1 and out.next is not None
    vote = session.exec(select(Vote).where(Vote.assignment_id == lease_id)).one()
    assert (vote.value, vote.duration_ms, vote.worker_id) == (True, 700, worker.id)
    lease = session.get(Assignment, lease_id)
    assert lease is not None and lease.status == "done" and lease.finished_at is not None
    example = session.get(Example, lease.example_id)
    assert example is not None and (example.queue_votes, example.queue_leases) == (1, 0)
    batch = session.get(Batch, lease.batch_id)
    assert batch is not None and batch.done_count == 1


def test_an_example_with_its_own_target_gets_its_state_written_apart(
    session: Session, ran: Counter[str]
) -> None:
    worker, strat = _setup(session, n=1, target=1)
    lease_id = _lease(session, worker, strat)
    ran.clear()
    # 0 of 1 agree: one more vote cannot make it 2/3, so its one vote decides it.
    vq.record_vote(session, worker, lease_id, False, strat)
    assert ran["vote_on_active"] == 1 and ran["set_state"] == 1
    example = session.exec(select(Example)).one()
    assert (example.queue_settled, example.queue_open) == (True, False)


def test_a_second_submit_falls_back_and_replays(session: Session, ran: Counter[str]) -> None:
    worker, strat = _setup(session)
    lease_id = _lease(session, worker, strat)
    first = vq.record_vote(session, worker, lease_id, False, strat)
    ran.clear()
    again = vq.record_vote(session, worker, lease_id, True, strat)  # a different answer, too
    assert ran["vote_on_active"] == 1 and ran["lock_lease"] == 1 and not ran["write_vote"]
    assert not again.created and again.vote.id == first.vote.id and again.vote.value is False
    assert len(session.exec(select(Vote)).all()) == 1
    example = session.exec(select(Example).where(col(Example.queue_votes) > 0)).one()
    assert example.queue_votes == 1  # counted once


def test_another_workers_lease_is_refused_and_nothing_is_written(
    session: Session, ran: Counter[str]
) -> None:
    worker, strat = _setup(session)
    lease_id = _lease(session, worker, strat)
    other = make_worker(session, "other", ["validate"])
    with pytest.raises(VoteError) as refused:
        vq.record_vote(session, other, lease_id, True, strat)
    assert refused.value.status == 404 and ran["vote_on_active"] == 1
    lease = session.get(Assignment, lease_id)
    assert lease is not None and lease.status == "active"
    assert session.exec(select(Vote)).all() == []
    assert all(e.queue_votes == 0 for e in session.exec(select(Example)).all())


def test_a_blocked_worker_is_refused_with_403(session: Session, ran: Counter[str]) -> None:
    worker, strat = _setup(session)
    lease_id = _lease(session, worker, strat)
    worker.blocked = True
    session.add(worker)
    session.commit()
    with pytest.raises(VoteError) as refused:
        vq.record_vote(session, worker, lease_id, True, strat)
    assert refused.value.status == 403 and ran["lock_lease"] == 1
    assert session.exec(select(Vote)).all() == []


def test_a_lease_of_another_study_is_refused(session: Session, ran: Counter[str]) -> None:
    """The request names a study the lease is not in (a vote sent to another study's
    address): the one-statement path finds nothing (it asks for the request's study), the
    general path refuses it with a 404 in plain words and stores nothing; the lease stays
    open for the vote at its own study's address."""
    worker, strat = _setup(session)
    lease_id = _lease(session, worker, strat)
    ran.clear()
    with pytest.raises(VoteError) as refused:
        vq.record_vote(session, worker, lease_id, True, strat, study_id=999)
    assert refused.value.status == 404 and "belongs to another study" in refused.value.message
    assert ran["vote_on_active"] == 1 and ran["write_vote"] == 0
    assert session.exec(select(Vote)).all() == []
    out = vq.record_vote(session, worker, lease_id, True, strat)
    assert out.created and len(session.exec(select(Vote)).all()) == 1
