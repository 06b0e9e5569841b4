"""Bursts of new identities per client address; block a burst's workers in one step."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import Response

from webapp.admin.auth import actor_of
from webapp.admin.bursts import cut_burst, recent_bursts
from webapp.admin.pages import admin_study, back, figure_cache, render
from webapp.admin.roles import ResearcherPostDep, ViewerDep, requires_viewer
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])
log = logging.getLogger(__name__)


@router.get("/bursts", include_in_schema=False)
def bursts_page(request: Request, admin: ViewerDep, session: SessionDep) -> Response:
    settings = request.app.state.settings
    return render(
        request,
        admin,
        "bursts.html",
        "bursts",
        bursts=recent_bursts(session, admin_study(request).id),
        per_address=settings.new_workers_per_address,
        per_study=settings.new_workers_per_study,
        window_minutes=settings.rate_window_seconds // 60,
    )


@router.post("/bursts/cut", include_in_schema=False)
def cut(
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    address: Annotated[str, Form(min_length=1, max_length=200)],
) -> Response:
    blocked, released = cut_burst(
        session,
        address,
        getattr(request.app.state, "strategies", {}),
        actor=actor_of(admin),
        study_id=admin_study(request).id,
    )
    log.info(
        "admin %s cut the burst from %r: %s workers blocked, %s leases returned",
        admin.user_id,
        address,
        blocked,
        released,
    )
    figure_cache(request).clear()
    return back(
        "/admin/bursts",
        f"{blocked} worker(s) first seen from {address} blocked; {released} leased item(s) "
        "returned to the pool.",
    )
