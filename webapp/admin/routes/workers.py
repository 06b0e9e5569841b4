"""Workers: who does careful work; block / unblock / flag; one worker's history."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request
from fastapi.responses import Response
from sqlmodel import Session, col, select

from vsr_core import audit, label_fit, standing
from vsr_core.authenticity_db import approval_target, approved_flags, assess_workers
from vsr_core.models import Annotation, AuditKind, Example, ImagePair, Study, Vote, Worker
from vsr_core.qualification import outcomes
from vsr_core.roles import owns_every_study
from webapp.admin import actions, figures
from webapp.admin.auth import actor_of
from webapp.admin.cache import Computing
from webapp.admin.pages import (
    admin_study,
    back,
    figure,
    figure_cache,
    render,
    study_config,
)
from webapp.admin.roles import ResearcherPostDep, ViewerDep, requires_viewer
from webapp.http.deps import SessionDep
from webapp.http.inputs import DbId

log = logging.getLogger(__name__)

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])
PAGE = 50
ORDERS = figures.WORKER_ORDERS


def _worker(request: Request, session: Session, worker_id: int) -> Worker:
    """The worker, if they took part in the dashboard's study; a worker of other studies
    only is not this study's to see or act on (a 404, as for no worker at all)."""
    study = admin_study(request)
    worker = session.get(Worker, worker_id)
    if worker is None or not standing.is_member(session, worker_id, study.id):
        raise HTTPException(
            status_code=404, detail=f"There is no worker #{worker_id} in the study {study.slug}."
        )
    return worker


