"""Crowd platforms for the chosen study: create and publish (with the effective hourly pay
next to the platform's minimum), sync submissions, plan approve/reject/bonus, preview the
plan with counts and money, apply it after a confirmation, and the log of every call.

The platform study is chosen with ``?ps=<id>``, never ``?study=`` (the study switcher's).
Tokens come from the environment (webapp.platforms.clients) and are never shown.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Path, Query, Request
from fastapi.responses import Response
from sqlmodel import Session, col, func, select

from vsr_core.audit import Actor
from vsr_core.limits import INT32_MAX
from vsr_core.models import (
    PlatformAction,
    PlatformActionKind,
    PlatformActionState,
    PlatformCall,
    PlatformStudy,
    Study,
)
from webapp.admin.auth import actor_of
from webapp.admin.pages import admin_study, back, figure_cache, render
from webapp.admin.roles import OwnerPostDep, ViewerDep, requires_viewer
from webapp.http.deps import SessionDep
from webapp.http.inputs import DbId
from webapp.platforms import drafts, settlement
from webapp.platforms import engine as eng
from webapp.platforms.base import PlatformError
from webapp.platforms.clients import NAMES, client_for

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])
log = logging.getLogger(__name__)
CALLS_PER_PAGE = 25
SUBMISSIONS_SHOWN = 500


def _studies(request: Request, session: Session) -> list[PlatformStudy]:
    return list(
        session.exec(
            select(PlatformStudy)
            .where(PlatformStudy.study_id == admin_study(request).id)
            .order_by(col(PlatformStudy.id).desc())
        )
    )


def _own(request: Request, session: Session, ps: int) -> PlatformStudy:
    """The platform study, if it recruits for the admin's chosen study (else 404)."""
    row = session.get(PlatformStudy, ps)
    if row is None or row.study_id != admin_study(request).id:
        raise HTTPException(404, f"No platform study {ps} in this study.")
    return row


def _url(ps: int | None) -> str:
    return f"/admin/platform?ps={ps}" if ps else "/admin/platform"


def _planned(session: Session, row: PlatformStudy) -> list[PlatformAction]:
    return list(
        session.exec(
            select(PlatformAction)
            .where(
                PlatformAction.platform_study_id == row.id,
                PlatformAction.state == PlatformActionState.planned,
            )
            .order_by(col(PlatformAction.id))
        )
    )


def fingerprint(actions: list[PlatformAction]) -> str:
    """Names the exact plan the admin confirmed: Apply refuses if it changed since."""
    text = ";".join(f"{a.id}:{a.kind}:{a.target}:{a.amount_cents}" for a in actions)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _preview(row: PlatformStudy, actions: list[PlatformAction]) -> dict[str, Any]:
    counts = Counter(a.kind for a in actions)
    bonus = sum(a.amount_cents or 0 for a in actions if a.kind == PlatformActionKind.bonus)
    reward = int(row.settings.get("reward_cents", 0)) * counts[PlatformActionKind.approve]
    return {
        "counts": dict(counts),
        "bonus_cents": bonus,
        "reward_cents": reward,
        "total_cents": bonus + reward,
        "fingerprint": fingerprint(actions),
    }


def _submissions(
    session: Session, row: PlatformStudy, rules: eng.Rules, actions: list[PlatformAction]
) -> list[dict[str, Any]]:
    """Each submission with the work in its own batches (``q``) and what the ledger credits
    it with (``paid``: the work it is paid for). A fixed number of statements, whatever
    the number of submissions (grouped queries, webapp.platforms.settlement)."""
    subs, work = settlement.work_by_submission(session, row, None, rules.keep_threshold)
    paid = settlement.paid_for(session, row)
    by_target: dict[str, list[PlatformAction]] = {}
    for a in actions:
        by_target.setdefault(a.target, []).append(a)
    return [
        {
            "sub": s,
            "q": work[s.id or 0].quality(),
            "paid": paid.get(s.id or 0),
            "money": settlement.money_line(
                paid.get(s.id or 0), work[s.id or 0].quality(), s.status
            ),
            "actions": by_target.get(s.external_id, []),
        }
        for s in subs[:SUBMISSIONS_SHOWN]
    ]


