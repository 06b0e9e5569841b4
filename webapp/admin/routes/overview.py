"""Overview: how far the collection is, with numbers that refresh without a reload."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from sqlmodel import Session

from webapp.admin import charts, stats
from webapp.admin.auth import AdminDep, current_admin_session
from webapp.admin.pages import cached, render, study_config
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(current_admin_session)])

SVG = "image/svg+xml"


@router.get("", include_in_schema=False)
def overview_page(request: Request, admin: AdminDep, session: SessionDep) -> Response:
    cfg = study_config(session)
    data = stats.overview(session, cfg)
    return render(request, admin, "overview.html", "overview", o=data, cfg=cfg)


@router.get("/api/overview.json")
def overview_json(session: SessionDep) -> dict[str, Any]:
    return stats.overview(session, study_config(session))


@router.get("/charts/throughput.svg", include_in_schema=False)
def throughput_svg(request: Request, session: SessionDep) -> Response:
    def draw(s: Session) -> bytes:
        t = stats.throughput(s)
        return charts.throughput_chart(t["hours"], t["votes"], t["captions"])

    body = cached(request, session, "throughput", draw)
    return Response(body, media_type=SVG, headers={"Cache-Control": "no-store"})
