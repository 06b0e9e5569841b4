"""The validation task: the HTML page and form, the same as a lean JSON API, and the image.

Entry, consent, instructions, batch start and the done page are the shared ones in
``webapp.crowd.routes`` (``/start/validate``, ``/begin/validate``, ``/done/validate``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

import anyio.to_thread
import orjson
from anyio import CapacityLimiter
from fastapi import APIRouter, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from vsr_core.authenticity import ItemSignals
from vsr_core.caption_language import concept_name
from vsr_core.db import is_dropped_connection, make_lean_engine
from vsr_core.models import Assignment, Batch, Example, Image, Worker
from vsr_core.types import utcnow
from webapp.crowd import approval, batches
from webapp.crowd.identity import CurrentWorker, check_csrf, csrf_token, get_current_worker
from webapp.crowd.lease_tokens import MAX_LENGTH, lease_from_token, lease_token
from webapp.crowd.signals import MAX_LENGTH as SIGNALS_MAX
from webapp.crowd.signals import SignalsError, parse_signals
from webapp.crowd.tasks import redirect, strategy_for
from webapp.http.api_guard import CSRF_HEADER, check_json_post
from webapp.http.deps import SessionDep, SettingsDep, TemplatesDep, app_owned
from webapp.http.errors import PageError
from webapp.http.inputs import ascii_int
from webapp.http.study import current_study
from webapp.images import render as images
from webapp.validate.display_cache import DisplayCache
from webapp.validate.queue import Display, NextItem, VoteError, next_item, record_vote
from webapp.validate.rules import REFERENCE_FRAMES
from webapp.validate.strategy import ExampleStrategy
from webapp.validate.view import example_display, example_instances, leased_item

router = APIRouter(tags=["validate"])
KIND = "validate"


def _strategy(request: Request) -> ExampleStrategy:
    strategy = strategy_for(request, KIND)
    assert isinstance(strategy, ExampleStrategy)
    return strategy


@contextmanager
def _released(session: Session) -> Iterator[None]:
    """Hand the database connection back before the answer goes out.

    The HTML task endpoints look the worker up themselves (``get_current_worker``, the same
    function the ``CurrentWorker`` dependency runs) instead of in a separate dependency:
    FastAPI runs each sync dependency and the endpoint in separate threadpool calls, so a
    connection taken in the dependency would be held while the request waits for a thread,
    and with more requests in flight than pooled connections that stalls the pool.
    """
    try:
        yield
    finally:
        session.close()


def _display_cache(request: Request) -> DisplayCache:
    return app_owned(request, "validation_display", DisplayCache)


def _where_next(request: Request, session: Session, worker: Worker) -> str:
    assert worker.id is not None
    last = batches.latest_batch(session, worker.id, KIND, current_study(request).id)
    return f"/done/{KIND}" if last is not None else f"/instructions/{KIND}"


def _display(request: Request) -> Display:
    """What the queue calls, inside its transaction, for the Example it serves."""
    local_images = request.app.state.settings.image_root is not None
    cache = _display_cache(request)

    def display(session: Session, example_id: int) -> dict[str, Any]:
        return example_display(session, example_id, local_images, cache)

    return display


def _advance(request: Request, session: Session, worker: Worker | int) -> NextItem | None:
    return next_item(
        session,
        worker,
        _strategy(request),
        display=_display(request),
        study_id=current_study(request).id,
    )


def _cookie_worker(request: Request, session: Session) -> int:
    """The session cookie's worker id (401 without one); the queue's own statements check
    that the worker exists and is not blocked, so the hot path does not load the row."""
    worker_id = request.session.get("worker_id")
    if not isinstance(worker_id, int):
        get_current_worker(request, session)  # raises the 401 page
    return worker_id  # type: ignore[return-value]


NOT_YOURS = "This item is not one of yours. Please reload the page."


def _lease_token(request: Request, worker_id: int, lease_id: int) -> str:
    return lease_token(request.app.state.settings.secret_key, worker_id, lease_id)


def _lease_id(request: Request, worker_id: int, token: str) -> int:
    """The lease a form or API call names, from its opaque token (webapp.crowd.lease_tokens): a
    guessed, sequential or another worker's id is refused before any database lookup."""
    lease_id = lease_from_token(request.app.state.settings.secret_key, worker_id, token)
    if lease_id is None:
        raise PageError(404, NOT_YOURS)
    return lease_id


