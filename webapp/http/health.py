"""Liveness/readiness probe used by docker-compose's health check."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from webapp.http.deps import SessionDep

router = APIRouter()


@router.get("/healthz", tags=["ops"])
def healthz(session: SessionDep) -> dict[str, str]:
    session.exec(text("select 1"))  # type: ignore[call-overload]
    return {"status": "ok"}
