"""One policy for a dropped database connection (a PostgreSQL restart or failover, an admin's
``pg_terminate_backend``): the request is run again, once, on a fresh connection, when that
cannot do anything twice. The JSON API applies the same rule inside its own thread
(``webapp.validate.routes._retrying``); this middleware applies it to every other route.

Run again when nothing has gone out yet and either
- no transaction reached COMMIT in the failed attempt (nothing of it was stored), or
- the request is idempotent by design: GET/HEAD pages, and the task forms, whose answers are
  keyed by the lease (``record_vote``) or by the form's token (``generation.submit``).

A POST that had committed something (an invite, a job, a re-queue) is not repeated: it may
have been stored just before the connection died.

When the database cannot be reached at all (down, restarting: connection refused, "the
database system is starting up", a dropped connection whose retry failed too), the answer is
503 with Retry-After, sent as an ordinary response. Raised to the server instead, it became a
500 after which uvicorn closed the keep-alive connection; nginx then met a reset on its next
request over it, counted the replica as failed and, both replicas failing alike, answered
502 "no live upstreams" for fail_timeout after the database was back.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from vsr_core.db import is_dropped_connection
from webapp.http.errors import error_response
from webapp.http.i18n import N_
from webapp.http.inputs import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("webapp")

RETRY_AFTER_SECONDS = 2  # a PostgreSQL restart takes a few seconds
# SQLSTATE classes of "no database to talk to": 08 connection exception; 57P01-03 admin or
# crash shutdown, cannot connect now (starting up, shutting down).
_UNAVAILABLE_STATES = ("08", "57P01", "57P02", "57P03")
_SQLITE_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED: busy_timeout ran out

UNAVAILABLE = N_(
    "The database is unavailable for a moment. Please try again in a few seconds; "
    "your earlier answers are saved."
)
UNAVAILABLE_AFTER_COMMIT = N_(
    "The database became unavailable while this was being saved, "
    "and part of it may be stored. Please reload the page in a few "
    "seconds to see what was saved before sending it again."
)

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD"})
IDEMPOTENT_POSTS = frozenset({"/validate", "/generate", "/begin/validate", "/begin/generate"})

# Per request attempt: [True] once a COMMIT was issued. A list, so that the threads FastAPI
# runs sync code in (each with a copy of this context) mark the same object.
_COMMITTED: ContextVar[list[bool] | None] = ContextVar("vsr_committed", default=None)


def _note_commit(_conn: Any) -> None:
    marks = _COMMITTED.get()
    if marks is not None:
        marks.append(True)


def track_commits() -> None:
    """Note every COMMIT, on any engine, for the request in progress (idempotent)."""
    if not event.contains(Engine, "commit", _note_commit):
        event.listen(Engine, "commit", _note_commit)


def database_unavailable(exc: BaseException) -> bool:
    """The database cannot be reached right now; nothing is wrong with the request, and the
    same request will work once the database is back."""
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    if not isinstance(exc, OperationalError):
        return False
    orig = exc.orig
    state = getattr(orig, "sqlstate", None)
    if type(orig).__module__.startswith("psycopg"):
        # No SQLSTATE: the server never answered (connection refused, reset, timed out).
        return state is None or state.startswith(_UNAVAILABLE_STATES)
    return getattr(orig, "sqlite_errorcode", None) in _SQLITE_BUSY


async def send_unavailable(scope: Scope, send: Send, committed: bool) -> None:
    """The 503 page (or JSON) with Retry-After, as the app's other errors look."""
    message = UNAVAILABLE_AFTER_COMMIT if committed else UNAVAILABLE
    response: Response
    try:
        response = error_response(Request(scope), 503, message)
    except Exception:  # an area's own error page may need the database itself
        response = PlainTextResponse(message, status_code=503)
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)

    async def no_body() -> Message:
        return {"type": "http.disconnect"}

    await response(scope, no_body, send)


def may_retry(scope: Scope, committed: bool) -> bool:
    method = scope["method"]
    if method in IDEMPOTENT_METHODS:
        return True
    return not committed or (method == "POST" and scope["path"] in IDEMPOTENT_POSTS)


class RetryDroppedConnection:
    """ASGI middleware; see the module docstring. The body the first attempt read is kept
    and handed to the second."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        track_commits()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        consumed: list[Message] = []
        started = False

        async def recording() -> Message:
            message = await receive()
            consumed.append(message)
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        marks: list[bool] = []
        token = _COMMITTED.set(marks)
        try:
            await self.app(scope, recording, tracking)
            return
        except DBAPIError as exc:
            if started:
                raise
            if not is_dropped_connection(exc) or not may_retry(scope, bool(marks)):
                if not database_unavailable(exc):
                    raise
                log.warning(
                    "database unavailable on %s %s: %s", scope["method"], scope["path"], exc.orig
                )
                await send_unavailable(scope, send, committed=bool(marks))
                return
        finally:
            _COMMITTED.reset(token)
        log.warning(
            "database connection lost on %s %s; running it again", scope["method"], scope["path"]
        )

        async def replaying() -> Message:
            if consumed:
                return consumed.pop(0)
            return await receive()

        started = False
        again: list[bool] = []
        token = _COMMITTED.set(again)
        try:
            await self.app(scope, replaying, tracking)
        except DBAPIError as exc:
            if started or not database_unavailable(exc):
                raise
            log.warning(
                "database unavailable on %s %s: %s", scope["method"], scope["path"], exc.orig
            )
            await send_unavailable(scope, send, committed=bool(marks or again))
        finally:
            _COMMITTED.reset(token)
