"""Adjudication and label models: settle one Example from its page or many from the data
browser (vsr_core.adjudication); fit the label models the keep rule may use
(vsr_core.label_fit). Every settlement is in the audit trail."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import Response
from sqlalchemy import select
from sqlmodel import Session

from vsr_core import adjudication, label_fit
from vsr_core.models import Example
from webapp.admin import stats
from webapp.admin.auth import actor_of
from webapp.admin.pages import admin_study, back, check_admin_study, figure_cache, study_config
from webapp.admin.roles import ResearcherPostDep, requires_viewer
from webapp.http.deps import SessionDep
from webapp.http.inputs import DbId

log = logging.getLogger(__name__)
router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])

DECISION = "^(true|false|excluded|withdraw)$"
Reason = Annotated[str, Form(max_length=adjudication.MAX_REASON * 2)]
DONE = {
    "true": "settled as True",
    "false": "settled as False",
    "excluded": "excluded from the dataset",
    "withdraw": "no longer adjudicated",
}


def _reopen(session: Session, example_ids: list[int], study_id: int) -> None:
    """A withdrawn settlement gives the Example back to the validation queue's own rule."""
    from webapp.validate.rules import decision_state

    config = study_config(session, study_id)
    for eid in example_ids:
        ex = session.get(Example, eid)
        if ex is None or adjudication.current(session, eid) is not None:
            continue
        target = ex.target_votes or config.votes_per_example
        ex.queue_settled, ex.queue_open = decision_state(
            ex.queue_agree, ex.queue_votes, target, config
        )
        session.add(ex)
    session.commit()


def _settle(
    request: Request,
    session: Session,
    admin: ResearcherPostDep,
    ids: list[int],
    decision: str,
    reason: str,
) -> int:
    study_id = admin_study(request).id
    try:
        changed = adjudication.settle(
            session, actor_of(admin), ids, study_id=study_id, decision=decision, reason=reason
        )
    except adjudication.AdjudicationError as exc:
        session.rollback()
        raise HTTPException(status_code=exc.status, detail=str(exc)) from None
    if decision == adjudication.WITHDRAW:
        _reopen(session, ids, study_id)
    log.info("admin %s adjudicated %s Examples (%s)", admin.user_id, changed, decision)
    figure_cache(request).clear()
    return changed


@router.post("/examples/{example_id}/adjudicate", include_in_schema=False)
def adjudicate_one(
    example_id: DbId,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    decision: Annotated[str, Form(pattern=DECISION)],
    reason: Reason = "",
) -> Response:
    example = session.get(Example, example_id)
    if example is None:
        raise HTTPException(status_code=404, detail=f"There is no Example #{example_id}.")
    check_admin_study(request, session, f"Example #{example_id}", example.study_id)
    changed = _settle(request, session, admin, [example_id], decision, reason)
    message = f"Example #{example_id} {DONE[decision]}." if changed else "Nothing changed."
    return back(f"/admin/examples/{example_id}", message)


@router.post("/data/adjudicate", include_in_schema=False)
async def adjudicate_many(
    request: Request, admin: ResearcherPostDep, session: SessionDep
) -> Response:
    """Settle the Examples ticked in the data browser (``ids``), or every Example matching its
    filter (``scope=filter`` with the filter's fields and ``expected``: the count the admin
    confirmed; a different count now means the data changed, and nothing is settled)."""
    form = await request.form()
    decision = str(form.get("decision", ""))
    reason = str(form.get("reason", ""))[: adjudication.MAX_REASON * 2]
    if decision not in DONE:
        raise HTTPException(status_code=400, detail="Choose a decision: True, False or excluded.")
    study_id = admin_study(request).id
    if form.get("scope") == "filter":
        try:
            filters = stats.parse_filters(form)
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        ea, conds = stats.example_filters(
            study_config(session, study_id), study_id=study_id, **filters
        )
        ids = [int(i) for (i,) in session.connection().execute(select(ea.c.id).where(*conds))]
        try:
            expected = int(str(form.get("expected", "")))
        except ValueError:
            raise HTTPException(
                status_code=400, detail="Confirm how many Examples the filter matches."
            ) from None
        if expected != len(ids):
            raise HTTPException(
                status_code=409,
                detail=f"The filter now matches {len(ids):,} Examples, not the {expected:,} you "
                "confirmed: nothing was settled. Look at the list again and confirm.",
            )
    else:
        raw = form.getlist("ids")
        if len(raw) > adjudication.MAX_BULK:
            raise HTTPException(status_code=400, detail="Too many Examples ticked at once.")
        try:
            ids = [int(str(v)) for v in raw if 0 < int(str(v)) < 2**31]
        except ValueError:
            raise HTTPException(status_code=400, detail="Example ids must be numbers.") from None
        if not ids:
            raise HTTPException(status_code=400, detail="Tick at least one Example.")
    changed = _settle(request, session, admin, ids, decision, reason)
    next_url = str(form.get("next") or "/admin/data")
    if not next_url.startswith("/admin/data") or "//" in next_url or "\\" in next_url:
        next_url = "/admin/data"
    return back(next_url, f"{changed:,} of {len(ids):,} Examples {DONE[decision]}.")


@router.post("/label-models/fit", include_in_schema=False)
def fit_label_models(request: Request, admin: ResearcherPostDep, session: SessionDep) -> Response:
    """Fit Dawid-Skene and MACE on the study's votes now (seconds on the VSR release)."""
    study_id = admin_study(request).id
    try:
        fits = label_fit.fit_study(session, study_id, actor=actor_of(admin))
    except label_fit.LabelFitError as exc:
        session.rollback()
        raise HTTPException(status_code=400, detail=str(exc)) from None
    log.info("admin %s fitted label models of study %s", admin.user_id, study_id)
    figure_cache(request).clear()
    done = ", ".join(f"{f.model} on {f.examples:,} Examples" for f in fits)
    return back("/admin/settings#label-models", f"Label models fitted: {done}.")
