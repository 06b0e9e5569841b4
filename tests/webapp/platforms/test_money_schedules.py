"""Random schedules of a paid Prolific study (Hypothesis stateful testing): work, validation
verdicts arriving late, syncs, returns, time-outs, flags, plans and applies, with 429s,
5xx after writes, late answers and crashes between calls, against the fake Prolific
(tests/support/fake_prolific.py: a second pay request pays again). After every step and at
the end of each schedule the money invariants of docs/platforms.md hold:

- every payment went to an approved submission of an unflagged worker (never to a
  returned, timed-out or rejected one);
- a participant is paid at most what the rules give for the kept work in their own
  submission's batches (each unit at most once), and at least what the ledger calls done;
- once the schedule settles, every kept unit of an approved, unflagged submission is paid,
  or left for a person (``unknown``) with the reason; none is forgotten at 0p.

A failing schedule is printed by Hypothesis with its steps and seed; replay it with
``--hypothesis-seed=<seed>`` (``derandomize`` keeps CI's run the same every time).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from itertools import count
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import Engine, update
from sqlmodel import Session, col, select

from tests.support import platform_work as work
from tests.support.fake_prolific import TOKEN, State, running
from vsr_core.models import (
    Example,
    PlatformAction,
    PlatformLedger,
    PlatformStudy,
    PlatformSubmission,
    Worker,
)
from webapp.platforms import settlement
from webapp.platforms.engine import Rules, apply, plan, sync
from webapp.platforms.prolific import ProlificPlatform

# Schedules in the suite: the full proof's 500 on PostgreSQL, the backend a paid study runs
# on, and 100 on SQLite (about 0.25 s of CPU each, so the suite keeps near its budget on 2
# cores); `VSR_MONEY_SCHEDULES=N` sets both.
_GIVEN = os.environ.get("VSR_MONEY_SCHEDULES")
SCHEDULES = {
    "postgresql": int(_GIVEN or 500),
    "sqlite": int(_GIVEN or 100),
}
CENTS = 50  # per kept caption
RULES = Rules(bonus_cents_per_kept=CENTS, min_gold_answers=1000)
WORKERS = 3
_serial = count(1)


class Crash(BaseException):
    """The process dies here (kill -9): nothing after this point runs."""


class Crashing:
    """A Prolific client whose process dies at one point of one action: just before the
    call, just after it (the answer never read) or between a bonus's set-up and its pay."""

    def __init__(self, inner: ProlificPlatform, point: str) -> None:
        self.inner, self.point, self.name = inner, point, inner.name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def _die_around(self, fn: Any, *args: Any) -> Any:
        if self.point == "before":
            raise Crash
        out = fn(*args)
        if self.point == "after":
            raise Crash
        return out

    def approve(self, *args: Any) -> Any:
        return self._die_around(self.inner.approve, *args)

    def reject(self, *args: Any) -> Any:
        return self._die_around(self.inner.reject, *args)

    def bonus(self, *args: Any) -> Any:
        if self.point != "mid_bonus":
            return self._die_around(self.inner.bonus, *args)
        *rest, record = args

        def record_then_die(note: dict[str, Any]) -> None:
            record(note)
            raise Crash

        send: Any = self.inner.bonus
        return send(*rest, record_then_die)


FAULTS = st.sampled_from(
    ["none", "none", "429", "fail_before", "fail_after", "late", "before", "after", "mid_bonus"]
)


