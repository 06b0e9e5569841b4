"""Crowd entry and identity: Prolific, MTurk (with preview) and invite links; session cookie.

A worker arrives with ids in the URL, gets a signed session cookie (Starlette's
SessionMiddleware, signed with settings.secret_key via itsdangerous) and from then on is
known only by that cookie: task, form and image routes never trust ids in a URL. The entry
ids of an open batch are remembered, so a second link with the same worker id but another
Prolific SESSION_ID / MTurk assignmentId cannot take over that batch.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, Request
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from vsr_core import standing
from vsr_core.models import DEFAULT_STUDY_ID, InviteToken, Worker, WorkerSource
from vsr_core.types import utcnow
from webapp.http.deps import SessionDep
from webapp.http.errors import PageError
from webapp.http.tokens import same_token

# Checked with fullmatch (``$`` would also match before a final newline, so ``id\n`` would
# be a second identity), ASCII only ([0-9] is not \d: no full-width digits), nothing
# stripped or case-folded: an id that is not exactly right is refused, never repaired.
SAFE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# Each platform's real formats (settings.platform_id_formats == "exact", the default):
# Prolific ids are 24 lower-case hex digits (MongoDB ObjectIds); MTurk ids are upper-case
# letters and digits (worker ids ~13-14, assignment and HIT ids 30).
PLATFORM_FORMATS: dict[str, re.Pattern[str]] = {
    "PROLIFIC_PID": re.compile(r"[0-9a-f]{24}"),
    "STUDY_ID": re.compile(r"[0-9a-f]{24}"),
    "SESSION_ID": re.compile(r"[0-9a-f]{24}"),
    "workerId": re.compile(r"[A-Z0-9]{10,64}"),
    "assignmentId": re.compile(r"[A-Z0-9]{10,64}"),
    "hitId": re.compile(r"[A-Z0-9]{10,64}"),
}
# Invite tokens: what secrets.token_urlsafe makes (or an admin's own token).
INVITE_TOKEN = re.compile(r"[A-Za-z0-9_.-]{1,128}")
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
# Where MTurk lets an ExternalQuestion post its result; anything else would be an open
# form-post target for whoever crafts the link.
MTURK_HOSTS = frozenset({"www.mturk.com", "workersandbox.mturk.com"})

# Which entry parameter must match for a returning worker to resume an open batch.
RESUME_KEYS: dict[str, str] = {"prolific": "session_id", "mturk": "assignment_id"}


@dataclass
class Entry:
    source: str
    external_id: str
    params: dict[str, str] = field(default_factory=dict)
    preview: bool = False
    invite_token: str | None = None


def _clean_id(value: str | None, name: str, exact: bool = False) -> str | None:
    if value is None or value == "":
        return None
    pattern = PLATFORM_FORMATS[name] if exact else SAFE_ID
    if not pattern.fullmatch(value):
        raise PageError(400, f"The study link has an invalid {name}. Please use the link as given.")
    return value


def parse_entry(query: Any, exact: bool = True) -> Entry | None:
    """The crowd platform's ids from a study link, or None when the link carries none.

    ``exact``: each id must have its platform's real format (``PLATFORM_FORMATS``); else
    any short id of safe characters (development and tests with readable ids)."""

    def _clean(value: str | None, name: str) -> str | None:
        return _clean_id(value, name, exact)

    pid = _clean(query.get("PROLIFIC_PID"), "PROLIFIC_PID")
    if pid:
        return Entry(
            "prolific",
            pid,
            {
                k: v
                for k, v in (
                    ("study_id", _clean(query.get("STUDY_ID"), "STUDY_ID")),
                    ("session_id", _clean(query.get("SESSION_ID"), "SESSION_ID")),
                )
                if v
            },
        )
    assignment = query.get("assignmentId")
    if assignment == MTURK_PREVIEW:
        return Entry("mturk", "", {"hit_id": _clean(query.get("hitId"), "hitId") or ""}, True)
    worker = _clean(query.get("workerId"), "workerId")
    if worker:
        assignment = _clean(assignment, "assignmentId")
        if not assignment:
            raise PageError(400, "The MTurk link has no assignmentId. Please accept the HIT first.")
        params = {"assignment_id": assignment}
        hit = _clean(query.get("hitId"), "hitId")
        if hit:
            params["hit_id"] = hit
        submit_to = query.get("turkSubmitTo")
        if submit_to:
            parts = urlsplit(submit_to)
            if parts.scheme != "https" or parts.hostname not in MTURK_HOSTS:
                raise PageError(400, "The MTurk link has an unexpected turkSubmitTo address.")
            params["turk_submit_to"] = f"https://{parts.hostname}"
        return Entry("mturk", worker, params)
    token = query.get("token")
    if token:
        if not INVITE_TOKEN.fullmatch(token):
            raise PageError(403, "This invite link is not valid.")
        return Entry("invite", "", invite_token=token)
    return None


def is_new_identity(session: Session, entry: Entry) -> bool:
    """True when this Prolific/MTurk link names a worker the site has not seen (invites are
    made by admins and are not counted)."""
    if entry.source == "invite":
        return False
    stmt = select(Worker.id).where(
        Worker.source == entry.source, Worker.external_id == entry.external_id
    )
    return session.exec(stmt).first() is None


def _get_or_create(session: Session, source: str, external_id: str, roles: list[str]) -> Worker:
    stmt = select(Worker).where(Worker.source == source, Worker.external_id == external_id)
    worker = session.exec(stmt).first()
    if worker is not None:
        return worker
    try:
        # A savepoint: two first visits at once both try to insert; the loser reads the winner.
        with session.begin_nested():
            worker = Worker(source=source, external_id=external_id, roles=roles)
            session.add(worker)
    except IntegrityError:
        worker = session.exec(stmt).one()
    return worker


def resolve_worker(session: Session, entry: Entry, study_id: int = DEFAULT_STUDY_ID) -> Worker:
    """Find or create the worker an entry link names (flushes, caller commits). An invite
    is for one study: its token opens no other."""
    if entry.source == "invite":
        assert entry.invite_token is not None
        invite = session.exec(
            select(InviteToken).where(InviteToken.token == entry.invite_token)
        ).first()
        if invite is None or invite.study_id != study_id:
            raise PageError(403, "This invite link is not valid.")
        if invite.worker_id is not None:
            worker = session.get(Worker, invite.worker_id)
            assert worker is not None
            return worker
        worker = _get_or_create(
            session, WorkerSource.invite, f"invite-{invite.id}", list(invite.roles or [])
        )
        invite.worker_id = worker.id
        session.add(invite)
        return worker
    return _get_or_create(session, entry.source, entry.external_id, [])


def check_resume(entry: Entry, batch_entry: dict[str, Any]) -> None:
    """Refuse a link whose session id differs from the one that opened the worker's batch."""
    key = RESUME_KEYS.get(entry.source)
    if key is None:
        return
    before, now = batch_entry.get(key), entry.params.get(key)
    if before and before != now:
        raise PageError(
            409,
            "You already have a batch open that was started from another study session. "
            "Please continue in the browser where you started it, or wait until its time runs "
            "out.",
        )


