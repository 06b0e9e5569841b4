"""All admin dashboard routes under /admin, as one router for the app factory."""

from __future__ import annotations

from fastapi import APIRouter

from webapp.routes import (
    admin_auth,
    admin_bursts,
    admin_data,
    admin_overview,
    admin_pipeline,
    admin_quality,
    admin_revalidation,
    admin_settings,
    admin_workers,
)

router = APIRouter()
# Order matters once: /admin/charts/throughput.svg before /admin/charts/{name}.svg.
for sub in (
    admin_auth,
    admin_overview,
    admin_quality,
    admin_workers,
    admin_bursts,
    admin_data,
    admin_settings,
    admin_pipeline,
    admin_revalidation,
):
    router.include_router(sub.router)
