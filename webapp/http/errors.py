"""Errors users see: a friendly HTML page for browser routes, JSON ``{"detail": ...}`` for the
API (``/api/...`` or a client that asks for JSON). Never a stack trace."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from webapp.http.i18n import N_, gettext

log = logging.getLogger("webapp")

TITLES = {
    400: N_("Something is wrong with this link or form"),
    401: N_("Please start from your study link"),
    403: N_("Not allowed"),
    404: N_("Not found"),
    405: N_("Not allowed"),
    409: N_("This was already done or is no longer yours"),
    422: N_("Some answers are missing or invalid"),
    500: N_("Something went wrong on our side"),
    503: N_("Back in a moment"),
}

CHECK_ANSWER = N_("Please check your answer.")


# An area's own error page: returns None when the area does not apply (e.g. nobody logged in).
AreaErrorRenderer = Callable[[Request, int, str], Response | None]


class PageError(Exception):
    """A 4xx with a message written for the worker; ``page`` picks a special template."""

    def __init__(self, status: int, message: str, page: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.page = page


def wants_json(request: Request) -> bool:
    if request.url.path.startswith("/api/"):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def error_response(
    request: Request, status: int, message: str, page: str | None = None
) -> Response:
    # Messages are written in English and looked up in the study language's catalog
    # (webapp.http.i18n); one built with values in it stays English.
    message = gettext(request, message)
    if wants_json(request):
        return JSONResponse({"detail": message}, status_code=status)
    # An area with a layout of its own (the dashboard, for a logged-in admin) renders its
    # errors inside it; the app factory registers those renderers, so this floor never
    # imports the areas above it.
    for prefix, render_area_error in getattr(request.app.state, "error_renderers", {}).items():
        if request.url.path.startswith(prefix):
            area_response: Response | None = render_area_error(request, status, message)
            if area_response is not None:
                return area_response
    templates = request.app.state.templates
    template = "screenout.html" if page == "screenout" else "error.html"
    context: dict[str, Any] = {
        "status": status,
        "title": gettext(request, TITLES.get(status, N_("Something went wrong"))),
        "message": message,
    }
    if page == "screenout":
        context.update(screenout_context(request))
    return templates.TemplateResponse(request, template, context, status_code=status)  # type: ignore[no-any-return]


def screenout_context(request: Request) -> dict[str, Any]:
    from sqlmodel import Session

    from vsr_core.models import DEFAULT_STUDY_ID
    from vsr_core.studies.settings import load_study_config

    settings = request.app.state.settings
    study = getattr(request.state, "study", None)
    with Session(request.app.state.engine) as session:
        code = load_study_config(session, study.id if study else DEFAULT_STUDY_ID).screenout_code
    return {"code": code, "prolific_url": settings.prolific_completion_url.format(code=code)}


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = [str(x) for x in err.get("loc", ()) if x not in ("body", "query", "path", "form")]
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc)}: {msg}" if loc else msg)
    return CHECK_ANSWER + " " + "; ".join(parts)  # parts: pydantic's own (English) words


def install_error_handlers(
    app: FastAPI, area_renderers: Mapping[str, AreaErrorRenderer] | None = None
) -> None:
    app.state.error_renderers = dict(area_renderers or {})

    @app.exception_handler(PageError)
    async def _page_error(request: Request, exc: PageError) -> Response:
        return error_response(request, exc.status, exc.message, exc.page)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = exc.detail if isinstance(exc.detail, str) else TITLES.get(exc.status_code, "")
        response = error_response(request, exc.status_code, message)
        for key, value in (exc.headers or {}).items():
            response.headers[key] = value
        return response

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        message = _validation_message(exc).replace(CHECK_ANSWER, gettext(request, CHECK_ANSWER), 1)
        return error_response(request, 422, message)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(
            request,
            500,
            N_(
                "Sorry, something went wrong. Your earlier answers are saved; "
                "please reload the page in a moment."
            ),
        )
