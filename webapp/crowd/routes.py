"""Crowd entry, consent, instructions, batch start and the completion / screen-out pages.

Shared by every kind of work: ``/start/{kind}`` where kind is ``generate`` or ``validate``;
the task itself lives at ``/{kind}``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import Response
from sqlmodel import Session

from vsr_core import standing
from vsr_core.models import Batch, BatchStatus, ImagePair, PairStatus, Worker
from vsr_core.qualification import QualState
from vsr_core.qualification import status as qualification_status
from vsr_core.studies.context import StudyContext
from vsr_core.studies.settings import DEFAULT_CONSENT, load_study_config
from webapp.crowd import approval, batches
from webapp.crowd.consent import render_consent, render_text
from webapp.crowd.examples import available as example_photos
from webapp.crowd.identity import (
    CurrentWorker,
    check_csrf,
    check_resume,
    consent_time,
    entry_for,
    has_consented,
    is_new_identity,
    login,
    parse_entry,
    record_consent,
    resolve_worker,
    same_platform_session,
)
from webapp.crowd.tasks import page, redirect, strategy_for, task_previews, task_url
from webapp.http import rate_limits
from webapp.http.deps import SessionDep, SettingsDep, TemplatesDep
from webapp.http.errors import PageError, screenout_context
from webapp.http.i18n import N_, gettext
from webapp.http.study import current_study

router = APIRouter(tags=["entry"])


def _check_roles(worker: Worker, kind: str) -> None:
    if worker.roles and kind not in worker.roles:
        raise PageError(403, "Your invitation is not for this task.")


CLOSED = N_("This study is closed: it takes no new participants or batches.")

# The daily limit in the task's words, with the moment it resets.
DAILY_LIMIT = {
    "generate": N_(
        "You have done as many caption-writing batches as this study allows in 24 hours "
        "({per_day} per person). You can start the next one at {time}. Thank you!"
    ),
    "validate": N_(
        "You have done as many caption-checking batches as this study allows in 24 hours "
        "({per_day} per person). You can start the next one at {time}. Thank you!"
    ),
}


def daily_limit_message(request: Request, kind: str, per_day: int, reset: datetime) -> str:
    """The worker's language's sentence saying the limit is used up and when it resets."""
    text = gettext(request, DAILY_LIMIT.get(kind, DAILY_LIMIT["generate"]))
    return text.format(per_day=per_day, time=f"{reset:%Y-%m-%d %H:%M} UTC")


def _refuse_if_limited(request: Request, session: Session, worker: Worker, kind: str) -> None:
    """A 409 naming the reset time when the worker may open no new batch of this kind now:
    checked on entry, before the consent and instructions, not after them."""
    study = current_study(request)
    assert worker.id is not None
    config = load_study_config(session, study.id)
    reset = batches.next_batch_at(session, worker.id, kind, config, study.id)
    if reset is not None:
        per_day = batches.limits(config, kind)[2]
        raise PageError(409, daily_limit_message(request, kind, per_day, reset))


@router.get("/start/{kind}", summary="Entry from a Prolific, MTurk or invite link")
def start(
    kind: str,
    request: Request,
    session: SessionDep,
    templates: TemplatesDep,
    # Declared for the OpenAPI spec (and so for fuzzing); parse_entry reads and checks them.
    prolific_pid: Annotated[str | None, Query(alias="PROLIFIC_PID")] = None,
    study_id: Annotated[str | None, Query(alias="STUDY_ID")] = None,
    session_id: Annotated[str | None, Query(alias="SESSION_ID")] = None,
    worker_id: Annotated[str | None, Query(alias="workerId")] = None,
    assignment_id: Annotated[str | None, Query(alias="assignmentId")] = None,
    hit_id: Annotated[str | None, Query(alias="hitId")] = None,
    turk_submit_to: Annotated[str | None, Query(alias="turkSubmitTo")] = None,
    token: Annotated[str | None, Query(description="invite token")] = None,
) -> Response:
    strategy = strategy_for(request, kind)
    study = current_study(request)
    settings = request.app.state.settings
    entry = parse_entry(request.query_params, exact=settings.platform_id_formats == "exact")
    if entry is not None and entry.preview:
        return _preview(kind, request, session, templates)
    if entry is None:
        if not isinstance(request.session.get("worker_id"), int):
            raise PageError(
                400,
                "This link has no participant id. Please open the study from Prolific, "
                "MTurk or your invitation link.",
            )
        return redirect(task_url(kind))  # a returning worker with a cookie: resume
    # Invented ids are free to make: each new identity counts against per-address and
    # site-wide limits kept in the database (webapp.http.rate_limits).
    address = rate_limits.client_address(request)
    new = is_new_identity(session, entry)
    if new and study.archived:  # no new workers: refused before the consent, not after it
        raise PageError(403, CLOSED)
    if new:
        rate_limits.check_new_worker(session, settings, address)
    worker = resolve_worker(session, entry, study.id)
    if new:
        rate_limits.record_new_worker(session, address, worker.id, study.id)
    if standing.standing(session, worker, study.id).blocked:
        session.commit()
        raise PageError(403, "This account cannot take part in the study.", page="screenout")
    _check_roles(worker, kind)
    assert worker.id is not None
    open_batch = batches.current_batch(session, worker.id, kind, study.id)
    if open_batch is not None:
        config = load_study_config(session, study.id)
        if batches.expire_if_due(session, open_batch, config, strategy):
            open_batch = None
        elif request.session.get("worker_id") != worker.id:
            check_resume(entry, open_batch.entry)
    session.commit()
    login(request, worker, kind, entry)
    approval.remember(request, session, study.id, kind, entry)
    if open_batch is not None:
        return redirect(task_url(kind))
    if same_platform_session(entry, batches.latest_batch(session, worker.id, kind, study.id)):
        # The link of a submission that already finished (e.g. the worker lost the code).
        return redirect(f"/done/{kind}")
    if study.archived:  # no batch to finish here: nothing to consent to
        raise PageError(403, CLOSED)
    _refuse_if_limited(request, session, worker, kind)
    return redirect(f"/instructions/{kind}" if has_consented(request, kind) else f"/consent/{kind}")


def _preview(kind: str, request: Request, session: Session, templates: Any) -> Response:
    """MTurk preview: what the task looks like, read-only, with no identity and no lease."""
    from sqlmodel import col, select

    sample = session.exec(
        select(ImagePair)
        .where(
            ImagePair.study_id == current_study(request).id, ImagePair.status != PairStatus.retired
        )
        .order_by(col(ImagePair.id))
    ).first()
    task = None
    show = task_previews(request).get(kind)
    if show is not None and sample is not None:
        task = show(request, session, sample)
    return page(
        templates,
        request,
        "preview.html",
        kind,
        task=task,
        photos=example_photos(session),
        texts=study_texts(current_study(request)),
    )


def study_texts(study: StudyContext) -> dict[str, Any]:
    """The study language's instructions (as safe HTML) and worked examples."""
    texts = study.language.texts
    return {"instructions": render_text(texts.instructions), "examples": texts.examples}


