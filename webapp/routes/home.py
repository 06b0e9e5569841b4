"""The front page: what this site is, for a visitor who arrives without a study link."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from webapp.deps import TemplatesDep

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def home(request: Request, templates: TemplatesDep) -> HTMLResponse:
    return templates.TemplateResponse(request, "home.html", {})
