"""The queue counters' audit on both backends: silent after real votes and leases, and naming
every counter that disagrees with the rows it counts."""

from __future__ import annotations

import random

from sqlalchemy import update
from sqlmodel import Session, col

from tests.webapp.validate.support import make_example, make_image, make_worker
from vsr_core.models import Assignment, Batch, Example
from vsr_core.studies.settings import StudyConfig
from webapp.validate import audit
from webapp.validate import queue as vq
from webapp.validate.audit import QueueMismatch
from webapp.validate.strategy import ExampleStrategy


def strategy() -> ExampleStrategy:
    config = StudyConfig(gold_rate=0.0, validate_batch_size=500)
    return ExampleStrategy(config=config, rng=random.Random(0))


def vote_and_hold(session: Session) -> tuple[Example, Example, Example, int]:
    """Two validators: ``voted`` gets two votes (one agreeing), ``leased`` an active lease,
    ``gold`` none; the batch id of the first validator."""
    image = make_image(session)
    voted = make_example(session, image, label=True)
    leased = make_example(session, make_image(session), label=False)
    gold = make_example(session, make_image(session), is_gold=True, gold_label=True)
    strat = strategy()
    batch_id = 0
    for k, value in enumerate((True, False)):
        worker = make_worker(session, f"v{k}")
        vq.begin_batch(session, worker, strat)
        item = vq.next_item(session, worker, strat)
        assert item is not None and item.lease_id is not None and item.example_id == voted.id
        outcome = vq.record_vote(session, worker, item.lease_id, value, strat, then_next=True)
        assert outcome.next is not None and outcome.next.example_id == leased.id
        lease = session.get(Assignment, item.lease_id)
        assert lease is not None
        batch_id = batch_id or lease.batch_id
    for example in (voted, leased, gold):
        session.refresh(example)
    return voted, leased, gold, batch_id


def test_counters_after_real_votes_agree(session: Session) -> None:
    voted, leased, gold, _ = vote_and_hold(session)
    assert (voted.queue_votes, voted.queue_agree, voted.queue_leases) == (2, 1, 0)
    assert (leased.queue_votes, leased.queue_leases) == (0, 2)
    assert gold.queue_leases == 0
    assert audit.audit_counters(session) == []


def test_every_wrong_counter_is_named(session: Session) -> None:
    voted, leased, gold, batch_id = vote_and_hold(session)
    session.execute(
        update(Example)
        .where(col(Example.id) == voted.id)
        .values(queue_votes=5, queue_agree=0, queue_leases=1)
    )
    session.execute(update(Example).where(col(Example.id) == leased.id).values(queue_leases=0))
    # A gold Example's leases are never counted on it: one counted is a mismatch.
    session.execute(update(Example).where(col(Example.id) == gold.id).values(queue_leases=3))
    session.execute(update(Batch).where(col(Batch.id) == batch_id).values(done_count=7))
    session.commit()
    assert voted.id is not None and leased.id is not None and gold.id is not None
    assert audit.audit_counters(session) == [
        QueueMismatch(voted.id, "votes", 5, 2),
        QueueMismatch(voted.id, "agree", 0, 1),
        QueueMismatch(voted.id, "leases", 1, 0),
        QueueMismatch(leased.id, "leases", 0, 2),
        QueueMismatch(gold.id, "leases", 3, 0),
        QueueMismatch(batch_id, "batch_done", 7, 1),
    ]
