"""The FastAPI app factory. Nothing is created at import time: settings and engine are passed
in (tests) or built from the environment (``vsr serve``, uvicorn ``--factory``)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy.engine import Engine
from sqlmodel import Session
from starlette.middleware.sessions import SessionMiddleware

from vsr_core.db import make_engine
from vsr_core.models import Worker
from vsr_core.settings import Settings, get_settings, secret_key_problem
from webapp.crowd.leases import LeaseStrategy, PairStrategy
from webapp.http.body_limit import BodySizeLimit
from webapp.http.db_retry import RetryDroppedConnection
from webapp.http.errors import install_error_handlers
from webapp.http.i18n import Catalogs
from webapp.http.i18n import install as install_i18n
from webapp.http.inputs import InputGuard
from webapp.http.security import SecurityHeaders
from webapp.http.study import StudyScope, study_prefix
from webapp.qualify.routes import ScreenOut

WEBAPP_DIR = Path(__file__).resolve().parent
TEMPLATE_ROOMS = (".", "crowd", "generate", "validate", "qualify", "admin")
SESSION_COOKIE = "vsr_session"
SESSION_MAX_AGE = 14 * 24 * 3600


class WeakSecretKeyError(RuntimeError):
    """The app was asked to start without a key only its operator knows."""


def make_templates() -> Jinja2Templates:
    # Jinja2Templates autoescapes .html templates: anything a worker typed is rendered inert.
    # Each room keeps its own templates beside its routes; names stay unique across rooms
    # (admin pages live under "admin/"), and the shared layout is in webapp/templates.
    rooms = [str(WEBAPP_DIR / room / "templates") for room in TEMPLATE_ROOMS]
    # ``prefix``: where the request's study lives ("/s/<slug>", "" for the old links), for
    # links in worker pages (webapp.http.study).
    templates = Jinja2Templates(directory=rooms, context_processors=[study_prefix])
    from webapp.admin.formatting import install as install_admin_filters

    install_admin_filters(templates.env)
    install_i18n(templates.env)  # worker pages in the study's language (webapp.http.i18n)
    return templates


def create_server_app() -> FastAPI:
    """The factory ``vsr serve`` hands uvicorn (one call per worker process): the app, with
    the garbage collector tuned for a long-running server.

    Everything alive now (imported modules, the app, SQLAlchemy's caches) lives as long as
    the process, so ``gc.freeze`` takes it out of every future full collection; without it
    those scanned half a million objects and stalled every request in flight for 50-150 ms
    under load (bench/load/). The larger first threshold makes young collections rarer.
    Not in :func:`create_app`, which tests call many times in one process.
    """
    app = create_app()
    from webapp.http import access_log
    from webapp.http.parent_watch import watch_parent

    access_log.install()  # no participant ids or tokens in uvicorn's access log
    from webapp.admin import warmup

    warmup.log_to_stderr()
    warmup.start(app)  # the dashboard's figures, computed before anyone asks for them
    watch_parent()  # a worker of `vsr serve --workers N` ends with its supervisor
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    return app


def _screenout(app: FastAPI) -> ScreenOut:
    from webapp.platforms import screenout

    def failed(session: Session, study_id: int, worker: Worker, entry: dict[str, Any]) -> bool:
        client = app.state.mturk_client
        factory = (lambda: client) if client is not None else None
        return screenout.qualification_failed(session, study_id, worker, entry, factory)

    return ScreenOut(prolific_code=screenout.prolific_code, failed=failed)


def create_app(settings: Settings | None = None, engine: Engine | None = None) -> FastAPI:
    settings = settings or get_settings()
    problem = secret_key_problem(settings.secret_key)
    if problem is not None:
        # Whoever knows the key forges admin cookies: never serve with a missing or public one
        # (`vsr serve` sets a throw-away key itself on a loopback address).
        raise WeakSecretKeyError(f"{problem}: set it to a long random value (openssl rand -hex 32)")
    # The API description (/docs, /openapi.json) only when API_DOCS is set: it maps every
    # route for whoever asks, so a live site does without it.
    docs = settings.api_docs
    app = FastAPI(
        title="VSR collection",
        version="0.1.0",
        openapi_url="/openapi.json" if docs else None,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
    )
    app.state.settings = settings
    app.state.engine = engine or make_engine(settings)
    app.state.templates = make_templates()
    app.state.catalogs = Catalogs()  # every .po, read once at startup
    # Item selection per kind of crowd work (webapp.crowd.leases.LeaseStrategy); the validation
    # task adds its own under "validate".
    strategies: dict[str, LeaseStrategy] = {"generate": PairStrategy()}
    from webapp.validate.strategy import ExampleStrategy

    strategies["validate"] = ExampleStrategy(sweep_seconds=1.0, floor_seconds=1.0)
    app.state.strategies = strategies
    from webapp.generate.view import task_context as generate_preview

    app.state.task_previews = {"generate": generate_preview}
    # A failed qualification check's platform part (Prolific's code, MTurk's qualification):
    # the platforms room stands above the check's room, so the factory hands it over.
    app.state.mturk_client = None  # None: boto3's client from the environment
    app.state.screenout = _screenout(app)
    # MTurk shows the site in an iframe on mturk.com: a cross-site cookie needs
    # SameSite=None, which browsers accept only with Secure (so only behind https).
    https = settings.base_url.startswith("https://")
    # Innermost: which study the request works in (/s/<slug>/..., the admin's choice).
    app.add_middleware(StudyScope)
    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.secret_key,
        session_cookie=SESSION_COOKIE,
        max_age=SESSION_MAX_AGE,
        same_site="none" if https else "lax",
        https_only=https,
    )
    # Outside the session middleware, so a second attempt starts from the cookie again.
    app.add_middleware(RetryDroppedConnection)
    # A NUL in the URL or a body field is refused before any route or database sees it.
    app.add_middleware(InputGuard)
    # Outside the session middleware: an oversized body is refused before the session cookie
    # is even read.
    app.add_middleware(BodySizeLimit)
    # Outermost, so every answer gets the headers: error pages rendered inside, and the 413
    # that BodySizeLimit sends without calling the app.
    app.add_middleware(SecurityHeaders, hsts=https)
    from webapp.admin.pages import render_error as render_admin_error

    install_error_handlers(app, {"/admin": render_admin_error})
    app.mount("/static", StaticFiles(directory=str(WEBAPP_DIR / "static")), name="static")

    from webapp.admin import routes as admin_routes
    from webapp.crowd import examples, home
    from webapp.crowd import routes as crowd_routes
    from webapp.generate import routes as generate_routes
    from webapp.http import health
    from webapp.qualify import routes as qualify_routes
    from webapp.validate import routes as validate_routes

    # First: routes are matched in order, one by one (FastAPI compares every route before the
    # one that matches), and the validation API is the hottest path. No other router has a
    # path its routes would match (/validate, /api/validate/..., /images/validate/...).
    app.include_router(validate_routes.router)
    app.include_router(health.router)
    app.include_router(home.router)
    app.include_router(examples.router)
    app.include_router(crowd_routes.router)
    app.include_router(generate_routes.router)
    app.include_router(qualify_routes.router)
    app.include_router(admin_routes.router)
    return app
