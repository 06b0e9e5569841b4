"""One policy for a dropped database connection (a PostgreSQL restart or failover, an admin's
``pg_terminate_backend``): the request is run again, once, on a fresh connection, when that
cannot do anything twice. The JSON API applies the same rule inside its own thread
(``webapp.validate.routes._retrying``); this middleware applies it to every other route.

Run again when nothing has gone out yet and either
- no transaction reached COMMIT in the failed attempt (nothing of it was stored), or
- the request is idempotent by design: GET/HEAD pages, and the task forms, whose answers are
  keyed by the lease (``record_vote``) or by the form's token (``generation.submit``).

A POST that had committed something (an invite, a job, a re-queue) is not repeated: it may
have been stored just before the connection died, and the 500 page asks to reload.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from vsr_core.db import is_dropped_connection
from webapp.http.inputs import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("webapp")

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
            if started or not is_dropped_connection(exc) or not may_retry(scope, bool(marks)):
                raise
        finally:
            _COMMITTED.reset(token)
        log.warning("database connection lost on %s %s; running it again",
                    scope["method"], scope["path"])

        async def replaying() -> Message:
            if consumed:
                return consumed.pop(0)
            return await receive()

        await self.app(scope, replaying, send)
