"""Helpers shared by the admin routes: rendering with the admin's CSRF token, the study
config, and the per-app figure cache."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from sqlmodel import Session

from core.study import StudyConfig, load_study_config
from webapp.admin import csrf
from webapp.admin.auth import AdminSession
from webapp.admin.cache import FigureCache
from webapp.admin.stats import data_version

T = TypeVar("T")

NAV = (
    ("overview", "/admin", "Overview"),
    ("quality", "/admin/quality", "Data quality"),
    ("workers", "/admin/workers", "Workers"),
    ("data", "/admin/data", "Data"),
    ("settings", "/admin/settings", "Study settings"),
    ("pipeline", "/admin/pipeline", "Pipeline"),
    ("revalidation", "/admin/revalidation", "Re-validation"),
)
CACHE_TTL_SECONDS = 60.0


def figure_cache(request: Request) -> FigureCache:
    """One cache per app (created lazily: nothing at import time)."""
    state = request.app.state
    cache = getattr(state, "admin_cache", None)
    if cache is None:
        cache = FigureCache(ttl_seconds=CACHE_TTL_SECONDS)
        state.admin_cache = cache
    return cache  # type: ignore[no-any-return]


def cached(
    request: Request, session: Session, name: Hashable, compute: Callable[[Session], T]
) -> T:
    """``compute(session)`` through the figure cache (see webapp.admin.cache).

    The first computation uses the request's session (on SQLite a second connection would
    wait for this request's own lock); background refreshes open their own.
    """
    engine = request.app.state.engine

    def later() -> T:
        with Session(engine) as own:
            return compute(own)

    return figure_cache(request).get(name, data_version(session), lambda: compute(session), later)


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
    ctx = {
        "admin": admin,
        "nav": NAV,
        "active": active,
        "csrf_token": csrf.token_for(settings.secret_key, admin.nonce),
        **context,
    }
    return templates.TemplateResponse(  # type: ignore[no-any-return]
        request, f"admin/{template}", ctx, status_code=status_code
    )


def render_error(request: Request, status: int, message: str) -> Response:
    """An error on an admin page, inside the admin layout (webapp.errors calls this for a
    logged-in admin)."""
    from webapp.errors import TITLES

    admin: AdminSession = request.state.admin
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


def study_config(session: Session) -> StudyConfig:
    return load_study_config(session)


def back(url: str, message: str | None = None) -> RedirectResponse:
    """Post/redirect/get: after an action go back to the page, with a flash message."""
    from urllib.parse import quote

    sep = "&" if "?" in url else "?"
    target = f"{url}{sep}msg={quote(message)}" if message else url
    return RedirectResponse(target, status_code=303)


def safe_next(url: str | None) -> str:
    """Only local admin paths as a post-login target (no open redirect)."""
    if url and url.startswith("/admin") and not url.startswith("//") and "\\" not in url:
        return url
    return "/admin"