class MoneySchedule(RuleBasedStateMachine):
    engine: Engine
    url: str
    state: State
    scene: work.Scene | None = None

    @initialize(
        writers=st.lists(
            st.tuples(st.integers(1, 4), st.integers(0, 3)), min_size=WORKERS, max_size=WORKERS
        )
    )
    def start(self, writers: list[tuple[int, int]]) -> None:
        """A platform study, and WORKERS participants, each with one batch from their own
        session: ``done`` captions written of a batch of 4 (fewer: not approved), of which
        ``decided`` already validated (kept or not), the rest open."""
        self.session = Session(self.engine)
        n = next(_serial)
        self.ext = f"st{n}x{os.getpid()}"
        self.state.studies[self.ext] = {"id": self.ext, "status": "ACTIVE"}
        self.study = PlatformStudy(
            study_id=1,
            platform="prolific",
            external_id=self.ext,
            state="published",
            settings={"kind": "generate", "reward_cents": 100},
        )
        self.session.add(self.study)
        self.session.commit()
        if MoneySchedule.scene is None:  # one image pair for every schedule: cheap steps
            MoneySchedule.scene = work.scene(self.session)
        scene = MoneySchedule.scene
        self.subs: list[str] = []
        self.pids: list[str] = []
        self.open: list[int] = []
        self.worker_ids: dict[str, int] = {}
        for i, (done, decided) in enumerate(writers):
            pid, sub = f"p{n}-{i}", f"s{n}-{i}"
            w = work.worker(self.session, pid)
            b = work.batch(self.session, w, work.prolific_entry(self.ext, sub), size=4)
            ids = work.captions(self.session, b, scene, kept=done)
            still_open = ids[min(decided, done) :]
            self.session.execute(
                update(Example)
                .where(col(Example.id).in_(still_open))
                .values(queue_settled=False, queue_votes=1, queue_agree=1)
            )
            self.session.commit()
            self.open += still_open
            self.state.add_submission(self.ext, sub, pid, "AWAITING REVIEW")
            self.subs.append(sub)
            self.pids.append(pid)
            self.worker_ids[pid] = w.id or 0
        self.paid_seen = 0
        self.transitions_seen = 0
        self.client = ProlificPlatform(base_url=self.url, token=TOKEN, sleep=lambda s: None)
        # For late answers only: a POST answered after this client gave up.
        self.impatient = ProlificPlatform(
            base_url=self.url, token=TOKEN, sleep=lambda s: None, timeout=0.1
        )
        self.study_id = self.study.id or 0

    def _study(self) -> PlatformStudy:
        row = self.session.get(PlatformStudy, self.study_id)
        assert row is not None
        return row

    @rule(data=st.data(), kept=st.booleans())
    def verdict_arrives(self, data: st.DataObject, kept: bool) -> None:
        if not self.open:
            return
        ex = self.open.pop(data.draw(st.integers(0, len(self.open) - 1)))
        self.session.execute(
            update(Example)
            .where(col(Example.id) == ex)
            .values(queue_settled=True, queue_votes=3, queue_agree=3 if kept else 1)
        )
        self.session.commit()

    @rule(i=st.integers(0, WORKERS - 1), to=st.sampled_from(["RETURNED", "TIMED-OUT"]))
    def participant_leaves(self, i: int, to: str) -> None:
        s = self.state.submissions[self.subs[i]]
        if s["status"] == "AWAITING REVIEW":  # Prolific: only before a decision
            s["status"] = to

    @rule(i=st.integers(0, WORKERS - 1))
    def flag(self, i: int) -> None:
        w = self.session.get(Worker, self.worker_ids[self.pids[i]])
        assert w is not None
        w.flagged, w.flag_reason = True, "gold failures"
        self.session.add(w)
        self.session.commit()

    @rule()
    def sync(self) -> None:
        sync(self.session, self.client, self._study(), {})

    @rule()
    def plan(self) -> None:
        plan(self.session, self._study(), RULES)

    @rule(fault=FAULTS, stale=st.booleans())
    def apply(self, fault: str, stale: bool) -> None:
        client: Any = self.client
        st_ = self.state
        if fault == "429":
            st_.rate_limit = 1
        elif fault == "fail_before":
            st_.fail_before = 1
        elif fault == "fail_after":
            st_.fail_after, st_.slow_methods = 1, ("POST",)
        elif fault == "late":
            st_.slow, st_.slow_methods = 0.2, ("POST",)
            client = self.impatient
        elif fault in ("before", "after", "mid_bonus"):
            client = Crashing(self.client, fault)
        try:
            apply(
                self.session,
                client,
                self._study(),
                stale_after=timedelta(0) if stale else timedelta(minutes=15),
            )
        except Crash:
            self.session.rollback()  # the process is gone; what it committed stays
        finally:
            st_.rate_limit = st_.fail_before = st_.fail_after = 0
            st_.slow, st_.slow_methods = 0.0, ()

    # --- invariants --------------------------------------------------------------------

    def _kept_cents(self) -> dict[str, int]:
        """Per participant, what the rules give for the kept captions of their batches."""
        self.session.expire_all()
        _, w = settlement.work_by_submission(self.session, self._study())
        subs = {s.id: s.worker_external_id for s in self._subs()}
        return {
            subs[sid]: CENTS * sum(u.kept for u in x.units if u.kind == "example")
            for sid, x in w.items()
        }

    def _subs(self) -> list[PlatformSubmission]:
        return list(
            self.session.exec(
                select(PlatformSubmission).where(
                    PlatformSubmission.platform_study_id == self.study_id
                )
            )
        )

    def _paid(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for pid, amount in self.state.paid:
            if pid in self.pids:
                out[pid] = out.get(pid, 0) + round(amount * 100)
        return out

    @invariant()
    def money_goes_only_where_it_may(self) -> None:
        if not hasattr(self, "study_id"):
            return
        paid = [p for p in self.state.paid[self.paid_seen :] if p[0] in self.pids]
        self.paid_seen = len(self.state.paid)
        moves = [t for t in self.state.transitions[self.transitions_seen :]]
        self.transitions_seen = len(self.state.transitions)
        if not paid and not moves:
            return  # nothing left the platform since the last check
        self.session.expire_all()
        for pid, _ in paid:
            sub = self.state.submissions[self.subs[self.pids.index(pid)]]
            assert sub["status"] == "APPROVED", f"bonus paid to a {sub['status']} submission"
            w = self.session.get(Worker, self.worker_ids[pid])
            assert w is not None and not w.flagged, "bonus paid to a flagged worker"
        for sub_id, status in moves:
            if sub_id in self.subs and status == "APPROVED":
                pid = self.pids[self.subs.index(sub_id)]
                w = self.session.get(Worker, self.worker_ids[pid])
                assert w is not None and not w.flagged, "a flagged worker approved"
        kept = self._kept_cents()
        for pid, cents in self._paid().items():
            assert cents <= kept.get(pid, 0), f"{pid} paid {cents}c for {kept.get(pid)}c of work"

    def teardown(self) -> None:
        if not hasattr(self, "study_id"):
            return
        try:
            self._settle_and_check()
        finally:
            self.session.close()
            self.client.close()
            self.impatient.close()

    def _settle_and_check(self) -> None:
        """No more faults: sync, plan and apply until nothing changes, then every kept unit
        of an approved, unflagged submission is paid or left for a person with a reason."""
        for _ in range(3):
            sync(self.session, self.client, self._study(), {})
            plan(self.session, self._study(), RULES)
            apply(self.session, self.client, self._study(), stale_after=timedelta(0))
        self.money_goes_only_where_it_may()
        self.session.expire_all()
        actions = list(
            self.session.exec(
                select(PlatformAction).where(PlatformAction.platform_study_id == self.study_id)
            )
        )
        assert not [a for a in actions if a.state in ("planned", "sending")], [
            (a.kind, a.target, a.state) for a in actions if a.state in ("planned", "sending")
        ]
        done = {a.id: a for a in actions if a.kind == "bonus" and a.state == "done"}
        unknown = {a.id: a for a in actions if a.kind == "bonus" and a.state == "unknown"}
        paid = self._paid()
        by_pid: dict[str, tuple[int, int]] = {}
        for a in actions:
            if a.kind != "bonus":
                continue
            pid = self.pids[self.subs.index(a.target)]
            lo, hi = by_pid.get(pid, (0, 0))
            amount = a.amount_cents or 0
            by_pid[pid] = (
                lo + amount * (a.id in done),
                hi + amount * (a.id in done or a.id in unknown),
            )
        for pid in self.pids:
            lo, hi = by_pid.get(pid, (0, 0))
            assert lo <= paid.get(pid, 0) <= hi, (pid, paid.get(pid, 0), lo, hi)
        ledger = {
            (r.unit_kind, r.unit_id): r
            for r in self.session.exec(
                select(PlatformLedger).where(PlatformLedger.platform_study_id == self.study_id)
            )
        }
        _, w = settlement.work_by_submission(self.session, self._study())
        for sub in self._subs():
            worker = self.session.get(Worker, sub.worker_id)
            if sub.status != "APPROVED" or worker is None or worker.flagged:
                continue
            for u in w[sub.id or 0].units:
                if u.kind == "example" and u.kept:
                    row = ledger.get((u.kind, u.id))
                    assert row is not None and row.cents == CENTS, f"kept unit {u.id} forgotten"
                    assert row.bonus_action_id in done or row.bonus_action_id in unknown, (
                        f"kept unit {u.id} of {sub.external_id} neither paid nor left for a person"
                    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, State]]:
    with running() as s:
        yield s


def test_random_schedules_keep_the_money_invariants(
    engine: Engine, served: tuple[str, State]
) -> None:
    MoneySchedule.engine, MoneySchedule.scene = engine, None
    MoneySchedule.url, MoneySchedule.state = served
    run_state_machine_as_test(
        MoneySchedule,
        settings=settings(
            max_examples=SCHEDULES[engine.dialect.name],
            stateful_step_count=10,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
        ),
    )
