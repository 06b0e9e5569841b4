"""Helpers shared by the admin routes: rendering with the admin's CSRF token, the study
config, and the per-app figure cache."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from fastapi import HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from vsr_core.db import read_snapshot_options
from vsr_core.models import DEFAULT_STUDY_ID, Study
from vsr_core.studies.context import StudyContext
from vsr_core.studies.settings import StudyConfig, load_study_config
from vsr_core.tables import EXAMPLE
from webapp.admin import csrf
from webapp.admin.auth import AdminSession
from webapp.admin.cache import Computing, FigureCache
from webapp.admin.figures import Figure
from webapp.admin.stats import data_version
from webapp.http.errors import TITLES
from webapp.http.study import current_study

T = TypeVar("T")

NAV = (
    ("overview", "/admin", "Overview"),
    ("quality", "/admin/quality", "Data quality"),
    ("workers", "/admin/workers", "Workers"),
    ("bursts", "/admin/bursts", "Bursts"),
    ("data", "/admin/data", "Data"),
    ("settings", "/admin/settings", "Study settings"),
    ("pipeline", "/admin/pipeline", "Pipeline"),
    ("revalidation", "/admin/revalidation", "Re-validation"),
    ("platform", "/admin/platform", "Platforms"),
    ("audit", "/admin/audit", "Audit"),
)

CACHE_TTL_SECONDS = 60.0
# A figure computed faster than this is recomputed in the request once the data changed
# (never stale); a slower one (a large study) is served stale while it is recomputed.
CACHE_SYNC_BELOW_SECONDS = 0.15
# Below this many Examples (the newest Example's id, read with the data version) a figure no
# one has computed yet is computed in the request, as it takes milliseconds; above it, in
# the background while the page says it is computing (webapp.admin.cache).
IN_REQUEST_BELOW_EXAMPLES = 20_000
# How long a request on a large study waits for a figure whose first computation it started:
# not at all (a page has up to three such figures, and the first visit after a start-up or
# an import meets them all at once; waiting even 0.25 s for each put pages over 500 ms).
FIRST_WAIT_SECONDS = 0.0


def figure_cache(request: Request) -> FigureCache:
    """One cache per app (created lazily: nothing at import time)."""
    return app_figure_cache(request.app)


def app_figure_cache(app: Any) -> FigureCache:
    state = app.state
    cache = getattr(state, "admin_cache", None)
    if cache is None:
        settings = state.settings
        cache = FigureCache(
            ttl_seconds=CACHE_TTL_SECONDS,
            sync_below=CACHE_SYNC_BELOW_SECONDS,
            directory=figure_cache_dir(settings),
            secret=str(settings.secret_key).encode(),
            wait_first=FIRST_WAIT_SECONDS,
        )
        state.admin_cache = cache
    return cache


def figure_cache_dir(settings: Any) -> Path:
    """Where the figures are kept across restarts: beside the image cache (the server's own
    scratch space), one folder per database so two databases' figures never mix."""
    digest = hashlib.sha256(str(settings.database_url).encode()).hexdigest()[:16]
    return Path(settings.image_cache_dir) / "dashboard-figures" / digest


def reading_session(engine: Engine) -> Session:
    """A session for computing figures off a request: it only reads, so on SQLite it begins
    DEFERRED (no write lock held while it counts a study; WAL keeps its snapshot) and on
    PostgreSQL it reads one snapshot."""
    return Session(engine.execution_options(**read_snapshot_options(engine)))


def is_large(request: Request, session: Session, version: tuple[Any, ...]) -> bool:
    """Whether the admin's study has at least IN_REQUEST_BELOW_EXAMPLES Examples, so that its
    figures are computed off the request. The newest Example's id (read with the data
    version) rules most cases out for free; past it, a count that stops at the bound (at most
    that many index entries of the study) decides, once per study and newest Example (votes
    do not change a study's size): ids grow with every study of the database, so a new
    small study beside a large one is not large."""
    if (version[1] or 0) < IN_REQUEST_BELOW_EXAMPLES:
        return False
    study_id = admin_study(request).id
    known: dict[tuple[int, Any], bool] | None = getattr(request.app.state, "admin_large", None)
    if known is None:
        known = request.app.state.admin_large = {}
    key = (study_id, version[1])
    if key not in known:
        mine = select(EXAMPLE.c.id).where(EXAMPLE.c.study_id == study_id)
        bounded = mine.limit(IN_REQUEST_BELOW_EXAMPLES).subquery()
        n = session.connection().execute(select(func.count()).select_from(bounded)).scalar_one()
        if len(known) > 1_000:
            known.clear()  # one entry per study and newest Example: older ones are dead
        known[key] = int(n) >= IN_REQUEST_BELOW_EXAMPLES
    return known[key]


def cached(
    request: Request,
    session: Session,
    name: Hashable,
    compute: Callable[[Session], T],
    pending: Callable[[float], T] | None = None,
) -> T:
    """``compute(session)`` through the figure cache (see webapp.admin.cache).

    The first computation uses the request's session (on SQLite a second connection would
    wait for this request's own lock); background refreshes open their own. With
    ``pending`` the first computation runs in the background too, and the request gets
    ``pending(seconds computing)`` if it is not ready within a moment (a large study);
    ``cached_or_computing`` is that with the cache's Computing as the stand-in. Every
    whole-study figure gives a ``pending``: on a large study none is computed in a request.
    """
    engine = request.app.state.engine
    name = (admin_study(request).id, name)  # figures are per study

    def later() -> T:
        with reading_session(engine) as own:
            return compute(own)

    version = data_version(session)
    small = not is_large(request, session, version)
    if small:
        pending = None  # a small study: its figures are computed in the request, in ms
    return figure_cache(request).get(
        name, version, lambda: compute(session), later, pending, small=small
    )


