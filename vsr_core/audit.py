"""The audit trail: one append-only ``AuditEvent`` row per admin action (docs/dashboard.md).

``record`` adds the row to the caller's session, so it commits (or rolls back) with the
action it describes: there is no action without its record and no record of an action that
did not happen. Nothing here updates or deletes a row; the database refuses both (migration
0017's triggers). A failed login is the one record made on its own (``record_now``), since
nothing else is written then.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, and_, or_, select
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
    os_login: str | None = None  # the operating-system login that ran a CLI command


def _fields(
    actor: Actor,
    kind: AuditKind,
    study_id: int | None,
    target: str,
    change: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The columns of one record, bounded as the table's are."""
    return {
        "at": utcnow(),
        "actor_id": actor.admin_id,
        "actor": actor.name[:128],
        "study_id": study_id,
        "kind": kind.value,
        "target": str(target)[:MAX_TARGET],
        "change": dict(change or {}),
        "via": actor.via,
        "os_login": actor.os_login[:64] if actor.os_login else None,
    }


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
    event = AuditEvent(**_fields(actor, kind, study_id, target, change))
    session.add(event)
    return event


def record_in(
    conn: Connection,
    actor: Actor,
    kind: AuditKind,
    *,
    study_id: int | None,
    target: str = "",
    change: Mapping[str, Any] | None = None,
) -> None:
    """``record`` for work done on a Core connection: the row is inserted in ``conn``'s own
    transaction (it commits or rolls back with the work)."""
    conn.execute(AUDIT_EVENT.insert().values(**_fields(actor, kind, study_id, target, change)))


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


def sha256_of(path: Path) -> str:
    """The file's SHA-256 (hex), read in 1 MiB blocks: the digest an export record keeps."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def digests(root: Path) -> dict[str, str]:
    """Every file under ``root`` (a folder, or one file) -> its SHA-256, by relative name."""
    if root.is_file():
        return {root.name: sha256_of(root)}
    return {
        str(path.relative_to(root)): sha256_of(path)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


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
        "os_login": row.get("os_login"),
        "study_id": row["study_id"],
        "kind": row["kind"],
        "target": row["target"],
        "change": row["change"],
    }


@dataclass(frozen=True)
class Admins:
    """Admin accounts by id and by name (a record of no study may name one either way)."""

    ids: tuple[int, ...]
    names: tuple[str, ...]


@dataclass(frozen=True)
class Filter:
    """Which records a reader asks for (the page, the JSONL export, the CLI): all the given
    conditions hold. ``study_ids``: records of these studies (None: any study);
    ``unscoped``: also those of no study (logins, admin accounts); ``unscoped_admins``: of
    those, only the ones acted by or naming these admins (None: all); ``since``/``until``:
    ``since <= at < until``."""

    actor: str | None = None
    kind: AuditKind | None = None
    study_ids: tuple[int, ...] | None = None
    unscoped: bool = True
    unscoped_admins: Admins | None = None
    since: datetime | None = None
    until: datetime | None = None

    def _no_study(self) -> ColumnElement[bool]:
        c = AUDIT_EVENT.c
        if self.unscoped_admins is None:
            return c.study_id.is_(None)
        # A failed login has no acting admin: it names the account it tried.
        return and_(
            c.study_id.is_(None),
            or_(
                c.actor_id.in_(self.unscoped_admins.ids),
                c.target.in_(self.unscoped_admins.names),
            ),
        )

    def conditions(self) -> list[ColumnElement[bool]]:
        c = AUDIT_EVENT.c
        out: list[ColumnElement[bool]] = []
        if self.actor:
            out.append(c.actor == self.actor)
        if self.kind is not None:
            out.append(c.kind == self.kind.value)
        if self.study_ids is not None:
            scoped = c.study_id.in_(self.study_ids)
            out.append(or_(scoped, self._no_study()) if self.unscoped else scoped)
        elif not self.unscoped:
            out.append(c.study_id.is_not(None))
        if self.since is not None:
            out.append(c.at >= self.since)
        if self.until is not None:
            out.append(c.at < self.until)
        return out

    def described(self) -> dict[str, Any]:
        """The filter as the record of an export names it."""
        return {
            "actor": self.actor,
            "kind": self.kind.value if self.kind else None,
            "studies": list(self.study_ids) if self.study_ids is not None else "all",
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }


def newest(
    session: Session, where: Filter, *, before: int | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """One page of records, newest first: those with an id below ``before`` (the last id of
    the page before; keyset, so a page deep in a long trail costs what the first does)."""
    query = select(AUDIT_EVENT).where(*where.conditions())
    if before is not None:
        query = query.where(AUDIT_EVENT.c.id < before)
    query = query.order_by(AUDIT_EVENT.c.id.desc()).limit(limit)
    return [as_json(dict(row)) for row in session.connection().execute(query).mappings()]


def stream(
    engine: Engine, *, chunk: int = 1000, where: Filter | None = None, **equal: Any
) -> Iterator[dict[str, Any]]:
    """Every record, oldest first, as ``as_json`` dicts, read ``chunk`` rows at a time by id
    (keyset, so a long trail is never held in memory). ``where``: a Filter; ``equal``:
    column == value filters."""
    last = 0
    conditions = where.conditions() if where is not None else []
    while True:
        query = select(AUDIT_EVENT).where(AUDIT_EVENT.c.id > last, *conditions)
        for column, value in equal.items():
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
