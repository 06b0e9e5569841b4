"""All admin dashboard routes under /admin (one module per page), as one router for the app."""

from __future__ import annotations

from fastapi import APIRouter

from webapp.admin.routes import (
    adjudication,
    audit,
    auth,
    bursts,
    data,
    members,
    overview,
    pipeline,
    platform,
    quality,
    revalidation,
    settings,
    workers,
)

router = APIRouter()
# Order matters once: /admin/charts/throughput.svg before /admin/charts/{name}.svg.
for sub in (
    auth,
    overview,
    quality,
    workers,
    bursts,
    data,
    adjudication,
    settings,
    pipeline,
    revalidation,
    platform,
    audit,
    members,
):
    router.include_router(sub.router)
