"""The front page: what this site is, for a visitor who arrives without a study link."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse

from webapp.http.deps import TemplatesDep

FAVICON = Path(__file__).resolve().parent.parent / "static" / "favicon.svg"

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def home(request: Request, templates: TemplatesDep) -> HTMLResponse:
    return templates.TemplateResponse(request, "home.html", {})


@router.get("/favicon.ico", include_in_schema=False)
def favicon() -> FileResponse:
    """Browsers ask for /favicon.ico on every page (admin pages have no icon link); without
    an answer each page logs a 404 in the console. The icon is an SVG, said so in its type."""
    return FileResponse(
        FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"}
    )