def _refused(request: Request, session: Session, exc: VoteError) -> PageError:
    """A VoteError as the worker sees it; an unknown or blocked worker gets exactly the
    answer every other page gives them (``get_current_worker``)."""
    if exc.status in (401, 403, 404):
        session.rollback()
        get_current_worker(request, session)  # raises 401 / 403 when that is the reason
    return PageError(exc.status, exc.message)


# --- the HTML task -----------------------------------------------------------------------


@router.get("/validate", summary="The True/False validation page")
def task_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    templates: TemplatesDep,
) -> Response:
    with _released(session):  # see _released: the worker is looked up here, not in a dependency
        return _task_page(request, session, settings, templates)


def _task_page(
    request: Request, session: Session, settings: Any, templates: Jinja2Templates
) -> Response:
    worker = get_current_worker(request, session)
    try:
        item = _advance(request, session, worker)
    except VoteError as exc:
        raise _refused(request, session, exc) from exc
    if item is None or item.lease_id is None:
        return redirect(_where_next(request, session, worker))
    assert item.display is not None and worker.id is not None
    token = _lease_token(request, worker.id, item.lease_id)
    lang = current_study(request).language
    shown = leased_item(item.display, token, request.scope.get("root_path", ""))
    # The caption is stored in the study's language; the legend names the objects in it too.
    shown["subj_name"] = concept_name(lang, shown["subj"])
    shown["obj_name"] = concept_name(lang, shown["obj"])
    ctx: dict[str, Any] = {
        "kind": KIND,
        "batch_size": item.batch_size,
        "lease_token": token,
        "item": shown,
        "done_count": item.done,
        "need": approval.items_needed(request, KIND, item.batch_size),
        "seconds_left": _seconds_left(item),
        "csrf": csrf_token(request),
        "frames": REFERENCE_FRAMES,
        "notice": request.query_params.get("notice"),
    }
    return templates.TemplateResponse(request, "validate.html", ctx)


def _signals(text: str | None) -> ItemSignals | None:
    try:
        return parse_signals(text)
    except SignalsError as exc:
        raise PageError(
            422, "The page's measurements of this answer were not understood. Please reload it."
        ) from exc


class VoteForm(BaseModel):
    csrf: str = Field(max_length=128)
    assignment_id: str = Field(max_length=MAX_LENGTH, description="the lease's opaque token")
    answer: Literal["true", "false"]
    reference_frame: Literal["", "intrinsic", "relative", "both"] = ""
    duration_ms: str = Field("", max_length=12)
    signals: str = Field("", max_length=SIGNALS_MAX, description="how the answer was given")


@router.post("/validate", summary="Submit one True/False judgement (HTML form)")
def task_submit(
    request: Request,
    session: SessionDep,
    form: Annotated[VoteForm, Form()],
) -> Response:
    with _released(session):
        worker = get_current_worker(request, session)
        check_csrf(request, form.csrf)
        assert worker.id is not None
        lease_id = _lease_id(request, worker.id, form.assignment_id)
        duration = ascii_int(form.duration_ms, 0, 24 * 3600 * 1000)  # "²".isdigit() is true
        signals = _signals(form.signals)
        try:
            record_vote(
                session,
                worker,
                lease_id,
                form.answer == "true",
                _strategy(request),
                reference_frame=form.reference_frame or None,
                duration_ms=duration,
                study_id=current_study(request).id,
                signals=signals,
            )
        except VoteError as exc:
            if exc.status == 409:
                return redirect(f"/{KIND}?notice=expired")  # nothing to fix: carry on
            raise _refused(request, session, exc) from exc
        return redirect(f"/{KIND}")


# --- the JSON API (the same rules; lean for high request rates) ----------------------------


class ItemImage(BaseModel):
    src: str | None
    marked: bool = Field(description="true: src is a JPEG with both objects drawn on it")
    width: int
    height: int
    coco_id: int
    shapes_subj: list[str] = Field(description="SVG polygon points when not marked")
    shapes_obj: list[str]


class ItemPublic(BaseModel):
    assignment_id: str = Field(description="the lease's opaque token: send it back as is")
    caption: str
    subj: str
    obj: str
    relation: str
    frame_question: bool
    image: ItemImage


class TaskState(BaseModel):
    item: ItemPublic | None = Field(description="null when the batch has ended")
    batch_size: int
    done: int
    seconds_left: int
    finished: bool
    completion_code: str | None = None