@router.get("/workers", include_in_schema=False)
def workers_page(
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    order: Annotated[str, Query(pattern="^(" + "|".join(ORDERS) + ")$")] = "votes",
    msg: str | None = None,
) -> Response:
    cfg = study_config(session, admin_study(request).id)
    rows, total, computing = _table(request, session, cfg, page, order)
    return render(
        request,
        admin,
        "workers.html",
        "workers",
        rows=rows,
        total=total,
        computing=computing,
        page=page,
        pages=max(1, -(-total // PAGE)),
        order=order,
        orders=ORDERS,
        msg=msg,
        cfg=cfg,
    )


@router.get("/api/workers.json")
def workers_json(
    request: Request,
    session: SessionDep,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    order: Annotated[str, Query(pattern="^(" + "|".join(ORDERS) + ")$")] = "votes",
) -> dict[str, Any]:
    cfg = study_config(session, admin_study(request).id)
    rows, total, computing = _table(request, session, cfg, page, order)
    # While the table in this order is first computed: no rows yet, and for how long.
    busy = None if computing is None else round(computing.seconds, 1)
    return {"total": total, "page": page, "workers": rows, "computing_seconds": busy}


def _held(session: Session, study_id: int, worker_id: int, assessed: Any) -> bool:
    """Whether their work waits for a person (as ``held_for_review`` decides it), from the
    cached assessment: flagged by a signal no one has cleared."""
    cleared = approved_flags(session, study_id, [worker_id]).get(worker_id, set())
    return bool(assessed.flagged) and not {str(f) for f in assessed.flags} <= cleared


def _totals(
    request: Request, session: Session, cfg: Any, study_id: int, worker_id: int
) -> list[dict[str, Any]] | Computing:
    """A worker's totals: their row of the Workers table when it is counted already (the
    warm-up counts it at start-up), with their pace (computed once, in the background on a
    large study); else their own figure."""
    table = figure_cache(request).peek(
        (study_id, figures.worker_table(study_id, cfg, figures.WORKER_ORDERS[0]).name)
    )
    rows = [] if not table or isinstance(table, Computing) else table[0]
    mine = [r for r in rows if r["id"] == worker_id]
    if mine:
        paced: list[dict[str, Any]] = figure(
            request,
            session,
            figures.worker_pace_of(study_id, cfg, mine[0]),
            pending=lambda _: _unpaced(mine),
        )
        return paced
    found: list[dict[str, Any]] | Computing = figure(
        request, session, figures.worker_totals(study_id, cfg, worker_id), pending=Computing
    )
    return found


def _unpaced(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page's rows while their pace is computed: no medians yet."""
    return [r | {"median_vote_s": None, "median_caption_s": None, "too_fast": None} for r in rows]


def _table(
    request: Request, session: Session, cfg: Any, page: int, order: str
) -> tuple[list[dict[str, Any]], int, Computing | None]:
    """One page of the chosen study's worker table. The whole table in this order is cached
    (it aggregates every vote of the study), so any page, the last included, is a slice of
    it; each worker's pace is read for that page's workers only, and cached too. A table
    in an order no one asked for yet is computed in the background: no rows meanwhile, and
    the Computing that says for how long."""
    study = admin_study(request)
    study_id = study.id
    table = figure(request, session, figures.worker_table(study_id, cfg, order), pending=Computing)
    if isinstance(table, Computing):
        return [], 0, table
    everyone, total = table
    rows = everyone[(page - 1) * PAGE : page * PAGE]
    # The busiest workers' pace reads all their votes (640,000 for the first page at 100x):
    # on a large study the page shows – for it until it is computed in the background.
    paced = figure(
        request,
        session,
        figures.worker_pace(study_id, cfg, order, page, rows),
        pending=lambda _: _unpaced(rows),
    )
    # Per worker of the page: the qualification outcome per task, and each label model's
    # estimate at its last fit (vsr_core.label_fit).
    found = outcomes(session, study.id, study.definition, [int(r["id"]) for r in paced])
    skills = label_fit.worker_skills(session, study_id)
    return (
        [
            r
            | {
                "qualification": {
                    k: str(v) for k, v in sorted(found.get(int(r["id"]), {}).items())
                },
                "model_skill": skills.get(int(r["id"]), {}),
            }
            for r in paced
        ],
        total,
        None,
    )


@router.get("/workers/{worker_id}", include_in_schema=False)
def worker_page(
    worker_id: DbId,
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    msg: str | None = None,
) -> Response:
    # The worker's work and standing in the chosen study (vsr_core.standing).
    worker = _worker(request, session, worker_id)
    study_id = admin_study(request).id
    cfg = study_config(session, study_id)
    # Their totals through the figure cache, like the Workers table: a pass over all their
    # votes (12,805 for the busiest at 100x, ~30 ms and growing with their history); on a
    # large study computed in the background the first time (the page says so meanwhile).
    summary = _totals(request, session, cfg, study_id, worker_id)
    counting = summary if isinstance(summary, Computing) else None
    # Their authenticity evidence reads all their votes too: through the cache, and on a
    # large study computed in the background the first time (the page says so meanwhile).
    found = figure(
        request, session, figures.worker_evidence(study_id, worker_id), pending=Computing
    )
    evidence = None if isinstance(found, Computing) else found
    evidence_counting = found if isinstance(found, Computing) else None
    votes = session.exec(
        select(Vote, Example)
        .join(Example, col(Example.id) == Vote.example_id)
        .where(Vote.worker_id == worker_id, Example.study_id == study_id)
        .order_by(col(Vote.created_at).desc(), col(Vote.id).desc())
        .limit(100)
    ).all()
    captions = session.exec(
        select(Annotation)
        .join(ImagePair, col(ImagePair.id) == Annotation.pair_id)
        .where(Annotation.worker_id == worker_id, ImagePair.study_id == study_id)
        .order_by(col(Annotation.created_at).desc(), col(Annotation.id).desc())
        .limit(100)
    ).all()
    return render(
        request,
        admin,
        "worker.html",
        "workers",
        worker=worker,
        standing=standing.standing(session, worker, study_id),
        everywhere=owns_every_study(session, admin.user_id),
        summary=summary[0] if summary and not isinstance(summary, Computing) else None,
        counting=counting,
        votes=votes,
        captions=captions,
        batches=actions.open_batches(session, worker_id, study_id),
        authenticity=None if evidence is None else evidence[0],
        batch_authenticity={} if evidence is None else evidence[1],
        evidence_counting=evidence_counting,
        held=evidence is not None and _held(session, study_id, worker_id, evidence[0]),
        msg=msg,
    )


@router.post("/workers/{worker_id}/block", include_in_schema=False)
def block(
    worker_id: DbId,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    reason: Annotated[str, Form(max_length=500)] = "",
    next: Annotated[str, Form(max_length=300)] = "",
) -> Response:
    """Block the worker in the dashboard's study; their work in other studies goes on."""
    study = admin_study(request)
    released = actions.block_in_study(
        session,
        _worker(request, session, worker_id),
        reason or None,
        getattr(request.app.state, "strategies", {}),
        actor=actor_of(admin),
        study_id=study.id,
    )
    log.info("admin %s blocked worker %s; %s leases returned", admin.user_id, worker_id, released)
    figure_cache(request).clear()
    return back(
        _next(next, worker_id),
        f"Worker #{worker_id} blocked in {study.slug}; {released} leased item(s) returned to "
        "the pool.",
    )


@router.post("/workers/{worker_id}/unblock", include_in_schema=False)
def unblock(
    worker_id: DbId,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    next: Annotated[str, Form(max_length=300)] = "",
) -> Response:
    study = admin_study(request)
    worker = _worker(request, session, worker_id)
    actions.unblock_in_study(session, worker, actor=actor_of(admin), study_id=study.id)
    figure_cache(request).clear()
    still = (
        " (still blocked in every study: lifting that is a separate act)" if worker.blocked else ""
    )
    return back(_next(next, worker_id), f"Worker #{worker_id} unblocked in {study.slug}{still}.")


@router.post("/workers/{worker_id}/everywhere", include_in_schema=False)
def block_everywhere(
    worker_id: DbId,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    blocked: Annotated[bool, Form()] = True,
    reason: Annotated[str, Form(max_length=500)] = "",
    next: Annotated[str, Form(max_length=300)] = "",
) -> Response:
    """Block (or unblock) the worker in every study: only an admin who owns every study."""
    worker = _worker(request, session, worker_id)
    if not owns_every_study(session, admin.user_id):
        raise HTTPException(
            status_code=403,
            detail="Blocking a worker in every study needs the owner role in every study; "
            "block them in this study instead.",
        )
    every = [s for s in session.exec(select(Study.id).order_by(col(Study.id))).all()]
    released = actions.set_everywhere(
        session,
        worker,
        blocked,
        reason or None,
        getattr(request.app.state, "strategies", {}),
        actor=actor_of(admin),
        studies=[s for s in every if s is not None and standing.is_member(session, worker_id, s)],
    )
    figure_cache(request).clear()
    done = (
        f"blocked in every study; {released} leased item(s) returned"
        if blocked
        else ("unblocked in every study (blocks made in one study stay)")
    )
    return back(_next(next, worker_id), f"Worker #{worker_id} {done}.")


@router.post("/workers/{worker_id}/flag", include_in_schema=False)
def flag(
    worker_id: DbId,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    flagged: Annotated[bool, Form()] = True,
    reason: Annotated[str, Form(max_length=500)] = "",
    next: Annotated[str, Form(max_length=300)] = "",
) -> Response:
    actions.set_flag(
        session,
        _worker(request, session, worker_id),
        flagged,
        reason,
        actor=actor_of(admin),
        study_id=admin_study(request).id,
    )
    state = "flagged" if flagged else "unflagged"
    return back(_next(next, worker_id), f"Worker #{worker_id} {state}.")


@router.post("/workers/{worker_id}/authenticity-approve", include_in_schema=False)
def authenticity_approve(
    worker_id: DbId,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
) -> Response:
    """A person looked at the evidence and vouches for the worker: the flags shown now no
    longer hold their submissions (new kinds of evidence would again). Audited."""
    worker = _worker(request, session, worker_id)
    study_id = admin_study(request).id
    found = assess_workers(session, study_id, [worker_id])[worker_id]
    audit.record(
        session,
        actor_of(admin),
        AuditKind.authenticity_approve,
        study_id=study_id,
        target=approval_target(worker_id),
        change={"flags": [str(f) for f in found.flags], "evidence": found.evidence},
    )
    session.commit()
    assert worker.id is not None
    return back(_next("", worker_id), f"Worker #{worker_id} approved after review.")


def _next(url: str, worker_id: int) -> str:
    if url.startswith("/admin/workers") and "//" not in url:
        return url
    return f"/admin/workers/{worker_id}"
