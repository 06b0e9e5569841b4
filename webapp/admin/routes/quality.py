"""Data quality: agreement statistics and the VSR paper's distributions (Figures 5-7)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response
from sqlmodel import Session

from webapp.admin import charts, figures
from webapp.admin.cache import Computing
from webapp.admin.pages import admin_study, cached, figure, render, study_config
from webapp.admin.roles import ViewerDep, requires_viewer
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])

SVG = "image/svg+xml"
CHARTS = ("relations", "concepts", "disagreement", "labels")


def quality_data(request: Request, session: Session) -> dict[str, Any] | Computing:
    """The quality figures, or a Computing while they are first computed (a large study)."""
    study = admin_study(request)
    cfg = study_config(session, study.id)
    q: dict[str, Any] | Computing = figure(
        request, session, figures.quality(study, cfg), pending=Computing
    )
    return q


@router.get("/quality", include_in_schema=False)
def quality_page(request: Request, admin: ViewerDep, session: SessionDep) -> Response:
    q = quality_data(request, session)
    if isinstance(q, Computing):
        what = "the data quality figures"
        return render(
            request,
            admin,
            "computing.html",
            "quality",
            title="Data quality",
            what=what,
            computing=q,
        )
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for row in q["relations"]:
        by_cat.setdefault(row["category"], []).append(row)
    return render(request, admin, "quality.html", "quality", q=q, by_cat=by_cat, charts=CHARTS)


@router.get("/api/quality.json")
def quality_json(request: Request, session: SessionDep) -> dict[str, Any]:
    q = quality_data(request, session)
    # While first computed: for how long, and no figures.
    return {"computing_seconds": round(q.seconds, 1)} if isinstance(q, Computing) else q


@router.get("/charts/{name}.svg", include_in_schema=False)
def quality_chart(name: str, request: Request, session: SessionDep) -> Response:
    if name not in CHARTS:
        raise HTTPException(status_code=404, detail=f"no chart called {name!r}")
    q = quality_data(request, session)
    if isinstance(q, Computing):
        return Response(charts.computing_chart(q.seconds), media_type=SVG)

    def draw(_: Session) -> bytes:
        if name == "relations":
            return charts.relation_chart(q["relations"])
        if name == "concepts":
            return charts.concept_chart(q["concepts"])
        if name == "disagreement":
            return charts.disagreement_chart(q["relations"], q["min_examples"])
        return charts.label_chart(q["label_balance"])

    # Keyed by the figures it draws, so a chart never lags behind its numbers.
    body = cached(request, session, ("chart", name, q["stamp"]), draw)
    return Response(body, media_type=SVG, headers={"Cache-Control": "no-store"})
