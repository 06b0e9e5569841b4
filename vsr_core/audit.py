"""The audit trail: one append-only ``AuditEvent`` row per admin action (docs/dashboard.md).

``record`` adds the row to the caller's session, so it commits (or rolls back) with the
action it describes: there is no action without its record and no record of an action that
did not happen. Nothing here updates or deletes a row; the database refuses both (migration
0017's triggers). A failed login is the one record made on its own (``record_now``), since
nothing else is written then.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlmodel import Session

from vsr_core.models import AuditEvent, AuditKind
from vsr_core.tables import AUDIT_EVENT
from vsr_core.types import utcnow

MAX_TARGET = 200


@dataclass(frozen=True)
class Actor:
    """Who acted: an admin account (``admin_id``) or the machine's operator at the CLI."""

    name: str
    admin_id: int | None = None
    via: str = "dashboard"  # dashboard | cli


def record(
    session: Session,
    actor: Actor,
    kind: AuditKind,
    *,
    study_id: int | None,
    target: str = "",
    change: Mapping[str, Any] | None = None,
) -> AuditEvent:
    """Add the record of one action to ``session`` (the caller commits it with the action)."""
    event = AuditEvent(
        at=utcnow(),
        actor_id=actor.admin_id,
        actor=actor.name[:128],
        study_id=study_id,
        kind=kind.value,
        target=str(target)[:MAX_TARGET],
        change=dict(change or {}),
        via=actor.via,
    )
    session.add(event)
    return event


def record_now(
    engine: Engine,
    actor: Actor,
    kind: AuditKind,
    *,
    study_id: int | None,
    target: str = "",
    change: Mapping[str, Any] | None = None,
) -> None:
    """Record an action that writes nothing else (a failed login), in its own transaction."""
    with Session(engine) as session:
        record(session, actor, kind, study_id=study_id, target=target, change=change)
        session.commit()


def changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """``{"before": {...}, "after": {...}}`` of the keys whose value differs."""
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return {
        "before": {k: before.get(k) for k in keys},
        "after": {k: after.get(k) for k in keys},
    }


def as_json(event: AuditEvent | Mapping[str, Any]) -> dict[str, Any]:
    """One record as the JSONL export writes it."""
    row = event.model_dump() if isinstance(event, AuditEvent) else dict(event)
    at = row["at"]
    return {
        "id": row["id"],
        "at": at.isoformat() if isinstance(at, datetime) else at,
        "actor": row["actor"],
        "actor_id": row["actor_id"],
        "via": row["via"],
        "study_id": row["study_id"],
        "kind": row["kind"],
        "target": row["target"],
        "change": row["change"],
    }


def stream(engine: Engine, *, chunk: int = 1000, **where: Any) -> Iterator[dict[str, Any]]:
    """Every record, oldest first, as ``as_json`` dicts, read ``chunk`` rows at a time by id
    (keyset, so a long trail is never held in memory). ``where``: column == value filters."""
    last = 0
    while True:
        query = select(AUDIT_EVENT).where(AUDIT_EVENT.c.id > last)
        for column, value in where.items():
            if value is not None:
                query = query.where(AUDIT_EVENT.c[column] == value)
        query = query.order_by(AUDIT_EVENT.c.id).limit(chunk)
        with engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        if not rows:
            return
        for row in rows:
            yield as_json(dict(row))
        last = rows[-1]["id"]
