"""The qualification check before a new worker's first batch of a task (docs/studies.md,
"Qualification"): the items of the worker's next try, its scoring, and what follows a pass
(the batch) or a last failed try (a clear page and the platform's screen-out path).

Known answers never reach the page: it gets captions (and a gold item's photo, addressed by
its place in the try), each item named by an opaque id of this try, never by an Example's
id, and the server scores what comes back (``vsr_core.qualification``).
The platform's part of a screen-out lives above this room; the app factory hands it over as
``app.state.screenout`` (a ``ScreenOut``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from vsr_core.caption_language import concept_name
from vsr_core.models import Worker
from vsr_core.qualification import (
    Item,
    QualificationError,
    QualState,
    Status,
    draw,
    opaque_items,
    parse_answers,
    requirement,
    status,
    submit,
)
from vsr_core.studies.context import StudyContext
from vsr_core.studies.definition import MAX_QUALIFICATION_ITEMS, TaskQualification
from vsr_core.studies.settings import load_study_config
from webapp.crowd import batches
from webapp.crowd.identity import (
    CurrentWorker,
    check_csrf,
    entry_for,
    get_current_worker,
    has_consented,
)
from webapp.crowd.tasks import page, redirect, strategy_for
from webapp.http.deps import SessionDep, SettingsDep, TemplatesDep
from webapp.http.errors import PageError
from webapp.http.i18n import N_
from webapp.images import render as images
from webapp.validate.view import display_one, example_instances

router = APIRouter(tags=["qualification"])

# The refusals of vsr_core.qualification, marked here for the worker pages' catalogs.
REFUSALS = (
    N_("An answer names an item that is not in this check."),
    N_("Each answer must be True or False."),
    N_("Please answer every item of the check."),
)
ATTEMPT = re.compile(r"[1-9][0-9]?")
MAX_FIELD_BYTES = 128


@dataclass(frozen=True)
class ScreenOut:
    """The platform's part of a screen-out: Prolific's no-pay code of the platform study the
    worker came from (None: the study setting's screen-out code), and the MTurk call that
    keeps the HIT from the worker (True when made)."""

    prolific_code: Callable[[Session, int, dict[str, Any]], str | None]
    failed: Callable[[Session, int, Worker, dict[str, Any]], bool]


def _screenout(request: Request) -> ScreenOut | None:
    return getattr(request.app.state, "screenout", None)


def _task(study: StudyContext, kind: str) -> TaskQualification | None:
    return requirement(study.definition, kind)


def _shown(
    request: Request, session: Session, study: StudyContext, kind: str, items: dict[str, Item]
) -> list[dict[str, Any]]:
    """What the page shows of each item: its opaque id, caption, and for a gold item its
    photo with the two objects outlined (addressed by its place in the try, never by the
    Example's or the image's id)."""
    local = request.app.state.settings.image_root is not None
    prefix = request.scope.get("root_path", "")
    out: list[dict[str, Any]] = []
    for n, (opaque, item) in enumerate(items.items()):
        shown: dict[str, Any] = {"id": opaque, "caption": item.caption, "image": None}
        if item.example_id is not None:
            display = display_one(session, item.example_id, local)
            image = dict(display["image"])
            if image["marked"]:
                image["src"] = f"{prefix}/images/qualify/{kind}/{n}.jpg"
            shown |= {
                "caption": display["caption"],
                "image": image,
                "subj_name": concept_name(study.language, display["subj"]),
                "obj_name": concept_name(study.language, display["obj"]),
            }
        out.append(shown)
    return out


def _failed_page(
    request: Request,
    session: Session,
    templates: Any,
    study: StudyContext,
    kind: str,
    st: Status,
    task: TaskQualification,
) -> Response:
    """The clear page after the last failed try, with the platform's way out."""
    entry = entry_for(request, kind)
    hooks = _screenout(request)
    code = hooks.prolific_code(session, study.id, entry) if hooks is not None else None
    code = code or load_study_config(session, study.id).screenout_code
    settings = request.app.state.settings
    last = st.last
    ctx = {
        "source": entry.get("source", ""),
        "code": code,
        "prolific_url": settings.prolific_completion_url.format(code=code),
        "score": last.score if last else 0,
        "shown": last.shown if last else 0,
        "needed": task.needed(last.shown) if last else 0,
        "attempts": task.attempts,
    }
    return page(templates, request, "qualify_failed.html", kind, **ctx)


@router.get("/qualify/{kind}", summary="The qualification check before a first batch")
def qualify_page(
    kind: str,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    templates: TemplatesDep,
) -> Response:
    strategy_for(request, kind)
    study = request.state.study
    if not has_consented(request, kind):
        return redirect(f"/consent/{kind}")
    task = _task(study, kind)
    assert worker.id is not None
    st = status(session, study.id, study.definition, worker.id, kind)
    if task is None or st.state == QualState.not_required:
        return redirect(f"/instructions/{kind}")
    if st.state == QualState.failed:
        return _failed_page(request, session, templates, study, kind, st, task)
    if st.state == QualState.passed:
        config = load_study_config(session, study.id)
        _, minutes, _ = batches.limits(config, kind)
        last = st.last
        return page(
            templates,
            request,
            "qualify_passed.html",
            kind,
            minutes=minutes,
            score=last.score if last else 0,
            shown=last.shown if last else 0,
        )
    items = draw(session, study.id, study.definition, task, worker.id, kind, st.next_attempt)
    if not items:
        raise PageError(503, "The check of this task is not ready yet. Please try again later.")
    last = st.last
    key = request.app.state.settings.secret_key
    named = opaque_items(key, study.id, worker.id, kind, st.next_attempt, items)
    return page(
        templates,
        request,
        "qualify.html",
        kind,
        items=_shown(request, session, study, kind, named),
        attempt=st.next_attempt,
        attempts=task.attempts,
        needed=task.needed(len(items)),
        previous={"score": last.score, "shown": last.shown} if last else None,
    )


@router.post("/qualify/{kind}", summary="Send the answers of one try of the check")
async def qualify_submit(kind: str, request: Request) -> Response:
    strategy_for(request, kind)
    try:
        form = await request.form(max_files=0, max_fields=MAX_QUALIFICATION_ITEMS + 4)
    except Exception:  # starlette's MultiPartException / a malformed body: the worker's words
        raise PageError(400, "Please check your answer.") from None
    return await run_in_threadpool(_submit, kind, request, form)


def _submit(kind: str, request: Request, form: FormData) -> Response:
    fields: dict[str, str] = {}
    for key, value in form.multi_items():
        if not isinstance(value, str) or len(key) > MAX_FIELD_BYTES or len(value) > MAX_FIELD_BYTES:
            raise PageError(400, "Please check your answer.")
        if key in fields:
            raise PageError(400, "Each item takes one answer.")
        fields[key] = value
    with Session(request.app.state.engine) as session:
        worker = get_current_worker(request, session)
        check_csrf(request, fields.get("csrf"))
        study = request.state.study
        if not has_consented(request, kind):
            return redirect(f"/consent/{kind}")
        task = _task(study, kind)
        raw_attempt = fields.get("attempt", "")
        if not ATTEMPT.fullmatch(raw_attempt):
            raise PageError(400, "Please check your answer.")
        attempt = int(raw_attempt)
        assert worker.id is not None
        st = status(session, study.id, study.definition, worker.id, kind)
        if task is None or st.state == QualState.not_required:
            return redirect(f"/instructions/{kind}")
        if attempt <= st.used:  # this try was scored already (a reload, a second tab)
            return redirect(f"/qualify/{kind}")
        if st.state != QualState.pending or attempt != st.next_attempt:
            raise PageError(409, "This try of the check is not open. Please reload the page.")
        items = draw(session, study.id, study.definition, task, worker.id, kind, attempt)
        if not items:
            raise PageError(503, "The check of this task is not ready yet. Please try again later.")
        key = request.app.state.settings.secret_key
        named = opaque_items(key, study.id, worker.id, kind, attempt, items)
        try:
            answers = parse_answers(
                {k: v for k, v in fields.items() if k not in ("csrf", "attempt")}, named
            )
        except QualificationError as exc:
            raise PageError(422, str(exc)) from None
        row, created = submit(session, study.id, task, worker.id, kind, attempt, items, answers)
        if created and not row.passed and row.attempt >= task.attempts:
            hooks = _screenout(request)
            if hooks is not None:
                hooks.failed(session, study.id, worker, entry_for(request, kind))
    return redirect(f"/qualify/{kind}")


@router.get("/images/qualify/{kind}/{n}.jpg", summary="A gold item's photo in the check, marked")
def qualify_image(
    kind: str,
    n: int,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    settings: SettingsDep,
) -> Response:
    """Item ``n`` of the worker's open try: the URL names no Example, and another worker's
    try is not theirs to open."""
    strategy_for(request, kind)
    study = request.state.study
    task = _task(study, kind)
    assert worker.id is not None
    st = status(session, study.id, study.definition, worker.id, kind)
    if task is None or st.state != QualState.pending or not 0 <= n < MAX_QUALIFICATION_ITEMS:
        raise PageError(404, "No such image.")
    items = draw(session, study.id, study.definition, task, worker.id, kind, st.next_attempt)
    example_id = items[n].example_id if n < len(items) else None
    if example_id is None or settings.image_root is None:
        raise PageError(404, "No such image.")
    from vsr_core.models import Example, Image

    example = session.get(Example, example_id)
    insts = example_instances(session, example) if example is not None else None
    image = session.get(Image, example.image_id) if example is not None else None
    if insts is None or image is None:
        raise PageError(404, "No such image.")
    path = images.render_marked(
        settings.image_root, settings.image_cache_dir, image, insts[0], insts[1]
    )
    if path is None:
        raise PageError(404, "The image file is missing on the server.")
    return FileResponse(
        path, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=3600"}
    )
