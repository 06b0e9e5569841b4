"""Overview: how far the collection is, with numbers that refresh without a reload."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from sqlmodel import Session

from webapp.admin import charts, figures, stats
from webapp.admin.pages import admin_study, figure, render, study_config
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
    the background after new votes or Examples; ``counted_at`` says when; on a large study
    counted the first time in the background too, ``computing_seconds`` meanwhile), the
    rest now."""
    study_id = admin_study(request).id
    cfg = study_config(session, study_id)
    counted = figure(request, session, figures.overview_counts(study_id, cfg), pending=_counting)
    return stats.overview(session, cfg, study_id, counted)


def _counting(seconds: float) -> dict[str, Any]:
    """The overview's counts while they are first computed: none yet, and for how long."""
    return {
        "examples": 0,
        "examples_by_origin": {},
        "votes": 0,
        "decided": 0,
        "undecided": 0,
        "voted": 0,
        "unvoted": 0,
        "kept": 0,
        "rejected": 0,
        "excluded": 0,
        "adjudicated": 0,
        "by_model": 0,
        "keep_rule": "",
        "fit": None,
        "provisional": 0,
        "skipped_annotations": 0,
        "machine_negatives": {"examples": 0, "voted": 0, "rejected": 0, "rate": None},
        "workers": 0,
        "workers_blocked": 0,
        "workers_flagged": 0,
        "counted_at": None,
        "computing_seconds": round(seconds, 1),
    }


@router.get("/charts/throughput.svg", include_in_schema=False)
def throughput_svg(request: Request, session: SessionDep) -> Response:
    # A chart no one has drawn yet is drawn in the background (a pass over every vote).
    chart = figures.throughput(admin_study(request).id)
    body = figure(request, session, chart, pending=charts.computing_chart)
    return Response(body, media_type=SVG, headers={"Cache-Control": "no-store"})