def _qualification(session: Session, study: StudyContext, worker: Worker, kind: str) -> QualState:
    assert worker.id is not None
    return qualification_status(session, study.id, study.definition, worker.id, kind).state


@router.get("/consent/{kind}", summary="Consent form")
def consent_form(
    kind: str,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    templates: TemplatesDep,
) -> Response:
    strategy_for(request, kind)
    study = current_study(request)
    config = load_study_config(session, study.id)
    size, minutes, _ = batches.limits(config, kind)
    # The study language's consent (its definition's texts) unless the admin wrote their own
    # in the settings, which then wins as before.
    text = (
        study.language.texts.consent
        if config.consent_text == DEFAULT_CONSENT
        else config.consent_text
    )
    html = render_consent(text, minutes=minutes, items=size)
    return page(templates, request, "consent.html", kind, consent_html=html)


@router.post("/consent/{kind}", summary="Give or decline consent")
def consent_submit(
    kind: str,
    request: Request,
    worker: CurrentWorker,
    templates: TemplatesDep,
    decision: Annotated[str, Form(max_length=16)],
    csrf: Annotated[str, Form(max_length=128)],
) -> Response:
    strategy_for(request, kind)
    check_csrf(request, csrf)
    if decision == "agree":
        record_consent(request, kind)
        return redirect(f"/instructions/{kind}")
    if decision == "decline":
        source = entry_for(request, kind).get("source")
        return page(
            templates, request, "declined.html", kind, platform=source in ("prolific", "mturk")
        )
    raise PageError(400, "Please choose whether you agree to take part.")


