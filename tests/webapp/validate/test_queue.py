"""The validation queue on both backends: who gets which Example, adaptive redundancy, votes."""

from __future__ import annotations

import random
import threading
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from tests.webapp.validate.support import make_example, make_image, make_worker
from vsr_core.agreement import is_decided
from vsr_core.models import Assignment, Batch, Example, Vote, Worker
from vsr_core.studies.settings import StudyConfig
from vsr_core.types import utcnow
from webapp.validate import audit
from webapp.validate import queue as vq
from webapp.validate import strategy as strategy_mod
from webapp.validate.queue import VoteError
from webapp.validate.strategy import ExampleStrategy


def strategy(**changes: object) -> ExampleStrategy:
    base = {"gold_rate": 0.0, "validate_batch_size": 500}
    return ExampleStrategy(config=StudyConfig(**(base | changes)), rng=random.Random(0))


def lease_for(session: Session, worker: Worker, strat: ExampleStrategy) -> Assignment | None:
    vq.begin_batch(session, worker, strat)
    item = vq.next_item(session, worker, strat)
    assert item is not None
    return session.get(Assignment, item.lease_id) if item.lease_id is not None else None


def judge(session: Session, worker: Worker, strat: ExampleStrategy, value: bool) -> int | None:
    """Take the next item and vote on it; the Example id, or None when nothing was served."""
    lease = lease_for(session, worker, strat)
    if lease is None:
        return None
    assert lease.id is not None
    vq.record_vote(session, worker, lease.id, value, strat)
    return lease.example_id


def test_serves_only_votable_examples_never_to_author(session: Session) -> None:
    img = make_image(session)
    author = make_worker(session, "author")
    validator = make_worker(session, "v1")
    mine = make_example(session, img, author=author)
    make_example(session, img, origin="imported")
    # On a photo of its own: a machine negative never shares a batch with its photo.
    adv = make_example(session, make_image(session), origin="adversarial")
    strat = strategy()
    assert lease_for(session, author, strat) is not None
    served_author = session.exec(select(Assignment).where(Assignment.worker_id == author.id)).one()
    assert served_author.example_id == adv.id  # never their own, never an imported one
    seen = [judge(session, validator, strat, True) for _ in range(3)]
    assert seen == [mine.id, adv.id, None]  # oldest first; nothing imported; then done


def test_never_twice_and_three_votes_then_stop(session: Session) -> None:
    img = make_image(session)
    ex = make_example(session, img, label=True)
    workers = [make_worker(session, f"w{i}") for i in range(5)]
    strat = strategy()
    # Three validators all disagree with the label: decided (not kept) at the target.
    for w in workers[:3]:
        assert judge(session, w, strat, False) == ex.id
        assert judge(session, w, strat, False) is None  # never the same Example twice
    assert judge(session, workers[3], strat, False) is None
    votes = session.exec(select(Vote).where(Vote.example_id == ex.id)).all()
    assert len(votes) == 3 and len({v.worker_id for v in votes}) == 3
    session.refresh(ex)
    assert (ex.queue_votes, ex.queue_agree, ex.queue_leases, ex.queue_open) == (3, 0, 0, False)


@pytest.mark.parametrize(
    ("method", "values", "expected_total"),
    [
        # exact: more votes while any further votes up to the maximum (5) could flip it.
        ("exact", [False, False, False], 3),  # 0/3: can no longer reach 2/3 of 5
        ("exact", [True, False, False], 3),  # 1/3: at best 3/5 < 2/3
        ("exact", [True, True, True, True], 4),  # 3/3 could still fall to 3/5; 4/4 is safe
        ("exact", [True, True, False, True, False], 5),  # 2/3, 3/4 open -> the maximum
        # next_vote (the default): more votes only while one more could flip it.
        ("next_vote", [False, False, False], 3),  # 0/3: not kept either way
        ("next_vote", [True, False, False], 3),  # 1/3: at best 2/4, still not kept
        ("next_vote", [True, True, True], 3),  # unanimous: 3/4 would still keep
        ("next_vote", [True, True, False, False], 4),  # 2/3 kept, 2/4 not; 3/5 still not
        ("next_vote", [True, True, False, True, False], 5),  # 2/3, then 3/4: up to 5
    ],
)
def test_adaptive_redundancy(
    session: Session, method: str, values: list[bool], expected_total: int
) -> None:
    img = make_image(session)
    ex = make_example(session, img, label=True)
    workers = [make_worker(session, f"w{i}") for i in range(7)]
    strat = strategy(votes_per_example=3, max_votes_per_example=5, decide_method=method)
    served = 0
    for w, value in zip(workers, values + [True] * 7, strict=False):
        if judge(session, w, strat, value) is None:
            break
        served += 1
    assert served == expected_total
    session.refresh(ex)
    assert ex.queue_votes == expected_total and ex.queue_open is False