class VoteIn(BaseModel):
    assignment_id: str = Field(max_length=MAX_LENGTH, description="the item's assignment_id")
    value: bool
    reference_frame: Literal["intrinsic", "relative", "both"] | None = None
    duration_ms: int | None = Field(None, ge=0, le=24 * 3600 * 1000)
    signals: str | None = Field(
        None, max_length=SIGNALS_MAX, description="the task page's measurements (docs/quality.md)"
    )


class VoteResult(BaseModel):
    vote_id: int
    created: bool
    value: bool
    done: int
    batch_size: int
    finished: bool
    completion_code: str | None = None
    next: TaskState | None = Field(None, description="the next item, when asked with ?next=1")


def _seconds_left(item: NextItem) -> int:
    if item.deadline is None:
        return 0
    return max(0, int((item.deadline - utcnow()).total_seconds()))


IMAGE_FIELDS = tuple(ItemImage.model_fields)
ITEM_FIELDS = tuple(f for f in ItemPublic.model_fields if f != "image")


def _state(item: NextItem, token: str | None, prefix: str) -> dict[str, Any]:
    """A :class:`TaskState` as plain JSON-ready values (the API answers without building
    pydantic models per request; the models document the shape in the OpenAPI schema)."""
    public = None
    if token is not None and item.display is not None:
        shown = leased_item(item.display, token, prefix)
        image = shown["image"]
        public = {name: shown[name] for name in ITEM_FIELDS}
        public["image"] = {name: image[name] for name in IMAGE_FIELDS}
    return {
        "item": public,
        "batch_size": item.batch_size,
        "done": item.done,
        "seconds_left": _seconds_left(item),
        "finished": item.batch_status != "open",
        "completion_code": item.completion_code,
    }


def _api_limiter(request: Request) -> CapacityLimiter:
    """The API's own few threads (``settings.api_threads`` per process).

    Under load, dozens of threads contending for the GIL cost more CPU than the requests
    (with the default 40: 128 round trips/s, with 4: 228 on the load benchmark); a request
    here does all its database work, session to close, within one call, so a small limit
    never holds a connection while waiting for a thread.
    """
    threads = request.app.state.settings.api_threads
    return app_owned(request, "api_limiter", lambda: CapacityLimiter(threads))


async def _in_api_thread(request: Request, func: Any, *args: Any) -> Response:
    return await anyio.to_thread.run_sync(
        _retrying, func, request, *args, limiter=_api_limiter(request)
    )


def _api_engine(request: Request) -> Engine:
    """The API's own small pool without pre-ping (``vsr_core.db.make_lean_engine``), made on
    first use and disposed with the app."""

    def make() -> Engine:
        state = request.app.state
        engine = make_lean_engine(state.engine, state.settings.api_threads)
        if engine is not state.engine:
            weakref.finalize(request.app, engine.dispose)
        return engine

    return app_owned(request, "api_engine", make)


def _retrying(func: Any, request: Request, *args: Any) -> Response:
    """Run an API call with a session of the API pool; once more if the database connection
    turned out to be dead (a PostgreSQL restart). Both API calls are idempotent: a vote
    whose commit was lost is recorded on the retry, one that landed is found and returned."""
    for attempt in (1, 2):
        try:
            with Session(_api_engine(request)) as session:
                return func(request, session, *args)  # type: ignore[no-any-return]
        except DBAPIError as exc:
            if attempt == 2 or not is_dropped_connection(exc):
                raise
    raise AssertionError("unreachable")


def _json(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code=status_code, media_type="application/json")


# The hot API endpoints are async and do their database work in one threadpool call with a
# session of their own: no dependencies (each sync dependency is another threadpool hop, and
# a connection taken there would be held across hops, see _released), the body validated by
# pydantic straight from JSON bytes, the answer serialised by orjson. The worker still comes
# from the signed session cookie (get_current_worker).


@router.get(
    "/api/validate/item",
    response_model=TaskState,
    responses={401: {}, 403: {}, 409: {"description": "no open batch: start one first"}},
)
async def api_item(request: Request) -> Response:
    """The worker's current item (leasing the next one if needed), or the finished batch."""
    return await _in_api_thread(request, _api_item)


def _api_item(request: Request, session: Session) -> Response:
    worker_id = _cookie_worker(request, session)
    try:
        item = _advance(request, session, worker_id)
    except VoteError as exc:
        raise _refused(request, session, exc) from exc
    if item is None:
        raise PageError(
            409, "There is no open validation batch; start one at /instructions/validate."
        )
    response = _json(_state(item, _item_token(request, worker_id, item), _prefix(request)))
    # Readable by the site's own scripts only (no CORS): what the vote call must send back.
    response.headers[CSRF_HEADER] = csrf_token(request)
    return response