@router.get("/instructions/{kind}", summary="Instructions with worked examples")
def instructions(
    kind: str,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    templates: TemplatesDep,
) -> Response:
    strategy_for(request, kind)
    study = current_study(request)
    if not has_consented(request, kind):
        return redirect(f"/consent/{kind}")
    config = load_study_config(session, study.id)
    size, minutes, per_day = batches.limits(config, kind)
    assert worker.id is not None
    open_batch = batches.current_batch(session, worker.id, kind, study.id)
    if open_batch is None and _qualification(session, study, worker, kind) == QualState.failed:
        return redirect(f"/qualify/{kind}")
    return page(
        templates,
        request,
        "instructions.html",
        kind,
        size=size,
        minutes=minutes,
        per_day=per_day,
        open_batch=open_batch,
        photos=example_photos(session),
        texts=study_texts(study),
    )


@router.post("/begin/{kind}", summary="Open (or resume) a batch and go to the task")
def begin(
    kind: str,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    csrf: Annotated[str, Form(max_length=128)],
) -> Response:
    strategy = strategy_for(request, kind)
    study = current_study(request)
    check_csrf(request, csrf)
    _check_roles(worker, kind)
    if not has_consented(request, kind):
        return redirect(f"/consent/{kind}")
    config = load_study_config(session, study.id)
    assert worker.id is not None
    address = rate_limits.client_address(request)
    new_batch = batches.current_batch(session, worker.id, kind, study.id) is None
    if new_batch and study.archived:  # an open batch may still be finished
        raise PageError(403, CLOSED)
    if new_batch and _qualification(session, study, worker, kind) in (
        QualState.pending,
        QualState.failed,
    ):
        return redirect(f"/qualify/{kind}")  # the check first (batches.open_or_resume insists)
    if new_batch:
        rate_limits.check_new_batch(session, request.app.state.settings, address)
    try:
        # The batch keeps the platform ids and the consent time: the study's audit trail.
        entry = entry_for(request, kind) | {"consented_at": consent_time(request, kind)}
        batches.open_or_resume(
            session, worker, kind, config, strategy, entry, study_id=study.id, refuse_empty=True
        )
    except batches.BatchError as exc:
        session.rollback()
        if exc.reason == "no_work":
            return _no_work(request, session, worker, kind)
        if exc.reason == "daily_limit":
            _refuse_if_limited(request, session, worker, kind)
        raise PageError(409, exc.message) from exc
    if new_batch:
        rate_limits.record(session, rate_limits.NEW_BATCH, address, worker.id)
    session.commit()
    return redirect(task_url(kind))


@router.get("/finish/{kind}", summary="Confirm ending the batch early")
def finish_form(
    kind: str,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    templates: TemplatesDep,
) -> Response:
    strategy_for(request, kind)
    study = current_study(request)
    assert worker.id is not None
    batch = batches.current_batch(session, worker.id, kind, study.id)
    if batch is None:
        return redirect(f"/done/{kind}")
    from webapp.crowd.leases import count_done

    return page(
        templates,
        request,
        "finish.html",
        kind,
        batch=batch,
        done_count=count_done(session, batch),
        need=approval.items_needed(request, kind, batch.size),
    )


