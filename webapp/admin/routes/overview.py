"""Overview: how far the collection is, with numbers that refresh without a reload."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from sqlmodel import Session

from webapp.admin import charts, stats
from webapp.admin.pages import admin_study, cached, render, study_config
from webapp.admin.roles import ViewerDep, requires_viewer
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])

SVG = "image/svg+xml"


@router.get("", include_in_schema=False)
def overview_page(request: Request, admin: ViewerDep, session: SessionDep) -> Response:
    study_id = admin_study(request).id
    cfg = study_config(session, study_id)
    return render(
        request, admin, "overview.html", "overview", o=_overview(request, session), cfg=cfg
    )


@router.get("/api/overview.json")
def overview_json(request: Request, session: SessionDep) -> dict[str, Any]:
    """The chosen study's figures (``?study=<slug>`` or the dashboard's choice)."""
    return _overview(request, session)


def _overview(request: Request, session: Session) -> dict[str, Any]:
    """The overview: the counts over every Example through the figure cache (recounted in
    the background after new votes or Examples; ``counted_at`` says when), the rest now."""
    study_id = admin_study(request).id
    cfg = study_config(session, study_id)
    counted = cached(
        request,
        session,
        ("overview", cfg.keep_threshold, cfg.votes_per_example),
        lambda s: stats.counted_figures(s, cfg, study_id),
    )
    return stats.overview(session, cfg, study_id, counted)


@router.get("/charts/throughput.svg", include_in_schema=False)
def throughput_svg(request: Request, session: SessionDep) -> Response:
    study_id = admin_study(request).id

    def draw(s: Session) -> bytes:
        t = stats.throughput(s, study_id=study_id)
        return charts.throughput_chart(t["hours"], t["votes"], t["captions"])

    # A chart no one has drawn yet is drawn in the background (a pass over every vote).
    body = cached(request, session, "throughput", draw, pending=charts.computing_chart)
    return Response(body, media_type=SVG, headers={"Cache-Control": "no-store"})