@router.post(
    "/api/validate/votes",
    response_model=VoteResult,
    status_code=201,
    responses={
        200: {"description": "a repeat of an earlier submission"},
        401: {},
        403: {},
        404: {},
        409: {},
        422: {},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": VoteIn.model_json_schema()}},
        },
        "parameters": [
            {
                "name": "next",
                "in": "query",
                "required": False,
                "schema": {"type": "integer", "default": 0},
            },
        ],
    },
)
async def api_vote(request: Request) -> Response:
    """Record one judgement: a JSON body with the session's CSRF token in the X-CSRF-Token
    header (``webapp.http.api_guard``; the token comes with every page and in the header of
    ``GET /api/validate/item``).

    With ``?next=1`` the answer also carries the next item (one request per round trip).
    """
    check_json_post(request)
    raw = await request.body()
    try:
        body = VoteIn.model_validate_json(raw)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        ) from exc
    then_next = ascii_int(request.query_params.get("next", "0"), -(2**31), 2**31 - 1)
    if then_next is None:
        raise RequestValidationError(
            [
                {
                    "type": "int_parsing",
                    "loc": ("query", "next"),
                    "msg": "Input should be a valid integer",
                    "input": request.query_params["next"],
                }
            ]
        )
    return await _in_api_thread(request, _api_vote, body, then_next != 0)


def _prefix(request: Request) -> str:
    """Where the request's study lives ("/s/<slug>"; "" for the default study's old links)."""
    return request.scope.get("root_path", "")  # type: ignore[no-any-return]


def _item_token(request: Request, worker_id: int, item: NextItem) -> str | None:
    return None if item.lease_id is None else _lease_token(request, worker_id, item.lease_id)


def _api_vote(request: Request, session: Session, body: VoteIn, then_next: bool) -> Response:
    worker_id = _cookie_worker(request, session)
    lease_id = _lease_id(request, worker_id, body.assignment_id)
    try:
        out = record_vote(
            session,
            worker_id,
            lease_id,
            body.value,
            _strategy(request),
            reference_frame=body.reference_frame,
            duration_ms=body.duration_ms,
            then_next=then_next,
            display=_display(request),
            study_id=current_study(request).id,
            signals=_signals(body.signals),
        )
    except VoteError as exc:
        raise _refused(request, session, exc) from exc
    assert out.vote.id is not None
    result = {
        "vote_id": out.vote.id,
        "created": out.created,
        "value": out.vote.value,
        "done": out.done,
        "batch_size": out.batch_size,
        "finished": out.batch_status != "open",
        "completion_code": out.completion_code,
        "next": (
            _state(out.next, _item_token(request, worker_id, out.next), _prefix(request))
            if out.next is not None
            else None
        ),
    }
    return _json(result, status_code=201 if out.created else 200)


# --- the image ------------------------------------------------------------------------------


@router.get("/images/validate/{assignment_id}.jpg", summary="The leased item's image, marked")
def item_image(
    assignment_id: str,
    request: Request,
    worker: CurrentWorker,
    session: SessionDep,
    settings: SettingsDep,
) -> Response:
    """Addressed by the worker's own lease token, so the URL says nothing about the Example
    and a guessed address opens nothing; answered only under the lease's own study."""
    assert worker.id is not None
    lease_id = lease_from_token(settings.secret_key, worker.id, assignment_id)
    lease = session.get(Assignment, lease_id) if lease_id is not None else None
    if lease is None or lease.worker_id != worker.id or lease.example_id is None:
        raise PageError(404, "No such image.")
    batch = session.get(Batch, lease.batch_id)
    if batch is None or batch.study_id != current_study(request).id:
        raise PageError(404, "No such image.")
    example = session.get(Example, lease.example_id)
    insts = example_instances(session, example) if example is not None else None
    if example is None or insts is None or settings.image_root is None:
        raise PageError(404, "No such image.")
    image = session.get(Image, example.image_id)
    assert image is not None
    path = images.render_marked(
        settings.image_root, settings.image_cache_dir, image, insts[0], insts[1]
    )
    if path is None:
        raise PageError(404, "The image file is missing on the server.")
    # Private: the URL belongs to one worker's lease.
    return FileResponse(
        path, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=3600"}
    )