def same_platform_session(entry: Entry, batch: Any) -> bool:
    """True when a finished batch was opened from this very Prolific session / MTurk assignment."""
    key = RESUME_KEYS.get(entry.source)
    if batch is None or key is None or batch.status == "open":
        return False
    before, now = (batch.entry or {}).get(key), entry.params.get(key)
    return bool(before) and before == now


# --- the session cookie ------------------------------------------------------------------


def scoped(request: Request, kind: str) -> str:
    """The cookie's key for this kind of work in the request's study: consent and platform
    ids are per study ("vsr-zh/validate"); the default study keeps the bare kind, as
    cookies issued before several studies existed have it."""
    study = getattr(request.state, "study", None)
    if study is None or study.is_default:
        return kind
    return f"{study.slug}/{kind}"


def login(request: Request, worker: Worker, kind: str, entry: Entry) -> None:
    old = request.session.get("worker_id")
    if old != worker.id:
        request.session.clear()  # a different person on this browser: forget the old one
    request.session["worker_id"] = worker.id
    entries = dict(request.session.get("entry") or {})
    entries[scoped(request, kind)] = {"source": entry.source, **entry.params}
    request.session["entry"] = entries
    csrf_token(request)


def entry_for(request: Request, kind: str) -> dict[str, str]:
    return dict((request.session.get("entry") or {}).get(scoped(request, kind)) or {})


def csrf_token(request: Request) -> str:
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(24)
        request.session["csrf"] = token
    return token


def check_csrf(request: Request, submitted: str | None) -> None:
    expected = request.session.get("csrf")
    if not isinstance(expected, str) or not same_token(expected, submitted):
        raise PageError(
            403,
            "This form has expired or did not come from this site. Reload the page and try again.",
        )


def has_consented(request: Request, kind: str) -> bool:
    return scoped(request, kind) in (request.session.get("consent") or [])


def record_consent(request: Request, kind: str) -> None:
    kinds = set(request.session.get("consent") or [])
    kinds.add(scoped(request, kind))
    request.session["consent"] = sorted(kinds)
    times = dict(request.session.get("consent_at") or {})
    times[scoped(request, kind)] = utcnow().isoformat()
    request.session["consent_at"] = times


def consent_time(request: Request, kind: str) -> str | None:
    """When this browser session agreed to the consent form for this kind (ISO, UTC)."""
    value = (request.session.get("consent_at") or {}).get(scoped(request, kind))
    return value if isinstance(value, str) else None


def get_current_worker(request: Request, session: SessionDep) -> Worker:
    """The worker of this browser session; 401 when there is none, 403 when blocked."""
    worker_id = request.session.get("worker_id")
    worker = session.get(Worker, worker_id) if isinstance(worker_id, int) else None
    if worker is None:
        raise PageError(
            401,
            "We do not know who you are yet. Please open the study through the link on "
            "Prolific, MTurk or your invitation.",
        )
    study = getattr(request.state, "study", None)
    if worker.blocked or (
        study is not None and standing.standing(session, worker, study.id).blocked
    ):
        raise PageError(403, "This account cannot take part in the study.", page="screenout")
    return worker


CurrentWorker = Annotated[Worker, Depends(get_current_worker)]
