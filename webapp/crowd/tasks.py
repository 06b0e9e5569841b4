"""What every kind of crowd task shares: its lease strategy, its URL and how its pages render.

The tasks themselves (webapp.generate, webapp.validate) stand on this; the app factory
registers each task's strategy and preview in ``app.state``, so nothing here imports a task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from sqlmodel import Session

from vsr_core.models import ImagePair
from webapp.crowd.identity import csrf_token
from webapp.crowd.leases import LeaseStrategy
from webapp.http.errors import PageError
from webapp.http.i18n import N_

# What the MTurk preview shows of a task for one sample pair (None: the task has no preview).
TaskPreview = Callable[[Request, Session, ImagePair], dict[str, Any]]

KIND_TITLES = {"generate": N_("Write spatial captions"), "validate": N_("Check spatial captions")}


def strategy_for(request: Request, kind: str) -> LeaseStrategy:
    strategies: dict[str, LeaseStrategy] = request.app.state.strategies
    if kind not in strategies:
        raise PageError(404, "There is no such task in this study.")
    return strategies[kind]


def task_url(kind: str) -> str:
    return f"/{kind}"


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def page(templates: Any, request: Request, name: str, kind: str, **ctx: Any) -> Response:
    ctx.setdefault("kind", kind)
    ctx.setdefault("kind_title", KIND_TITLES.get(kind, kind))
    ctx.setdefault("csrf", csrf_token(request))
    return templates.TemplateResponse(request, name, ctx)  # type: ignore[no-any-return]


def task_previews(request: Request) -> Mapping[str, TaskPreview]:
    return getattr(request.app.state, "task_previews", {})
