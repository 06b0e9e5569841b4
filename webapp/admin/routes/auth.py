"""Admin login and logout (the only admin URLs open to anonymous visitors: the login form)."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response
from sqlmodel import Session

from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.models import AuditKind
from webapp.admin import csrf
from webapp.admin.auth import COOKIE_NAME, SESSION_MAX_AGE, AdminPostDep, authenticate, end_sessions
from webapp.admin.auth import make_session_cookie as make_cookie
from webapp.admin.pages import safe_next
from webapp.admin.throttle import LoginThrottle
from webapp.http.deps import SessionDep, SettingsDep, TemplatesDep, app_owned

router = APIRouter(prefix="/admin", tags=["admin"])
log = logging.getLogger(__name__)


def _throttle(request: Request) -> LoginThrottle:
    return app_owned(request, "login_throttle", LoginThrottle)


def _client_address(request: Request) -> str | None:
    # uvicorn puts a forwarded address here only from TRUSTED_PROXIES (see `vsr serve`).
    return request.client.host if request.client else None


def _login_page(
    request: Request, templates: TemplatesDep, secret: str, nxt: str, error: str | None, status: int
) -> Response:
    nonce = request.cookies.get(csrf.PRELOGIN_COOKIE) or csrf.new_nonce()
    response = templates.TemplateResponse(
        request,
        "admin/login.html",
        {"next": nxt, "error": error, "csrf_token": csrf.token_for(secret, nonce)},
        status_code=status,
    )
    response.set_cookie(
        csrf.PRELOGIN_COOKIE,
        nonce,
        max_age=3600,
        httponly=True,
        samesite="strict",
        path="/admin",
        secure=request.app.state.settings.base_url.startswith("https://"),
    )
    return response


def _failed(session: Session, username: str, why: str) -> None:
    """A failed login writes nothing else: its record is committed on its own, naming the
    username that was tried (there is no account to point to)."""
    tried = username.strip() or "(empty)"
    audit.record(
        session,
        Actor(tried, None),
        AuditKind.login_failed,
        study_id=None,
        target=tried,
        change={"reason": why},
    )
    session.commit()


@router.get("/login", include_in_schema=False)
def login_form(
    request: Request, templates: TemplatesDep, settings: SettingsDep, next: str = "/admin"
) -> Response:
    return _login_page(request, templates, settings.secret_key, safe_next(next), None, 200)


@router.post("/login", include_in_schema=False)
def login(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    templates: TemplatesDep,
    username: Annotated[str, Form(max_length=64)] = "",
    password: Annotated[str, Form(max_length=1024)] = "",
    csrf_token: Annotated[str, Form(max_length=200)] = "",
    next: Annotated[str, Form(max_length=2000)] = "/admin",
) -> Response:
    csrf.check(settings.secret_key, request.cookies.get(csrf.PRELOGIN_COOKIE), csrf_token)
    throttle = _throttle(request)
    key = throttle.key(_client_address(request), username)
    wait = throttle.attempt(session, key)  # counted as failed until the password is right
    if wait:
        response = _login_page(
            request,
            templates,
            settings.secret_key,
            safe_next(next),
            f"Too many failed logins. Please try again in {wait // 60 + 1} minutes.",
            429,
        )
        response.headers["Retry-After"] = str(wait)
        _failed(session, username, "too many failed logins")
        return response
    user = authenticate(session, username, password) if username and password else None
    if user is None:
        _failed(session, username, "unknown username or wrong password")
        return _login_page(
            request,
            templates,
            settings.secret_key,
            safe_next(next),
            "Unknown username or wrong password.",
            401,
        )
    throttle.succeeded(session, key)
    log.info("admin %s logged in", user.id)
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        make_cookie(settings.secret_key, user),
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="strict",
        secure=settings.base_url.startswith("https://"),
        path="/admin",
    )
    response.delete_cookie(csrf.PRELOGIN_COOKIE, path="/admin")
    return response


@router.post("/logout", include_in_schema=False)
def logout(admin: AdminPostDep, session: SessionDep) -> Response:
    end_sessions(session, admin)  # the cookie stops working even if it was copied
    log.info("admin %s logged out", admin.user_id)
    response = RedirectResponse("/admin/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/admin")
    return response
