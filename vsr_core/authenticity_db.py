"""Workers' authenticity records loaded from the database, for :func:`vsr_core.authenticity.assess`.

One study at a time, a few workers at a time (a worker's dashboard page, the submissions a
platform plan is about, the export's worker file). A vote agrees when it matches the
majority of its Example's other votes plus the author's label (the Example's own counters,
kept equal to the vote table by the queue), the leave-one-out reading of the label model
that ``bench/authenticity_vsr.py`` measures; ties are undecided.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select
from sqlmodel import Session

from vsr_core.authenticity import Assessment, ItemSignals, WorkerRecord, assess
from vsr_core.models import AuditKind
from vsr_core.tables import AUDIT_EVENT, EXAMPLE, ITEM_SIGNAL, VOTE


def worker_records(
    session: Session, study_id: int, worker_ids: Iterable[int]
) -> dict[int, WorkerRecord]:
    """Each worker's answers in the study in the order given, and the page's measurements."""
    ids = sorted(set(worker_ids))
    records: dict[int, WorkerRecord] = {w: WorkerRecord() for w in ids}
    if not ids:
        return records
    answers: dict[int, list[bool]] = {w: [] for w in ids}
    agrees: dict[int, list[bool | None]] = {w: [] for w in ids}
    gold: dict[int, list[bool]] = {w: [] for w in ids}
    rows = session.execute(
        select(
            VOTE.c.worker_id,
            VOTE.c.value,
            EXAMPLE.c.label,
            EXAMPLE.c.queue_votes,
            EXAMPLE.c.queue_agree,
            EXAMPLE.c.is_gold,
            func.coalesce(EXAMPLE.c.gold_label, EXAMPLE.c.label).label("gold_label"),
        )
        .join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id)
        .where(EXAMPLE.c.study_id == study_id, VOTE.c.worker_id.in_(ids))
        .order_by(VOTE.c.worker_id, VOTE.c.id)
    )
    for r in rows:
        if r.is_gold:
            gold[r.worker_id].append(r.value == r.gold_label)
            continue  # gold items do not count towards a vote target: no majority to meet
        # True votes on the Example from its counters (queue_agree counts votes = label).
        trues = r.queue_agree if r.label else r.queue_votes - r.queue_agree
        others_true = trues - int(r.value) + int(r.label)
        others_false = (r.queue_votes - trues) - int(not r.value) + int(not r.label)
        answers[r.worker_id].append(r.value)
        agrees[r.worker_id].append(
            None if others_true == others_false else r.value == (others_true > others_false)
        )
    items: dict[int, list[ItemSignals]] = {w: [] for w in ids}
    for s in session.execute(
        select(ITEM_SIGNAL)
        .where(ITEM_SIGNAL.c.study_id == study_id, ITEM_SIGNAL.c.worker_id.in_(ids))
        .order_by(ITEM_SIGNAL.c.worker_id, ITEM_SIGNAL.c.id)
    ):
        items[s.worker_id].append(
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
    for w in ids:
        records[w] = WorkerRecord(answers[w], agrees[w], gold[w], items[w])
    return records


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