@router.post("/finish/{kind}", summary="End the batch now (the code covers the work done)")
def finish(
    kind: str,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    csrf: Annotated[str, Form(max_length=128)],
) -> Response:
    strategy = strategy_for(request, kind)
    study = current_study(request)
    check_csrf(request, csrf)
    assert worker.id is not None
    from sqlmodel import col, select

    from vsr_core.models import Batch
    from webapp.crowd.leases import lock_row_wait

    # Locked, so a vote or caption landing at the same moment is counted before it ends.
    batch = session.exec(
        lock_row_wait(
            select(Batch)
            .where(
                Batch.worker_id == worker.id,
                Batch.kind == kind,
                Batch.study_id == study.id,
                Batch.status == BatchStatus.open,
            )
            .order_by(col(Batch.id).desc())
            .limit(1),
            session,
        )
    ).first()
    if batch is not None:
        config = load_study_config(session, study.id)
        if not batches.expire_if_due(session, batch, config, strategy):
            batches.finish_early(session, batch, config, strategy)
        session.commit()
    return redirect(f"/done/{kind}")


def _no_work(request: Request, session: Session, worker: Worker, kind: str) -> Response:
    """Nothing to serve this worker now: the page says so and no batch is made."""
    study = current_study(request)
    assert worker.id is not None
    earlier = batches.latest_completed(session, worker.id, kind, study.id)
    source = entry_for(request, kind).get("source")
    templates = request.app.state.templates
    return page(
        templates,
        request,
        "done.html",
        kind,
        batch=None,
        no_work=True,
        platform=source in ("prolific", "mturk"),
        earlier_code=earlier.completion_code if earlier is not None else None,
    )


def _end_reason(batch: Batch, done_count: int) -> str:
    """Why a finished batch ended, as the done page explains it."""
    if (batch.entry or {}).get("finished_early"):
        return "finished_early"
    if batch.finished_at is not None and batch.finished_at >= batch.deadline:
        return "time"
    if done_count < batch.size:
        return "no_more"
    return "full"


@router.get("/done/{kind}", summary="Completion page with the completion code")
def done(
    kind: str,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    settings: SettingsDep,
    templates: TemplatesDep,
) -> Response:
    strategy = strategy_for(request, kind)
    study = current_study(request)
    assert worker.id is not None
    batch = batches.latest_batch(session, worker.id, kind, study.id)
    if batch is None:
        return redirect(f"/instructions/{kind}")
    if batch.status == BatchStatus.open:
        config = load_study_config(session, study.id)
        if not batches.expire_if_due(session, batch, config, strategy):
            return redirect(task_url(kind))
        session.commit()
    from webapp.crowd.leases import count_done

    entry = batch.entry or {}
    done_count = count_done(session, batch)
    ctx: dict[str, Any] = {
        "batch": batch,
        "done_count": done_count,
        "reason": _end_reason(batch, done_count),
        "earlier_code": None,
    }
    if batch.status == BatchStatus.returned:
        # Nothing was left for them: if they did work before, that is what happened.
        earlier = batches.latest_completed(session, worker.id, kind, study.id)
        ctx["earlier_code"] = earlier.completion_code if earlier is not None else None
    if entry.get("source") not in ("prolific", "mturk"):
        # "Check for more work" only when a batch could open: else when it can.
        config = load_study_config(session, study.id)
        reset = batches.next_batch_at(session, worker.id, kind, config, study.id)
        if reset is not None:
            per_day = batches.limits(config, kind)[2]
            ctx["limit_note"] = daily_limit_message(request, kind, per_day, reset)
    if batch.completion_code:
        ctx["prolific_url"] = (
            settings.prolific_completion_url.format(code=batch.completion_code)
            if entry.get("source") == "prolific"
            else None
        )
        if entry.get("source") == "mturk" and entry.get("turk_submit_to"):
            ctx["mturk_action"] = entry["turk_submit_to"] + "/mturk/externalSubmit"
            ctx["mturk_assignment"] = entry.get("assignment_id", "")
    return page(templates, request, "done.html", kind, **ctx)


@router.get("/screenout", summary="Screen-out page")
def screenout(request: Request, templates: TemplatesDep) -> Response:
    ctx = screenout_context(request)
    return page(templates, request, "screenout.html", "", message=None, **ctx)
