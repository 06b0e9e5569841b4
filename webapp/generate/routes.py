"""The generation task: HTML page + form, the same as JSON, and the marked images."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, Field
from sqlmodel import Session

from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Annotation,
    Assignment,
    Batch,
    Image,
    ImagePair,
    Instance,
    Worker,
)
from vsr_core.relations import relations_by_category
from vsr_core.studies.settings import StudyConfig, load_study_config
from webapp.crowd import approval, batches
from webapp.crowd.identity import CurrentWorker, check_csrf, csrf_token
from webapp.crowd.lease_tokens import lease_from_token, lease_token
from webapp.crowd.leases import LeaseStrategy, count_done, take_next
from webapp.crowd.tasks import redirect, strategy_for
from webapp.generate.submission import (
    GenerationAnswer,
    GenerationForm,
    GenerationSubmission,
    SubmissionError,
    allowed_relations,
    submit,
)
from webapp.generate.view import task_context
from webapp.http.api_guard import CSRF_HEADER, check_json_post
from webapp.http.deps import SessionDep, SettingsDep, TemplatesDep
from webapp.http.errors import PageError
from webapp.http.study import current_study
from webapp.images import render as images
from webapp.images.signed_urls import pair_image_allowed, pair_image_url

router = APIRouter(tags=["generate"])
KIND = "generate"


# --- shared by the page and the API --------------------------------------------------------


def advance(
    session: Session,
    worker: Worker,
    config: StudyConfig,
    strategy: LeaseStrategy,
    study_id: int = DEFAULT_STUDY_ID,
) -> tuple[Batch | None, Assignment | None]:
    """Bring the worker's batch up to date and return (batch, lease); commits.

    (None, None) means there is no open batch (never opened, or it just ended).
    """
    assert worker.id is not None
    batch = batches.current_batch(session, worker.id, KIND, study_id)
    if batch is None:
        return None, None
    if batches.expire_if_due(session, batch, config, strategy):
        session.commit()
        return None, None
    done = count_done(session, batch)
    if done >= batch.size:
        batches.complete(session, batch, config, strategy)
        session.commit()
        return None, None
    # Close other workers' batches that nobody came back to (one indexed query).
    batches.expire_overdue(session, KIND, config, strategy, study_id=study_id)
    lease = take_next(session, batch, strategy, config.lease_minutes)
    if lease is None:
        if done > 0:
            batches.complete(session, batch, config, strategy)
        else:
            batches.give_up(session, batch, strategy)
        session.commit()
        return None, None
    session.commit()
    return batch, lease


def _where_next(session: Session, worker: Worker, study_id: int) -> str:
    assert worker.id is not None
    last = batches.latest_batch(session, worker.id, KIND, study_id)
    return f"/done/{KIND}" if last is not None else f"/instructions/{KIND}"


# --- the HTML task -----------------------------------------------------------------------


def _lease_token(request: Request, worker: Worker, lease: Assignment) -> str:
    assert worker.id is not None and lease.id is not None
    return lease_token(request.app.state.settings.secret_key, worker.id, lease.id)


def _stored(request: Request, worker_id: int, answer: GenerationAnswer) -> GenerationSubmission:
    """The answer with the lease its opaque token names (webapp.crowd.lease_tokens): a guessed,
    sequential or another worker's id is refused before any database lookup."""
    lease_id = lease_from_token(
        request.app.state.settings.secret_key, worker_id, answer.assignment_id
    )
    if lease_id is None:
        raise SubmissionError(403, "This pair is not assigned to you.")
    fields = answer.model_dump(exclude={"csrf", "assignment_id"})
    return GenerationSubmission(**fields, assignment_id=lease_id)