def figure(
    request: Request,
    session: Session,
    fig: Figure,
    pending: Callable[[float], T],
) -> Any:
    """A named figure (webapp.admin.figures) through the cache, ``pending(seconds)`` while
    a large study's is first computed."""
    return cached(request, session, fig.name, fig.compute, pending)


def cached_or_computing(
    request: Request, session: Session, name: Hashable, compute: Callable[[Session], T]
) -> T | Computing:
    """``cached`` whose first computation never holds the request: the figure, or a
    Computing (for how long it has been computed) while it is not ready."""
    either: Callable[[Session], T | Computing] = compute
    return cached(request, session, name, either, pending=Computing)


def render(
    request: Request,
    admin: AdminSession,
    template: str,
    active: str,
    status_code: int = 200,
    **context: Any,
) -> Response:
    settings = request.app.state.settings
    templates = request.app.state.templates
    study = admin_study(request)
    role = getattr(request.state, "admin_role", None)
    ctx = {
        "admin": admin,
        "nav": NAV,
        # The admin's role in the study (None: none); pages hide what it may not do.
        "role": role.value if role is not None else None,
        "active": active,
        # The study switcher on every page (webapp.http.study keeps the choice).
        "study": study,
        "studies": _studies(request),
        "study_unknown": getattr(request.state, "study_unknown", None),
        "csrf_token": csrf.token_for(settings.secret_key, admin.nonce),
        # While the start-up warm-up runs (webapp.admin.warmup): how far it is.
        "warmup_note": _warmup_note(request),
        **context,
    }
    # The flash message is only ever the one the server set (see back); a ``?msg=`` in a
    # link someone sent the admin shows nothing.
    flash = request.cookies.get(FLASH_COOKIE)
    ctx["msg"] = unquote(flash)[:500] if flash else None
    response = templates.TemplateResponse(
        request, f"admin/{template}", ctx, status_code=status_code
    )
    if flash:
        response.delete_cookie(FLASH_COOKIE, path="/admin")
    return response  # type: ignore[no-any-return]


def _warmup_note(request: Request) -> str | None:
    state = getattr(request.app.state, "admin_warmup", None)
    return state.note() if state is not None else None


def render_error(request: Request, status: int, message: str) -> Response | None:
    """An error on an admin page, inside the admin layout, for a logged-in admin (None for
    anyone else: they get the plain error page). Registered with webapp.http.errors."""
    admin: AdminSession | None = getattr(request.state, "admin", None)
    if admin is None:
        return None
    return render(
        request,
        admin,
        "error.html",
        "",
        status_code=status,
        title=TITLES.get(status, "Something went wrong"),
        message=message.removeprefix("Value error, "),
        back=_back_link(request.headers.get("referer")),
    )


def _back_link(referer: str | None) -> str | None:
    """The admin page the admin came from, as a local path only (never another host)."""
    from urllib.parse import urlparse

    if not referer:
        return None
    url = urlparse(referer)
    target = url.path + (f"?{url.query}" if url.query else "")
    return safe_next(target) if url.path.startswith("/admin") else None


def study_config(session: Session, study_id: int = DEFAULT_STUDY_ID) -> StudyConfig:
    return load_study_config(session, study_id)


def admin_study(request: Request) -> StudyContext:
    """The study the dashboard shows: the admin's choice (``?study=``, remembered in a
    cookie; webapp.http.study), else the default one."""
    return current_study(request)


def check_admin_study(request: Request, session: Session, what: str, study_id: int) -> None:
    """A row of another study than the dashboard's (``what``: "Example #3", "Job #2") is a
    404 that says where it is."""
    study = admin_study(request)
    if study_id != study.id:
        other = session.get(Study, study_id)
        where = other.slug if other is not None else "another study"
        raise HTTPException(
            status_code=404,
            detail=f"{what} belongs to the study {where}, not {study.slug}: choose that study "
            "in the switcher to see it.",
        )


FLASH_COOKIE = "vsr_admin_flash"


def back(url: str, message: str | None = None) -> RedirectResponse:
    """Post/redirect/get: after an action go back to the page, with a flash message.

    The message travels in a short-lived cookie of the admin's own browser, not in the URL:
    another site can put text in a link, but cannot set this site's cookies."""
    response = RedirectResponse(url, status_code=303)
    if message:
        response.set_cookie(
            FLASH_COOKIE,
            quote(message[:500]),
            max_age=120,
            httponly=True,
            samesite="strict",
            path="/admin",
        )
    return response


def safe_next(url: str | None) -> str:
    """Only local admin paths as a post-login target (no open redirect)."""
    if url and url.startswith("/admin") and not url.startswith("//") and "\\" not in url:
        return url
    return "/admin"


def _studies(request: Request) -> list[tuple[str, str]]:
    """(slug, name) of the studies the admin holds a role in (webapp.admin.roles), for the
    switcher; every study (read by webapp.http.study) where no role was checked."""
    mine: list[tuple[str, str]] | None = getattr(request.state, "admin_studies", None)
    if mine is not None:
        return mine
    found: list[tuple[str, str]] = getattr(request.state, "studies", None) or []
    return found or [(admin_study(request).slug, admin_study(request).name)]
