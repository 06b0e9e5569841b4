"""Data quality: agreement statistics and the VSR paper's distributions (Figures 5-7)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response
from sqlmodel import Session

from vsr_core.qualification import pass_rates
from webapp.admin import charts, stats
from webapp.admin.cache import Computing
from webapp.admin.pages import admin_study, cached, cached_or_computing, render, study_config
from webapp.admin.roles import ViewerDep, requires_viewer
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])

SVG = "image/svg+xml"
CHARTS = ("relations", "concepts", "disagreement", "labels")


def _min_examples(total: int) -> int:
    # The paper plots relations with > 20 Examples; a young study shows every relation.
    return 20 if total >= 1000 else 0


def quality_data(request: Request, session: Session) -> dict[str, Any] | Computing:
    """The quality figures, or a Computing while they are first computed (a large study)."""
    study_id = admin_study(request).id
    cfg = study_config(session, study_id)

    def compute(s: Session) -> dict[str, Any]:
        relations = stats.relation_table(s, cfg, study_id)
        q = stats.quality(s, cfg, relations, study_id)
        q["relations"] = relations
        q["concepts"] = stats.concept_counts(s, study_id=study_id)
        q["frames"] = stats.frame_answers(s, study_id)
        q["negatives"] = stats.negatives_check(s, cfg, study_id)
        q["qualification"] = pass_rates(s, study_id, admin_study(request).definition)
        q["min_examples"] = _min_examples(q["examples"])
        q["keep_threshold"] = cfg.keep_threshold
        q["fit"] = stats.rule_fit(s, cfg, study_id)
        q["stamp"] = time.monotonic_ns()  # identifies this computation for the charts
        return q

    return cached_or_computing(
        request,
        session,
        ("quality", cfg.keep_threshold, cfg.keep_rule, cfg.votes_per_example),
        compute,
    )


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
