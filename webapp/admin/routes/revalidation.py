"""Re-validation of an imported release: open a sample for fresh votes, and the report that
compares the fresh judgements with the original ones (vsr_core.revalidation)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, ValidationError
from sqlmodel import Session

from vsr_core.revalidation import MAX_SAMPLE, RevalidationError, open_round, report
from webapp.admin import figures
from webapp.admin.auth import actor_of
from webapp.admin.forms import FORM_LEVEL, field_errors
from webapp.admin.pages import admin_study, back, figure, figure_cache, render, study_config
from webapp.admin.roles import ResearcherPostDep, ViewerDep, requires_viewer
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])
log = logging.getLogger(__name__)
ROUND_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,31}$"


class OpenForm(BaseModel):
    sample: int = Field(100, ge=1, le=MAX_SAMPLE)
    seed: int = Field(0, ge=0, le=2**31 - 1)
    votes: int = Field(3, ge=1, le=50)
    round_name: str = Field("r1", pattern=ROUND_PATTERN)
    relations: list[str] = Field(default_factory=list, max_length=100)


@router.get("/revalidation", include_in_schema=False)
def revalidation_page(
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    round: Annotated[str | None, Query(pattern=ROUND_PATTERN)] = None,  # noqa: A002
    msg: str | None = None,
) -> Response:
    return _page(request, admin, session, round, msg=msg)


@router.get("/api/revalidation.json")
def revalidation_json(
    request: Request,
    session: SessionDep,
    round: Annotated[str | None, Query(pattern=ROUND_PATTERN)] = None,  # noqa: A002
) -> dict[str, Any]:
    return _report(request, session, round)


def _report(request: Request, session: Session, round_name: str | None) -> dict[str, Any]:
    """The round's report; empty in a study other than the default one (imported releases
    and their rounds live there, as `vsr revalidate` says)."""
    study = admin_study(request)
    if not study.is_default:
        return {"round": None, "rounds": [], "examples": 0}
    return report(session, study_config(session, study.id), round_name)


def _default_only(request: Request) -> str | None:
    study = admin_study(request)
    if study.is_default:
        return None
    return (
        f"Re-validation works on the default study's imported data, not {study.slug}: "
        "choose the default study in the switcher."
    )


def _page(
    request: Request,
    admin: Any,
    session: Session,
    round_name: str | None,
    *,
    msg: str | None = None,
    errors: dict[str, str] | None = None,
    typed: dict[str, Any] | None = None,
    status: int = 200,
) -> Response:
    study_id = admin_study(request).id
    cfg = study_config(session, study_id)
    r = _report(request, session, round_name)
    return render(
        request,
        admin,
        "revalidation.html",
        "revalidation",
        status_code=status,
        r=r,
        rounds=r["rounds"],  # the report has read them already (a scan of the Examples)
        # The data browser's cached choices of the chosen study: four DISTINCT scans of the
        # Example table took ~200 ms at 10x on every view of this page.
        # On a large study read in the background the first time (none offered meanwhile).
        relations=figure(
            request,
            session,
            figures.choices(study_id),
            pending=lambda _: {"relations": [], "concepts": [], "origins": []},
        )["relations"],
        values={"votes": cfg.votes_per_example, **(typed or {})},
        errors=errors or {},
        msg=msg,
    )


@router.post("/revalidation", include_in_schema=False)
async def open_revalidation(
    request: Request, admin: ResearcherPostDep, session: SessionDep
) -> Response:
    form = await request.form()
    typed: dict[str, Any] = {
        k: str(form.get(k, "")).strip() for k in ("sample", "seed", "votes", "round_name")
    }
    typed["relations"] = [str(v) for v in form.getlist("relations")]
    try:
        params = OpenForm(**{k: v for k, v in typed.items() if v not in ("", [])})
    except ValidationError as exc:
        return _page(
            request, admin, session, None, errors=field_errors(exc), typed=typed, status=422
        )
    elsewhere = _default_only(request)
    if elsewhere is not None:
        return _page(
            request, admin, session, None, errors={FORM_LEVEL: elsewhere}, typed=typed, status=422
        )
    try:
        opened = open_round(
            session,
            sample=params.sample,
            seed=params.seed,
            config=study_config(session, admin_study(request).id),
            relations=params.relations,
            votes=params.votes,
            round_name=params.round_name,
            actor=actor_of(admin),
        )
    except RevalidationError as exc:
        session.rollback()
        return _page(
            request, admin, session, None, errors={FORM_LEVEL: str(exc)}, typed=typed, status=422
        )
    log.info("admin %s opened a re-validation round: %s", admin.user_id, opened.line())
    figure_cache(request).clear()
    return back(
        f"/admin/revalidation?round={opened.round}",
        opened.line()[:1].upper() + opened.line()[1:] + ".",
    )