@router.get("/platform", include_in_schema=False)
def platform_page(
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    ps: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> Response:
    rows = _studies(request, session)
    row = _own(request, session, ps) if ps else (rows[0] if rows else None)
    ctx: dict[str, Any] = {
        "rows": rows,
        "row": row,
        "names": NAMES,
        "page": page,
        "pages": 1,
        "pays": {r.id: drafts.effective_pay(session, r) for r in rows},
    }
    if row is not None:
        rules = eng.rules_for(session, row)
        actions = list(
            session.exec(
                select(PlatformAction)
                .where(PlatformAction.platform_study_id == row.id)
                .order_by(col(PlatformAction.id))
            )
        )
        planned = [a for a in actions if a.state == PlatformActionState.planned]
        total = session.exec(
            select(func.count())
            .select_from(PlatformCall)
            .where(PlatformCall.platform_study_id == row.id)
        ).one()
        ctx |= {
            "subs": _submissions(session, row, rules, actions),
            "planned": planned,
            "steps": drafts.steps_from(row.state),
            "preview": _preview(row, planned),
            "rules": rules,
            "states": dict(Counter(a.state for a in actions)),
            "calls": session.exec(
                select(PlatformCall)
                .where(PlatformCall.platform_study_id == row.id)
                .order_by(col(PlatformCall.id).desc())
                .offset((page - 1) * CALLS_PER_PAGE)
                .limit(CALLS_PER_PAGE)
            ).all(),
            "pages": max(1, -(-int(total) // CALLS_PER_PAGE)),
        }
    return render(request, admin, "platform.html", "platform", **ctx)


def _run(request: Request, session: Session, row: PlatformStudy, what: str, actor: Actor) -> str:
    """One platform step with its calls logged and recorded in the audit trail (each step
    records itself where it commits); the message for the flash."""
    calls = eng.CallLog(row.platform, row.id)
    try:
        client = client_for(row.platform, calls)
        if what == "sync":
            if not drafts.confirm_create(session, client, row, actor=actor):
                return "Not synced: the study's create is not confirmed on the platform yet."
            released = eng.sync(
                session,
                client,
                row,
                getattr(request.app.state, "strategies", {}),
                calls,
                actor=actor,
            )
            figure_cache(request).clear()
            return f"Synced; {released} leased item(s) of gone participants released."
        if what == "publish":
            return f"Published: {drafts.publish(session, client, row, actor=actor).line()}."
        if what == "pause":
            drafts.pause(session, client, row, actor=actor)
            return "Paused."
        if what == "resume":
            drafts.resume(session, client, row, actor=actor)
            return "Resumed."
        counts = eng.apply(session, client, row, calls=calls, actor=actor)
        return f"Applied: {counts['done']} done, {counts['failed']} failed."
    except PlatformError as exc:
        return f"Not done: {exc}"
    finally:
        session.rollback()
        calls.save(session)


@router.post("/platform/create", include_in_schema=False)
def create(
    request: Request,
    admin: OwnerPostDep,
    session: SessionDep,
    platform: Annotated[str, Form(pattern="^(prolific|mturk)$")],
    kind: Annotated[str, Form(pattern="^(generate|validate)$")],
    reward_cents: Annotated[int, Form(ge=1, le=100_000)],
    places: Annotated[int, Form(ge=1, le=100_000)],
    title: Annotated[str, Form(max_length=200)] = "",
    expected_minutes: Annotated[str, Form(pattern="^[0-9]{0,4}$")] = "",
) -> Response:
    study = session.get(Study, admin_study(request).id)
    assert study is not None
    calls = eng.CallLog(platform)
    log.info("admin %s creates a %s %s study for study %s", admin.user_id, platform, kind, study.id)
    try:
        settings = drafts.new_settings(
            session,
            study,
            platform,
            kind,
            reward_cents=reward_cents,
            places=places,
            base_url=request.app.state.settings.base_url,
            title=title.strip(),
            estimated_minutes=min(int(expected_minutes), 24 * 60) or None
            if expected_minutes
            else None,
        )
        row = drafts.create(
            session,
            client_for(platform, calls),
            study,
            settings,
            on_row=calls.name_study,
            actor=actor_of(admin),
        )
        msg, ps = f"Created {platform} study {row.external_id} ({row.state}).", row.id
    except PlatformError as exc:
        msg, ps = f"Not created: {exc}", None
    finally:
        session.rollback()
        calls.save(session)
    return back(_url(ps), msg)


@router.post("/platform/{ps}/{what}", include_in_schema=False)
def act(
    request: Request,
    admin: OwnerPostDep,
    session: SessionDep,
    ps: DbId,
    what: Annotated[str, Path(max_length=16)],
    confirm: Annotated[str, Form(max_length=8)] = "",
    seen: Annotated[str, Form(max_length=64)] = "",
    bonus_cents_per_kept: Annotated[int | None, Form(ge=0, le=100_000)] = None,
    min_items: Annotated[int | None, Form(ge=0, le=100_000)] = None,
) -> Response:
    row = _own(request, session, ps)
    if what == "plan":
        rules = dict(row.settings.get("rules", {}))
        if bonus_cents_per_kept is not None:
            rules["bonus_cents_per_kept"] = bonus_cents_per_kept
        if min_items is not None:
            rules["min_items"] = min_items
        row.settings = {**row.settings, "rules": rules}
        session.add(row)
        added = eng.plan(session, row, eng.rules_for(session, row), actor=actor_of(admin))
        log.info(
            "admin %s planned %s new actions for platform study %s (study %s)",
            admin.user_id,
            len(added),
            row.id,
            row.study_id,
        )
        return back(_url(ps), f"Planned {len(added)} new action(s); nothing sent yet.")
    if what == "apply":
        planned = _planned(session, row)
        if confirm != "yes":
            return back(_url(ps), "Not applied: tick the confirmation first.")
        if seen != fingerprint(planned):
            return back(
                _url(ps), "Not applied: the plan changed since you looked at it; check it again."
            )
    elif what not in ("sync", *drafts.STEPS):
        raise HTTPException(404, "No such platform action.")
    log.info("admin %s: %s platform study %s (study %s)", admin.user_id, what, row.id, row.study_id)
    return back(_url(ps), _run(request, session, row, what, actor_of(admin)))
