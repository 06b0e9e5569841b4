"""Which study a request works in: ``request.state.study`` (a ``vsr_core.studies.context.
StudyContext``), set for every request by :class:`StudyScope`.

- Worker pages under ``/s/<slug>/...`` belong to that study. The prefix moves into the ASGI
  ``root_path``, so the same routes serve every study, ``url_for`` builds prefixed links,
  and a redirect to a site path (``/instructions/validate``) keeps the prefix. An unknown
  slug is a 404 page.
- The dashboard (``/admin``) works in the admin's chosen study: ``?study=<slug>`` picks it
  and a cookie remembers it (``ADMIN_STUDY_COOKIE``; the admin session still guards access).
- Everything else (the old unprefixed links) belongs to the default study.

Studies are read from the database at most every few seconds per process (``CACHE_SECONDS``).
"""

from __future__ import annotations

import threading
import time
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from anyio import to_thread
from fastapi import Request
from sqlmodel import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vsr_core.studies.context import StudyContext
from vsr_core.studies.definition import SLUG_RE

PREFIX = "/s/"
ADMIN_STUDY_COOKIE = "vsr_admin_study"
CACHE_SECONDS = 5.0
# Site paths a study prefix is not put in front of on a redirect: the dashboard and files
# every study shares.
_SHARED_PATHS = ("/admin", "/static", "/s/")


class StudyCache:
    """slug (None: the default study) -> StudyContext or None (no such study), per process."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._found: dict[str | None, tuple[float, StudyContext | None]] = {}
        self._listing: tuple[float, list[tuple[str, str]]] | None = None
        self._lock = threading.Lock()

    def cached(self, slug: str | None) -> tuple[bool, StudyContext | None]:
        with self._lock:
            hit = self._found.get(slug)
        if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
            return True, hit[1]
        return False, None

    def load(self, slug: str | None) -> StudyContext | None:
        from vsr_core.studies.store import StudyError, resolve_study

        with Session(self.engine) as session:
            try:
                found: StudyContext | None = StudyContext.of(resolve_study(session, slug))
            except StudyError:
                found = None
        with self._lock:
            self._found[slug] = (time.monotonic(), found)
        return found

    def listing(self) -> list[tuple[str, str]]:
        """(slug, name) of every study, for the dashboard's switcher (cached as above)."""
        with self._lock:
            hit = self._listing
        if hit is not None and time.monotonic() - hit[0] < CACHE_SECONDS:
            return hit[1]
        from vsr_core.studies.store import list_studies

        with Session(self.engine) as session:
            found = [
                (s.slug, s.name + (" (archived)" if s.archived_at else ""))
                for s in list_studies(session)
            ]
        with self._lock:
            self._listing = (time.monotonic(), found)
        return found

    def forget(self) -> None:
        with self._lock:
            self._found.clear()
            self._listing = None


def study_cache(app: Any) -> StudyCache:
    cache = getattr(app.state, "study_cache", None)
    if cache is None:
        cache = StudyCache(app.state.engine)
        app.state.study_cache = cache
    return cache


async def lookup(app: Any, slug: str | None) -> StudyContext | None:
    cache = study_cache(app)
    hit, found = cache.cached(slug)
    if hit:
        return found
    return await to_thread.run_sync(cache.load, slug)


