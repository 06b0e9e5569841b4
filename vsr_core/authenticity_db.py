"""Workers' authenticity records loaded from the database, for :func:`vsr_core.authenticity.assess`.

One study at a time, a few workers at a time (a worker's dashboard page, the submissions a
platform plan is about, the export's worker file). A vote agrees when it matches the
majority of its Example's other votes plus the author's label (the Example's own counters,
kept equal to the vote table by the queue), the leave-one-out reading of the label model
that ``bench/authenticity_vsr.py`` measures; ties are undecided.

Identities from one address: the site keeps, for its rate limits, each new identity and each
new batch under the client address it came from (``rateevent``, kept two days); identities
sharing an address there are compared with :func:`vsr_core.authenticity.shared_patterns`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import func, select
from sqlmodel import Session

from vsr_core.authenticity import (
    Assessment,
    ItemSignals,
    WorkerRecord,
    assess,
    shared_patterns,
)
from vsr_core.models import AuditKind
from vsr_core.tables import (
    ANNOTATION,
    ASSIGNMENT,
    AUDIT_EVENT,
    EXAMPLE,
    ITEM_SIGNAL,
    RATE_EVENT,
    VOTE,
)

# The rate-limit events keyed by client address that name a worker (webapp.http.rate_limits'
# NEW_WORKER and NEW_BATCH), and the key of its site-wide counts, which is no address.
ADDRESS_EVENTS = ("new_worker", "new_batch")
SITE_KEY = "study"
# Identities compared per address: a university NAT can put hundreds behind one address,
# and every pair is compared; the newest identities are kept.
MAX_ADDRESS_GROUP = 60


def address_groups(session: Session, worker_ids: Iterable[int]) -> list[set[int]]:
    """The identities seen from each address any of ``worker_ids`` came from (one set per
    address, at most MAX_ADDRESS_GROUP each, always holding the asked-for ones)."""
    ids = set(worker_ids)
    if not ids:
        return []
    by_address = RATE_EVENT.c.kind.in_(ADDRESS_EVENTS) & (RATE_EVENT.c.key != SITE_KEY)
    keys = select(RATE_EVENT.c.key).where(by_address, RATE_EVENT.c.worker_id.in_(ids)).distinct()
    members: dict[str, set[int]] = defaultdict(set)
    for key, worker in session.execute(
        select(RATE_EVENT.c.key, RATE_EVENT.c.worker_id)
        .where(by_address, RATE_EVENT.c.key.in_(keys), RATE_EVENT.c.worker_id.is_not(None))
        .distinct()
    ):
        members[key].add(worker)
    groups = []
    for group in members.values():
        if len(group) < 2:
            continue
        asked = group & ids
        others = sorted(group - ids, reverse=True)[: max(0, MAX_ADDRESS_GROUP - len(asked))]
        groups.append(asked | set(others))
    return groups


def worker_records(
    session: Session, study_id: int, worker_ids: Iterable[int]
) -> dict[int, WorkerRecord]:
    """Each worker's answers in the study in the order given, the page's measurements, and
    the identities from the same address that answered near-identically."""
    ids = set(worker_ids)
    groups = address_groups(session, ids)
    records = _records(session, study_id, set().union(ids, *groups))
    shared = shared_patterns(groups, records)
    for w in ids:
        records[w].shared_with = shared.get(w, [])
    return {w: records[w] for w in sorted(ids)}


def _records(session: Session, study_id: int, worker_ids: Iterable[int]) -> dict[int, WorkerRecord]:
    ids = sorted(set(worker_ids))
    loaded = _load(session, study_id, ids, per_batch=False)
    return {w: loaded.get((w, None), WorkerRecord()) for w in ids}


Key = tuple[int, int | None]  # (worker, batch), the batch None when not split by batch


def _load(
    session: Session, study_id: int, ids: list[int], per_batch: bool
) -> dict[Key, WorkerRecord]:
    """The records of ``ids`` in the study, whole or one per batch (an answer's batch is its
    lease's; answers without a lease, from the JSON API, belong to no batch and are left out
    of the split)."""
    if not ids:
        return {}
    answers: dict[Key, list[bool]] = defaultdict(list)
    agrees: dict[Key, list[bool | None]] = defaultdict(list)
    gold: dict[Key, list[bool]] = defaultdict(list)
    examples: dict[Key, list[int]] = defaultdict(list)
    items: dict[Key, list[ItemSignals]] = defaultdict(list)
    rows = session.execute(
        select(
            VOTE.c.worker_id,
            ASSIGNMENT.c.batch_id,
            VOTE.c.example_id,
            VOTE.c.value,
            EXAMPLE.c.label,
            EXAMPLE.c.queue_votes,
            EXAMPLE.c.queue_agree,
            EXAMPLE.c.is_gold,
            func.coalesce(EXAMPLE.c.gold_label, EXAMPLE.c.label).label("gold_label"),
        )
        .join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id)
        .outerjoin(ASSIGNMENT, ASSIGNMENT.c.id == VOTE.c.assignment_id)
        .where(EXAMPLE.c.study_id == study_id, VOTE.c.worker_id.in_(ids))
        .order_by(VOTE.c.worker_id, VOTE.c.id)
    )
    for r in rows:
        key: Key = (r.worker_id, r.batch_id if per_batch else None)
        if per_batch and r.batch_id is None:
            continue
        if r.is_gold:
            gold[key].append(r.value == r.gold_label)
            continue  # gold items do not count towards a vote target: no majority to meet
        # True votes on the Example from its counters (queue_agree counts votes = label).
        trues = r.queue_agree if r.label else r.queue_votes - r.queue_agree
        others_true = trues - int(r.value) + int(r.label)
        others_false = (r.queue_votes - trues) - int(not r.value) + int(not r.label)
        answers[key].append(r.value)
        examples[key].append(r.example_id)
        agrees[key].append(
            None if others_true == others_false else r.value == (others_true > others_false)
        )
    # An item's batch: the lease of the vote or of the caption it measured.
    lease = ASSIGNMENT.c.id == func.coalesce(VOTE.c.assignment_id, ANNOTATION.c.assignment_id)
    for s in session.execute(
        select(ITEM_SIGNAL, ASSIGNMENT.c.batch_id)
        .outerjoin(VOTE, VOTE.c.id == ITEM_SIGNAL.c.vote_id)
        .outerjoin(ANNOTATION, ANNOTATION.c.id == ITEM_SIGNAL.c.annotation_id)
        .outerjoin(ASSIGNMENT, lease)
        .where(ITEM_SIGNAL.c.study_id == study_id, ITEM_SIGNAL.c.worker_id.in_(ids))
        .order_by(ITEM_SIGNAL.c.worker_id, ITEM_SIGNAL.c.id)
    ):
        if per_batch and s.batch_id is None:
            continue
        items[(s.worker_id, s.batch_id if per_batch else None)].append(
            ItemSignals(
                shown_ms=s.shown_ms,
                image_shown=s.image_shown,
                focus_changes=s.focus_changes,
                pointer_events=s.pointer_events,
                key_events=s.key_events,
                canary=s.canary,
                pasted=s.pasted,
            )
        )
    keys = set(answers) | set(gold) | set(items)
    return {k: WorkerRecord(answers[k], agrees[k], gold[k], items[k], examples[k]) for k in keys}


def batch_assessments(session: Session, study_id: int, worker_id: int) -> dict[int, Assessment]:
    """:func:`assess` on each of the worker's batches in the study alone, by batch id: the
    signals counted over that batch's items, for the person reviewing them. A batch's flags
    inform; what holds work is the worker's whole record (:func:`held_for_review`), and the
    comparison across identities is per identity, so it is not repeated here."""
    loaded = _load(session, study_id, [worker_id], per_batch=True)
    return {batch: assess(rec) for (_, batch), rec in loaded.items() if batch is not None}


def assess_workers(
    session: Session, study_id: int, worker_ids: Iterable[int]
) -> dict[int, Assessment]:
    """:func:`assess` for each worker of ``worker_ids`` in the study."""
    return {w: assess(rec) for w, rec in worker_records(session, study_id, worker_ids).items()}


def approval_target(worker_id: int) -> str:
    """The audit trail's target of a worker's authenticity review (as ``worker N`` for blocks)."""
    return f"worker {worker_id}"


def approved_flags(
    session: Session, study_id: int, worker_ids: Iterable[int]
) -> dict[int, set[str]]:
    """The flags a person last cleared per worker in the study (the audit trail's newest
    ``authenticity_approve`` event): evidence of those kinds no longer holds their work."""
    targets = {approval_target(w): w for w in worker_ids}
    out: dict[int, set[str]] = {}
    if not targets:
        return out
    rows = session.execute(
        select(AUDIT_EVENT.c.target, AUDIT_EVENT.c.change)
        .where(
            AUDIT_EVENT.c.kind == AuditKind.authenticity_approve,
            AUDIT_EVENT.c.study_id == study_id,
            AUDIT_EVENT.c.target.in_(list(targets)),
        )
        .order_by(AUDIT_EVENT.c.id)
    )
    for target, change in rows:
        out[targets[target]] = set((change or {}).get("flags", []))
    return out


def held_for_review(
    session: Session, study_id: int, worker_ids: Iterable[int]
) -> dict[int, Assessment]:
    """The workers whose work waits for a person: flagged by a signal no one has cleared.
    The one check ``vsr platform plan`` and the dashboard make before paying for work."""
    ids = list(worker_ids)
    assessed = assess_workers(session, study_id, ids)
    cleared = approved_flags(session, study_id, ids)
    return {
        w: a
        for w, a in assessed.items()
        if a.flagged and not {str(f) for f in a.flags} <= cleared.get(w, set())
    }
