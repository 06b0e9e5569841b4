"""The validation task's lease strategy (``webapp.crowd.leases.LeaseStrategy``): which Example a
validator gets next, gold mixed in at ``gold_rate``, and expiry in Example id order."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlmodel import Session, col, select

from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Assignment,
    BatchKind,
    LeaseStatus,
    Study,
)
from vsr_core.qualification import gold_shown
from vsr_core.studies.definition import StudyDefinition, parse_study
from vsr_core.studies.settings import StudyConfig, load_study_config
from vsr_core.types import utcnow
from webapp.crowd import leases
from webapp.validate.rules import (
    room_params,
)
from webapp.validate.statements import (
    candidate_attempts,
    dialect_of,
    gold_candidates,
    regular_candidates,
    run_prebuilt,
    servable_count,
    statements_for,
)

# --- the lease strategy ---------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _definition(definition_hash: str, text: str) -> StudyDefinition:
    """A study file parsed once per version (keyed by its hash)."""
    return parse_study(text)


def unseen_gold(session: Session, worker_id: int, limit: int, study_id: int) -> list[int]:
    """Gold items the worker has not had, leaving out those their qualification check showed
    them (vsr_core.qualification.gold_shown): a control whose answer is known measures
    nothing."""
    study = session.get(Study, study_id)
    definition = _definition(study.definition_hash, study.definition) if study else None
    if definition is None or not definition.qualification.uses_gold():
        return gold_candidates(session, worker_id, limit, study_id)
    shown = gold_shown(session, study_id, definition, worker_id)
    found = gold_candidates(session, worker_id, limit + len(shown), study_id)
    return [i for i in found if i not in shown][:limit]


@dataclass
class ExampleStrategy:
    """Validation: open Examples oldest first, with gold Examples mixed in at ``gold_rate``.

    ``config`` pins the study settings (tests, the benchmark); None reads each study's
    per request. Every item comes from one study (the batch's): ``study_id`` everywhere.
    """

    kind: str = BatchKind.validate
    item_field: str = "example_id"
    config: StudyConfig | None = None
    rng: random.Random = field(default_factory=random.Random)
    # Settings read from the database are reused this long: one query less per request on
    # the hot path, and an admin's change still applies within seconds.
    cache_seconds: float = 2.0
    _cached: dict[int, tuple[float, StudyConfig]] = field(default_factory=dict, repr=False)
    # Leases run for minutes, so sweeping for stale ones once a second per process is
    # plenty (0 = on every request, as the tests do).
    sweep_seconds: float = 0.0
    _last_sweep: float = field(default=-1e9, repr=False)
    # The lowest open Example id, reused this long (0 = looked up on every request). The
    # candidate query starts its index walk there: below it lie only closed Examples, whose
    # stale index entries (until VACUUM removes them) it would otherwise step over one by
    # one on every request, a cost that grows with every Example decided (bench/load/:
    # the server saturated after ~40 s at 300 round trips/s on PostgreSQL without
    # autovacuum). An Example re-opened below the floor waits at most this long.
    floor_seconds: float = 0.0
    _floor: dict[int, tuple[float, int, bool]] = field(default_factory=dict, repr=False)

    def sweep_due(self) -> bool:
        now = time.monotonic()
        if now - self._last_sweep < self.sweep_seconds:
            return False
        self._last_sweep = now
        return True

    def _open_state(self, session: Session, study_id: int) -> tuple[float, int, bool]:
        """(when read, the open floor, whether a machine negative is open), reused
        ``floor_seconds``."""
        now = time.monotonic()
        found = self._floor.get(study_id)
        if found is None or now - found[0] >= self.floor_seconds:
            prebuilt = statements_for(dialect_of(session))
            row = run_prebuilt(session, prebuilt.open_floor, {"q_study": study_id}).one()
            found = (now, int(row.floor or 0), bool(row.machine))
            self._floor[study_id] = found
        return found

    def open_floor(self, session: Session, study_id: int = DEFAULT_STUDY_ID) -> int:
        return self._open_state(session, study_id)[1]

    def machines_open(self, session: Session, study_id: int = DEFAULT_STUDY_ID) -> bool:
        """Whether machine negatives are open in the study, to be mixed with other items
        (statements._machine_negatives_apart); read with the floor."""
        return self._open_state(session, study_id)[2]

    def study(self, session: Session, study_id: int = DEFAULT_STUDY_ID) -> StudyConfig:
        """One study's settings (cached ``cache_seconds``)."""
        if self.config is not None:
            return self.config
        now = time.monotonic()
        found = self._cached.get(study_id)
        if found is None or now - found[0] > self.cache_seconds:
            found = (now, load_study_config(session, study_id))
            self._cached[study_id] = found
        return found[1]

    def candidates(
        self, session: Session, worker_id: int, limit: int, study_id: int = DEFAULT_STUDY_ID
    ) -> Sequence[int]:
        gold = self._gold_turn(session, worker_id, limit, study_id)
        if gold:
            return gold
        config = self.study(session, study_id)
        floor = self.open_floor(session, study_id)
        machines = self.machines_open(session, study_id)
        return regular_candidates(session, worker_id, config, limit, floor, study_id, machines)

    def available(
        self, session: Session, worker_id: int, limit: int, study_id: int = DEFAULT_STUDY_ID
    ) -> int:
        """How many items (up to ``limit``) a new batch of this worker can serve: the open
        Examples they have not seen, one half of each caption (read without locking; called
        with the new batch in place), none when not even a first item can be served, plus
        the gold share that comes with them at ``gold_rate``, no more than the gold items
        they have not seen."""
        config = self.study(session, study_id)
        machines = self.machines_open(session, study_id)
        first = regular_candidates(session, worker_id, config, 1, 0, study_id, machines)
        regular = servable_count(session, worker_id, config, limit, study_id) if first else 0
        gold = 0
        if config.gold_rate > 0 and regular:
            share = config.gold_rate / max(1e-9, 1 - config.gold_rate)
            seen = unseen_gold(session, worker_id, limit, study_id)
            gold = min(round(regular * share), len(seen))
        return min(limit, regular + gold)

    def _gold_turn(self, session: Session, worker_id: int, limit: int, study_id: int) -> list[int]:
        """Gold items for this turn: drawn at the study's ``gold_rate``; [] on a regular turn
        or when the worker has seen every gold item."""
        config = self.study(session, study_id)
        if config.gold_rate > 0 and self.rng.random() < config.gold_rate:
            return unseen_gold(session, worker_id, limit, study_id)
        return []

    def lease_next(
        self,
        session: Session,
        batch_id: int,
        worker_id: int,
        batch_deadline: datetime,
        lease_minutes: int,
        now: datetime,
        study_id: int = DEFAULT_STUDY_ID,
    ) -> tuple[int, int] | None:
        """Lease the worker's next item: (lease id, Example id), or None when none is left.

        The shared ``leases.lease_item`` (``candidates``, then the lease) except for a
        regular item on PostgreSQL, which one statement finds, locks, counts and leases
        (``lease_regular``): the per-statement cost is most of a round trip's CPU.
        """
        if dialect_of(session) != "postgresql":
            return leases.lease_item(
                session, batch_id, worker_id, batch_deadline, self, lease_minutes, now, study_id
            )
        gold = self._gold_turn(session, worker_id, 1, study_id)
        if gold:
            lease_id = leases.insert_lease(
                session, batch_id, worker_id, batch_deadline, self, lease_minutes, now, gold[0]
            )
            return lease_id, gold[0]
        params = {
            "q_worker": worker_id,
            "q_limit": 1,
            "q_floor": self.open_floor(session, study_id),
            "q_study": study_id,
            **room_params(self.study(session, study_id)),
            "q_batch": batch_id,
            "q_now": now,
            "q_expires": leases.lease_expiry(now, lease_minutes, batch_deadline),
        }
        machines = self.machines_open(session, study_id)
        prebuilt = statements_for("postgresql")
        stmt = prebuilt.lease_regular_machines if machines else prebuilt.lease_regular
        # Each later attempt: what only a rule that yields held back (candidate_attempts).
        for attempt in candidate_attempts(machines):
            row = run_prebuilt(session, stmt, params | attempt).first()
            if row is not None:
                return row.id, row.example_id
        return None

    def on_leased(self, session: Session, item_id: int) -> None:
        run_prebuilt(session, statements_for(dialect_of(session)).lease_taken, {"q_id": item_id})

    def on_returned(self, session: Session, item_id: int) -> None:
        run_prebuilt(session, statements_for(dialect_of(session)).lease_returned, {"q_id": item_id})


# --- expiry, release -----------------------------------------------------------------------


def expire_stale(session: Session, strategy: ExampleStrategy, now: datetime | None = None) -> int:
    """Expire validation leases whose time ran out, in Example id order (see module doc).

    ``leases.take_next`` also expires stale leases, in no particular order; running this
    first in the same transaction leaves it nothing to do, so Example rows are always locked
    in ascending order and two sweeps never deadlock.
    """
    now = now or utcnow()
    stmt = (
        select(Assignment)
        .where(
            Assignment.kind == strategy.kind,
            Assignment.status == LeaseStatus.active,
            col(Assignment.lease_expires_at) < now,
        )
        .order_by(col(Assignment.example_id), col(Assignment.id))
    )
    stale = session.exec(leases.lock_rows(stmt, session)).all()
    for lease in stale:
        lease.status = LeaseStatus.expired
        lease.finished_at = now
        session.add(lease)
        if lease.example_id is not None:
            strategy.on_returned(session, lease.example_id)
    return len(stale)
