"""Adjudication: an owner or researcher settles an Example (its final label, or excluded from
the dataset) with a written reason (docs/dashboard.md).

One ``Adjudication`` row per Example holds the current settlement, so every count joins it on
the key (vsr_core.kept); settling again replaces it and withdrawing deletes it. The history
is the audit trail: every settlement and withdrawal is recorded there (before, after, reason)
in the same transaction as the row, so there is no decision without its record. A settled
Example leaves the validation queue (``queue_open`` false): nobody is asked to vote on
something already decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import Session, col
from sqlmodel import select as orm_select

from vsr_core import audit
from vsr_core.locks import hold
from vsr_core.models import Adjudication, AdjudicationDecision, AuditKind, Example, Study
from vsr_core.tables import ADJUDICATION
from vsr_core.types import utcnow
from vsr_core.upsert import upsert

MAX_REASON = 500
MIN_REASON = 3
# One bulk action settles at most this many Examples (each gets its own audit record).
MAX_BULK = 10_000
WITHDRAW = "withdraw"  # a decision that removes the current settlement


class AdjudicationError(ValueError):
    """A refused adjudication; the message is meant for a person. ``status``: 404 for an
    Example that is not there (or not in the study), 400 for bad input."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class AdjudicationInfo:
    """An Example's settlement as the export writes it."""

    decision: str
    reason: str
    admin: str
    at: datetime

    def as_record(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "reason": self.reason,
            "by": self.admin,
            "at": self.at.isoformat(timespec="seconds"),
        }


def clean_reason(raw: str) -> str:
    """The reason as stored: trimmed, one to ``MAX_REASON`` characters of printable text."""
    text = raw.replace("\r\n", "\n").strip()
    if len(text) < MIN_REASON:
        raise AdjudicationError(
            f"write the reason for this decision (at least {MIN_REASON} characters)"
        )
    if len(text) > MAX_REASON:
        raise AdjudicationError(f"the reason is too long: at most {MAX_REASON} characters")
    if any(ord(c) < 32 and c not in "\n\t" for c in text):
        raise AdjudicationError("the reason contains control characters")
    return text


def check_decision(raw: str) -> str:
    allowed = [d.value for d in AdjudicationDecision] + [WITHDRAW]
    if raw not in allowed:
        raise AdjudicationError(f"the decision must be one of {', '.join(allowed)}")
    return raw


def settle(
    session: Session,
    actor: audit.Actor,
    example_ids: Sequence[int],
    *,
    study_id: int,
    decision: str,
    reason: str,
) -> int:
    """Settle (or withdraw the settlement of) these Examples of ``study_id`` and record each
    in the audit trail; commits once, so all of them or none. Returns how many changed
    (settling an Example again with the same decision and reason changes nothing).

    Raises AdjudicationError (nothing written) on a bad decision or reason, too many
    Examples, an unknown Example, or one of another study."""
    decision = check_decision(decision)
    reason = clean_reason(reason)
    # The settlement is written by upsert, so two admins settling one Example at once cannot
    # both insert it (adjudication_pkey). They still take turns, so each audit record's
    # "before" is the settlement its write replaced.
    hold(session, f"adjudication:{study_id}")
    ids = sorted(set(int(i) for i in example_ids))
    if not ids:
        raise AdjudicationError("no Examples chosen")
    if len(ids) > MAX_BULK:
        raise AdjudicationError(
            f"{len(ids):,} Examples at once is too many: at most {MAX_BULK:,} (narrow the filter)"
        )
    examples: dict[int, Example] = {}
    for k in range(0, len(ids), 1000):
        chunk = ids[k : k + 1000]
        for ex in session.exec(orm_select(Example).where(col(Example.id).in_(chunk))):
            assert ex.id is not None
            examples[ex.id] = ex
    missing = [i for i in ids if i not in examples]
    if missing:
        raise AdjudicationError(f"There is no Example #{missing[0]}: nothing was settled.", 404)
    foreign = [e for e in examples.values() if e.study_id != study_id]
    if foreign:
        other = session.get(Study, foreign[0].study_id)
        where = other.slug if other is not None else "another study"
        mine = session.get(Study, study_id)
        raise AdjudicationError(
            f"Example #{foreign[0].id} belongs to the study {where}, not "
            f"{mine.slug if mine else study_id}: nothing was settled",
            404,
        )
    current = {
        a.example_id: a
        for k in range(0, len(ids), 1000)
        for a in session.exec(
            orm_select(Adjudication).where(col(Adjudication.example_id).in_(ids[k : k + 1000]))
        )
    }
    now = utcnow()
    changed = 0
    settled: list[dict[str, Any]] = []
    for eid in ids:
        row = current.get(eid)
        before = {"decision": row.decision, "reason": row.reason} if row else None
        if decision == WITHDRAW:
            if row is None:
                continue
            session.delete(row)
            after = None
        else:
            if row is not None and row.decision == decision and row.reason == reason:
                continue
            settled.append(
                {
                    "example_id": eid,
                    "study_id": study_id,
                    "decision": decision,
                    "reason": reason,
                    "admin_id": actor.admin_id,
                    "admin_name": actor.name[:128],
                    "at": now,
                }
            )
            ex = examples[eid]
            if ex.queue_open:  # decided: the validation queue stops serving it
                ex.queue_open = False
                session.add(ex)
            after = {"decision": decision}
        audit.record(
            session,
            actor,
            AuditKind.adjudicate,
            study_id=study_id,
            target=f"example {eid}",
            change={"before": before, "after": after, "reason": reason},
        )
        changed += 1
    for k in range(0, len(settled), 1000):
        upsert(session.connection(), ADJUDICATION, settled[k : k + 1000])
    session.commit()
    return changed


def current(session: Session, example_id: int) -> Adjudication | None:
    return session.get(Adjudication, example_id)


def load_adjudications(conn: Connection | Session, study_id: int) -> dict[int, AdjudicationInfo]:
    """Every settled Example of the study: id -> its settlement."""
    stmt = (
        select(
            ADJUDICATION.c.example_id,
            ADJUDICATION.c.decision,
            ADJUDICATION.c.reason,
            ADJUDICATION.c.admin_name,
            ADJUDICATION.c.at,
        )
        .where(ADJUDICATION.c.study_id == study_id)
        .order_by(ADJUDICATION.c.example_id)
    )
    return {
        int(eid): AdjudicationInfo(str(d), str(r), str(name), at)
        for eid, d, r, name, at in conn.execute(stmt)
    }
