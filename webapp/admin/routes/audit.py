"""The audit trail: every admin action, newest first, filtered by actor, kind, study and
time, a page at a time by id; and the same records as JSONL. Read-only: no route here (or
anywhere) changes a record, and the database refuses to (docs/dashboard.md, "Audit trail")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse
from sqlmodel import Session, col, select

from vsr_core import audit
from vsr_core.limits import INT32_MAX
from vsr_core.models import AdminRole, AdminUser, AuditKind, StudyRoleGrant
from vsr_core.roles import studies_of
from vsr_core.studies.store import list_studies
from webapp.admin.auth import AdminSession, actor_of
from webapp.admin.pages import admin_study, render
from webapp.admin.roles import ViewerDep, requires_viewer
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])
PAGE = 50
SHOWN_CHARS = 160  # a long value (a consent text) is cut on the page; the export has it all
DATE = r"^(\d{4}-\d{2}-\d{2})?$"
KINDS = tuple(k.value for k in AuditKind)

ActorQ = Annotated[str, Query(max_length=128)]
KindQ = Annotated[str, Query(pattern="^(" + "|".join(KINDS) + ")?$")]
ScopeQ = Annotated[str, Query(pattern="^(study|all)$")]
DateQ = Annotated[str, Query(pattern=DATE)]


@dataclass(frozen=True)
class AuditQuery:
    """The trail's filters as the page and its export take them from the URL."""

    actor: str = ""
    kind: str = ""
    scope: str = "study"
    since: str = ""
    until: str = ""


def audit_query(
    actor: ActorQ = "",
    kind: KindQ = "",
    scope: ScopeQ = "study",
    since: DateQ = "",
    until: DateQ = "",
) -> AuditQuery:
    return AuditQuery(actor.strip(), kind, scope, since, until)


AuditQueryDep = Annotated[AuditQuery, Depends(audit_query)]


def _day(text: str, what: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.combine(date.fromisoformat(text), time(), tzinfo=UTC)
    except ValueError:
        raise HTTPException(422, f"{what} {text!r} is not a date (YYYY-MM-DD)") from None


def _filter(
    request: Request,
    session: Session,
    admin: AdminSession,
    q: AuditQuery,
) -> audit.Filter:
    """The records this admin asked for and may see: the chosen study's, or every study
    they hold a role in; the records of no study (logins, accounts) to owners only."""
    start, end = _day(q.since, "from"), _day(q.until, "to")
    if start is not None and end is not None and end < start:
        raise HTTPException(422, f"'to' ({q.until}) is before 'from' ({q.since})")
    roles = studies_of(session, admin.user_id)
    chosen = admin_study(request).id
    colleagues: audit.Admins | None = None
    if q.scope == "study":
        ids: tuple[int, ...] | None = (chosen,)
        unscoped = False
    elif roles:
        ids = tuple(sorted(set(roles) | {chosen}))
        unscoped = AdminRole.owner in roles.values()
        # Of the records of no study, an owner reads only those of admins who share a study
        # with them: another lab's logins are not theirs to watch.
        colleagues = _admins_of(session, tuple(roles)) if unscoped else None
    else:
        # No grant at all: roles are not in use on this site yet, and every admin sees
        # every study (as every other page shows them).
        ids, unscoped = None, True
    return audit.Filter(
        actor=q.actor or None,
        kind=AuditKind(q.kind) if q.kind else None,
        study_ids=ids,
        unscoped=unscoped,
        unscoped_admins=colleagues,
        since=start,
        until=end + timedelta(days=1) if end is not None else None,  # 'to' is inclusive
    )


def _admins_of(session: Session, study_ids: tuple[int, ...]) -> audit.Admins:
    """Every admin holding a role in one of these studies."""
    rows = session.exec(
        select(AdminUser.id, AdminUser.username)
        .join(StudyRoleGrant, col(StudyRoleGrant.admin_id) == col(AdminUser.id))
        .where(col(StudyRoleGrant.study_id).in_(study_ids))
        .distinct()
    ).all()
    return audit.Admins(
        ids=tuple(i for i, _ in rows if i is not None), names=tuple(n for _, n in rows)
    )


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def change_lines(change: dict[str, Any]) -> list[str]:
    """A record's change for people: ``key: before → after`` per changed key, then the
    other facts (``key: value``)."""
    before, after = change.get("before"), change.get("after")
    lines: list[str] = []
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            lines.append(f"{key}: {_short(before.get(key))} → {_short(after.get(key))}")
    for key, value in change.items():
        if key in ("before", "after") and isinstance(before, dict) and isinstance(after, dict):
            continue
        lines.append(f"{key}: {_short(value)}")
    return lines


@router.get("/audit", include_in_schema=False)
def audit_page(
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    q: AuditQueryDep,
    before: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
) -> Response:
    where = _filter(request, session, admin, q)
    rows = audit.newest(session, where, before=before, limit=PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    slugs = {s.id: s.slug for s in list_studies(session)}
    params = asdict(q)
    return render(
        request,
        admin,
        "audit.html",
        "audit",
        rows=[
            {**r, "lines": change_lines(r["change"]), "study": slugs.get(r["study_id"])}
            for r in rows
        ],
        kinds=KINDS,
        params=params,
        query={k: v for k, v in params.items() if v and not (k == "scope" and v == "study")},
        older=rows[-1]["id"] if more else None,
        first_page=before is None,
    )


@router.get("/audit.jsonl", include_in_schema=False)
def audit_export(
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    q: AuditQueryDep,
) -> Response:
    """The records of the page's filters, oldest first, one JSON object a line, streamed.
    Reading the whole trail out is itself recorded (with the filters), before it starts."""
    where = _filter(request, session, admin, q)
    audit.record(
        session,
        actor_of(admin),
        AuditKind.audit_export,
        study_id=admin_study(request).id if q.scope == "study" else None,
        target="audit.jsonl",
        change={"filters": where.described()},
    )
    session.commit()
    engine = request.app.state.engine

    def lines() -> Iterator[str]:
        for row in audit.stream(engine, where=where):
            yield json.dumps(row, ensure_ascii=False) + "\n"

    name = f"audit-{admin_study(request).slug if q.scope == 'study' else 'all'}.jsonl"
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