def _admin_choice(scope: Scope) -> tuple[str | None, bool]:
    """(slug the admin chose, whether it came with this request's ``?study=``)."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    asked = query.get("study")
    if asked:
        return asked[0], True
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header means no choice
                continue
            if ADMIN_STUDY_COOKIE in jar:
                return jar[ADMIN_STUDY_COOKIE].value, False
    return None, False


class StudyScope:
    """Pure ASGI middleware: resolves the study, moves ``/s/<slug>`` into ``root_path``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        root: str = scope.get("root_path", "")
        path: str = scope["path"]
        if root and path.startswith(root):  # behind a proxy's --root-path
            path = path[len(root) :]
        app = scope["app"]
        state = scope.setdefault("state", {})
        if path.startswith(PREFIX):
            slug, _, rest = path[len(PREFIX) :].partition("/")
            study = await lookup(app, slug) if SLUG_RE.fullmatch(slug) else None
            if study is None:
                await self._unknown(scope, receive, send, slug)
                return
            prefix = root + PREFIX + slug
            scope = dict(scope, root_path=prefix)
            if not rest:  # /s/<slug> alone: the study's home is the site's home
                scope["path"] = prefix + "/"
            state["study"] = study
            await self.app(scope, receive, _keep_prefix(send, prefix))
            return
        if path == "/admin" or path.startswith("/admin/"):
            chosen, asked = _admin_choice(scope)
            study = await lookup(app, chosen) if chosen and SLUG_RE.fullmatch(chosen) else None
            if study is None:
                # No choice, or one that is not (or no longer) a study: the default, and
                # the dashboard says so (``study_unknown``).
                study = await lookup(app, None)
                asked = False
                state["study_unknown"] = chosen
            state["study"] = study
            # Read before the route opens its session (on SQLite a second connection would
            # wait for that request's own write lock).
            state["studies"] = await to_thread.run_sync(study_cache(app).listing)
            if asked and study is not None:
                await self.app(scope, receive, _remember(send, study.slug))
                return
            await self.app(scope, receive, send)
            return
        state["study"] = await lookup(app, None)
        await self.app(scope, receive, send)

    async def _unknown(self, scope: Scope, receive: Receive, send: Send, slug: str) -> None:
        from webapp.http.errors import error_response

        request = Request(scope, receive)
        shown = slug if SLUG_RE.fullmatch(slug) else "that"  # never echo odd input
        response = error_response(
            request,
            404,
            f"There is no study called {shown} on this site. Please check the link you "
            "were given, or open the study again from Prolific, MTurk or your invitation.",
        )
        await response(scope, receive, send)


def _keep_prefix(send: Send, prefix: str) -> Send:
    """Redirects to a site path stay in the study: ``/done/validate`` -> ``/s/x/done/...``."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start" and 300 <= message["status"] < 400:
            headers = []
            for name, value in message.get("headers", []):
                if name == b"location":
                    target = value.decode("latin-1")
                    if (
                        target.startswith("/")
                        and not target.startswith("//")
                        and not target.startswith(prefix + "/")
                        and not target.startswith(_SHARED_PATHS)
                    ):
                        value = (prefix + target).encode("latin-1")
                headers.append((name, value))
            message = dict(message, headers=headers)
        await send(message)

    return wrapped


def _remember(send: Send, slug: str) -> Send:
    """Set the admin's study cookie on this response (unless it is an error)."""
    cookie = f"{ADMIN_STUDY_COOKIE}={slug}; Path=/admin; SameSite=Lax; HttpOnly"

    async def wrapped(message: Message) -> None:
        # A refused choice (a study the admin holds no role in) is not remembered.
        if message["type"] == "http.response.start" and message["status"] < 400:
            headers = [*message.get("headers", []), (b"set-cookie", cookie.encode("latin-1"))]
            message = dict(message, headers=headers)
        await send(message)

    return wrapped


def study_prefix(request: Request) -> dict[str, Any]:
    """Template context: ``prefix``, the path the request's worker pages live under."""
    return {"prefix": request.scope.get("root_path", "")}


def current_study(request: Request) -> StudyContext:
    """The request's study (set by StudyScope); the default one for apps built without it."""
    found = getattr(request.state, "study", None)
    if found is None:
        cache = study_cache(request.app)
        hit, found = cache.cached(None)
        if not hit:
            found = cache.load(None)
    if found is None:
        from webapp.http.errors import PageError

        raise PageError(500, "This site has no default study; run `vsr db upgrade`.")
    return found