def test_default_decide_method_is_next_vote() -> None:
    from vsr_core.studies.settings import StudyConfig

    assert StudyConfig().decide_method == "next_vote"


def test_tie_gets_more_votes_with_small_target(session: Session) -> None:
    img = make_image(session)
    ex = make_example(session, img, label=True, target_votes=2)
    ws = [make_worker(session, f"w{i}") for i in range(4)]
    strat = strategy(max_votes_per_example=3, decide_method="wilson", decide_confidence=0.5)
    assert judge(session, ws[0], strat, True) == ex.id
    assert judge(session, ws[1], strat, False) == ex.id  # 1-1 tie: undecided
    assert judge(session, ws[2], strat, True) == ex.id  # a third vote, the maximum
    assert judge(session, ws[3], strat, True) is None


def test_pending_leases_count_towards_target_and_expire(session: Session) -> None:
    img = make_image(session)
    ex = make_example(session, img)
    ws = [make_worker(session, f"w{i}") for i in range(4)]
    strat = strategy()
    leases_ = [lease_for(session, w, strat) for w in ws[:3]]
    assert all(lease is not None and lease.example_id == ex.id for lease in leases_)
    # Three leases out, no votes yet: a fourth validator must not be served this Example.
    assert lease_for(session, ws[3], strat) is None
    # One lease runs out: its slot goes back to the pool.
    first = leases_[0]
    assert first is not None
    first.lease_expires_at = utcnow() - timedelta(seconds=1)
    session.add(first)
    session.commit()
    # ws[3]'s batch was given up (returned) when nothing was left; a new one picks it up.
    assert lease_for(session, ws[3], strat) is not None
    session.refresh(first)
    session.refresh(ex)
    assert first.status == "expired" and ex.queue_leases == 3
    assert audit.audit_counters(session) == []


def test_late_vote_accepted_only_with_room(session: Session) -> None:
    img = make_image(session)
    make_example(session, img)
    ws = [make_worker(session, f"w{i}") for i in range(5)]
    strat = strategy()
    late = lease_for(session, ws[0], strat)
    assert late is not None and late.id is not None
    late.lease_expires_at = utcnow() - timedelta(seconds=1)
    session.add(late)
    session.commit()
    strategy_mod.expire_stale(session, strat)
    session.commit()
    # Room left (0 votes, 0 leases): the late vote still counts.
    assert vq.record_vote(session, ws[0], late.id, True, strat).created
    # Now fill the Example with leases and let a second late vote arrive: refused.
    late2 = lease_for(session, ws[1], strat)
    assert late2 is not None and late2.id is not None
    late2.lease_expires_at = utcnow() - timedelta(seconds=1)
    session.add(late2)
    session.commit()
    assert lease_for(session, ws[2], strat) is not None  # expires late2, takes the slot
    assert lease_for(session, ws[3], strat) is not None
    with pytest.raises(VoteError) as err:
        vq.record_vote(session, ws[1], late2.id, True, strat)
    assert err.value.status == 409 and "ran out" in err.value.message
    assert audit.audit_counters(session) == []


def test_submit_is_idempotent_and_owned(session: Session) -> None:
    img = make_image(session)
    make_example(session, img)
    a, b = make_worker(session, "a"), make_worker(session, "b")
    strat = strategy()
    lease = lease_for(session, a, strat)
    assert lease is not None and lease.id is not None
    first = vq.record_vote(session, a, lease.id, True, strat, reference_frame="relative")
    again = vq.record_vote(session, a, lease.id, False, strat)
    assert first.created and not again.created and again.vote.id == first.vote.id
    assert again.vote.value is True and again.vote.reference_frame == "relative"
    assert len(session.exec(select(Vote)).all()) == 1
    with pytest.raises(VoteError) as err:
        vq.record_vote(session, b, lease.id, True, strat)  # someone else's item
    assert err.value.status == 404
    with pytest.raises(VoteError):
        vq.record_vote(session, a, lease.id + 999, True, strat)
    with pytest.raises(VoteError) as err:
        vq.record_vote(session, a, lease.id, True, strat, reference_frame="absolute")
    assert err.value.status == 422