@router.get("/generate", summary="The caption-writing task page")
def task_page(
    request: Request, worker: CurrentWorker, session: SessionDep, templates: TemplatesDep
) -> Response:
    strategy = strategy_for(request, KIND)
    study_id = current_study(request).id
    config = load_study_config(session, study_id)
    batch, lease = advance(session, worker, config, strategy, study_id)
    if batch is None or lease is None:
        return redirect(_where_next(session, worker, study_id))
    pair = session.get(ImagePair, lease.pair_id)
    assert pair is not None
    ctx = task_context(request, session, pair)
    ctx.update(
        kind=KIND,
        batch=batch,
        lease=lease,
        done_count=count_done(session, batch),
        need=approval.items_needed(request, KIND, batch.size),
        seconds_left=batches.seconds_left(batch),
        lease_token=_lease_token(request, worker, lease),
        client_token=secrets.token_urlsafe(16),
        csrf=csrf_token(request),
        preview=False,
        notice=request.query_params.get("notice"),
    )
    return templates.TemplateResponse(request, "generate.html", ctx)


@router.post("/generate", summary="Submit one caption (HTML form)")
def task_submit(
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    form: Annotated[GenerationForm, Form()],
) -> Response:
    check_csrf(request, form.csrf)
    assert worker.id is not None
    study = current_study(request)
    config = load_study_config(session, study.id)
    try:
        submit(
            session,
            worker.id,
            _stored(request, worker.id, form),
            config,
            language=study.language,
            study_id=study.id,
        )
    except SubmissionError as exc:
        if exc.status == 409:
            # The lease ran out: nothing to fix in the form, so carry on with the next pair.
            return redirect(f"/{KIND}?notice=expired")
        raise PageError(exc.status, exc.message) from exc
    return redirect(f"/{KIND}")


# --- the JSON API -----------------------------------------------------------------------


class TaskImage(BaseModel):
    slot: int
    image_id: int
    coco_id: int
    src: str | None
    width: int
    height: int


class TaskPublic(BaseModel):
    assignment_id: str = Field(description="the lease's opaque token: send it back as is")
    pair_id: int
    concept_a: str
    concept_b: str
    images: list[TaskImage]
    relations: list[str]
    batch_size: int
    done: int
    seconds_left: int
    lease_expires_at: str


class AnnotationResult(BaseModel):
    annotation_id: int
    created: bool
    relation: str | None
    subj: str | None
    obj: str | None
    true_image_id: int | None
    skip_reason: str | None
    captions: list[str]


@router.get(
    "/api/generate/task",
    response_model=TaskPublic,
    responses={401: {}, 403: {}, 409: {"description": "no open batch or nothing left"}},
)
def api_task(
    request: Request, worker: CurrentWorker, session: SessionDep, response: Response
) -> TaskPublic:
    """The worker's current pair (leasing the next one if needed); the X-CSRF-Token header
    of the answer is what ``POST /api/generate/annotations`` must send back."""
    response.headers[CSRF_HEADER] = csrf_token(request)
    strategy = strategy_for(request, KIND)
    study_id = current_study(request).id
    config = load_study_config(session, study_id)
    batch, lease = advance(session, worker, config, strategy, study_id)
    if batch is None or lease is None:
        raise PageError(409, "There is no open batch with work left; see /done/generate.")
    pair = session.get(ImagePair, lease.pair_id)
    assert pair is not None and pair.id is not None and lease.id is not None
    settings = request.app.state.settings
    shown = []
    for slot in (1, 2):
        image = session.get(Image, getattr(pair, f"image{slot}_id"))
        assert image is not None and image.id is not None
        src = (
            pair_image_url(settings.secret_key, pair.id, slot, request.scope.get("root_path", ""))
            if settings.image_root
            else image.coco_url
        )
        shown.append(
            TaskImage(
                slot=slot,
                image_id=image.id,
                coco_id=image.coco_id,
                src=src,
                width=image.width,
                height=image.height,
            )
        )
    return TaskPublic(
        assignment_id=_lease_token(request, worker, lease),
        pair_id=pair.id,
        concept_a=pair.concept_a,
        concept_b=pair.concept_b,
        images=shown,
        relations=allowed_relations(config),
        batch_size=batch.size,
        done=count_done(session, batch),
        seconds_left=batches.seconds_left(batch),
        lease_expires_at=lease.lease_expires_at.isoformat(),
    )


@router.post(
    "/api/generate/annotations",
    response_model=AnnotationResult,
    status_code=201,
    responses={
        200: {"description": "a repeat of an earlier submission"},
        401: {},
        403: {},
        409: {},
        422: {},
    },
)
def api_submit(
    body: GenerationAnswer, worker: CurrentWorker, session: SessionDep, request: Request
) -> Response:
    """Submit one answer: a JSON body with the session's CSRF token in the X-CSRF-Token
    header (``webapp.http.api_guard``)."""
    check_json_post(request)
    assert worker.id is not None
    try:
        study = current_study(request)
        annotation, created = submit(
            session,
            worker.id,
            _stored(request, worker.id, body),
            load_study_config(session, study.id),
            language=study.language,
            study_id=study.id,
        )
    except SubmissionError as exc:
        raise PageError(exc.status, exc.message) from exc
    result = _result(session, annotation, created)
    return JSONResponse(result.model_dump(), status_code=201 if created else 200)


def _result(session: Session, annotation: Annotation, created: bool) -> AnnotationResult:
    from sqlmodel import col, select

    from vsr_core.models import Example

    captions = session.exec(
        select(Example.caption)
        .where(Example.annotation_id == annotation.id)
        .order_by(col(Example.id))
    ).all()
    assert annotation.id is not None
    return AnnotationResult(
        annotation_id=annotation.id,
        created=created,
        relation=annotation.relation,
        subj=annotation.subj,
        obj=annotation.obj,
        true_image_id=annotation.true_image_id,
        skip_reason=annotation.skip_reason,
        captions=list(captions),
    )


class RelationPublic(BaseModel):
    name: str
    category: str
    copula: bool


@router.get("/api/relations", response_model=list[RelationPublic])
def api_relations(request: Request, session: SessionDep) -> list[RelationPublic]:
    """The relations offered in this study, grouped by their Table 1 category order."""
    allowed = set(allowed_relations(load_study_config(session, current_study(request).id)))
    out: list[RelationPublic] = []
    seen: set[str] = set()
    from vsr_core.relations import get_relation

    for cat, rels in relations_by_category(only_enabled=False).items():
        for rel in rels:
            if rel in allowed and rel not in seen:
                seen.add(rel)
                out.append(RelationPublic(name=rel, category=cat, copula=get_relation(rel).copula))
    return out


# --- images -----------------------------------------------------------------------------


@router.get("/images/pair/{pair_id}/{slot}.jpg", summary="A pair's image with A and B marked")
def pair_image(
    pair_id: int,
    slot: int,
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    s: Annotated[str | None, Query(max_length=64, description="the page's signature")] = None,
) -> Response:
    if slot not in (1, 2) or not (0 < pair_id < 2**31):
        raise PageError(404, "No such image.")
    if not pair_image_allowed(settings.secret_key, pair_id, slot, s):
        raise PageError(404, "No such image.")  # only addresses a page of this site gave out
    pair = session.get(ImagePair, pair_id)
    # Only at its own study's address (the pages give out no other).
    if pair is None or settings.image_root is None or pair.study_id != current_study(request).id:
        raise PageError(404, "No such image.")
    image = session.get(Image, getattr(pair, f"image{slot}_id"))
    a = session.get(Instance, getattr(pair, f"image{slot}_a_id"))
    b = session.get(Instance, getattr(pair, f"image{slot}_b_id"))
    assert image is not None and a is not None and b is not None
    path = images.render_marked(settings.image_root, settings.image_cache_dir, image, a, b)
    if path is None:
        raise PageError(404, "The image file is missing on the server.")
    return FileResponse(path, media_type="image/jpeg", headers={"Cache-Control": "max-age=86400"})