def test_one_vote_per_example_and_validator_is_a_db_rule(session: Session) -> None:
    img = make_image(session)
    ex = make_example(session, img)
    w = make_worker(session, "w")
    assert ex.id is not None and w.id is not None
    session.add(Vote(example_id=ex.id, worker_id=w.id, value=True))
    session.commit()
    session.add(Vote(example_id=ex.id, worker_id=w.id, value=False))
    with pytest.raises(IntegrityError):
        session.commit()
    session.rollback()


def test_batch_completes_with_code_at_size(session: Session) -> None:
    img = make_image(session)
    for _ in range(3):
        make_example(session, img)
    w = make_worker(session, "w")
    strat = strategy(validate_batch_size=2, completion_code="CODE42")
    assert judge(session, w, strat, True) is not None
    assert judge(session, w, strat, True) is not None
    batch = session.exec(select(Batch).where(Batch.worker_id == w.id)).one()
    assert batch.status == "completed" and batch.completion_code == "CODE42"
    item = vq.next_item(session, w, strat)
    assert item is None  # no open batch: the page sends them to the done page


def test_refresh_queue_reopens_after_raising_target(session: Session) -> None:
    img = make_image(session)
    ex = make_example(session, img, label=True)
    ws = [make_worker(session, f"w{i}") for i in range(4)]
    strat = strategy()
    for w in ws[:3]:
        judge(session, w, strat, False)
    session.refresh(ex)
    assert ex.queue_open is False
    raised = StudyConfig(gold_rate=0.0, votes_per_example=4, max_votes_per_example=5)
    assert audit.refresh_queue(session, raised) == 1
    assert judge(session, ws[3], ExampleStrategy(config=raised), False) == ex.id


def _concurrent_validators(
    engine: Engine, workers: list[int], strat: ExampleStrategy, rounds: int
) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(workers))

    def run(worker_id: int) -> None:
        rng = random.Random(worker_id)
        try:
            with Session(engine) as s:
                worker = s.get(Worker, worker_id)
                assert worker is not None
                vq.begin_batch(s, worker, strat)
                barrier.wait()
                for _ in range(rounds):
                    item = vq.next_item(s, worker, strat)
                    if item is None or item.lease_id is None:
                        return
                    vq.record_vote(s, worker, item.lease_id, rng.random() < 0.7, strat)
        except BaseException as exc:  # collected and re-raised by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def test_concurrent_validators_never_overserve(engine: Engine, session: Session) -> None:
    """Many threads on one database: no duplicate, no over-served Example, counters exact."""
    img = make_image(session)
    authors = [make_worker(session, f"author{i}") for i in range(3)]
    examples = [
        make_example(session, img, author=authors[i % 3], label=i % 4 != 0) for i in range(24)
    ]
    validators = [make_worker(session, f"v{i}") for i in range(12)] + authors
    strat = strategy(validate_batch_size=100)
    ids = [w.id for w in validators if w.id]
    example_ids = [e.id for e in examples if e.id is not None]
    author_of = {e.id: e.author_id for e in examples}
    session.close()  # SQLite: an open transaction here would hold the write lock
    errors = _concurrent_validators(engine, ids, strat, rounds=30)
    assert errors == []
    # A validator who momentarily found every open Example leased to others has left; the
    # rest is finished one by one so every Example must end closed.
    for worker_id in ids:
        with Session(engine) as s:
            worker = s.get(Worker, worker_id)
            assert worker is not None
            while judge(s, worker, strat, True) is not None:
                pass
    session.expire_all()
    votes = session.exec(select(Vote)).all()
    pairs = Counter((v.example_id, v.worker_id) for v in votes)
    assert max(pairs.values()) == 1
    per_example = Counter(v.example_id for v in votes)
    by_id = {e.id: e for e in session.exec(select(Example))}
    for ex_id in example_ids:
        n = per_example[ex_id]
        assert 3 <= n <= 5, (ex_id, n)  # every Example got its target, none beyond the maximum
        row = by_id[ex_id]
        assert row.queue_votes == n and row.queue_open is False
        if n > 3:  # extra votes only when the first three left the keep decision open
            first = sorted((v for v in votes if v.example_id == ex_id), key=lambda v: v.id or 0)
            agree = sum(v.value == row.label for v in first[:3])
            assert not is_decided(agree, 3, max_votes=5, min_votes=3), (ex_id, agree)
    assert all(author_of[v.example_id] != v.worker_id for v in votes)
    assert audit.audit_counters(session) == []
    assert session.exec(select(Assignment).where(col(Assignment.status) == "active")).all() == []
