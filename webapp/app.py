"""The FastAPI app factory. Nothing is created at import time: settings and engine are passed
in (tests) or built from the environment (``vsr serve``, uvicorn ``--factory``)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy.engine import Engine

from core.db import make_engine
from core.settings import Settings, get_settings

WEBAPP_DIR = Path(__file__).resolve().parent


def make_templates() -> Jinja2Templates:
    # Jinja2Templates autoescapes .html templates: anything a worker typed is rendered inert.
    return Jinja2Templates(directory=str(WEBAPP_DIR / "templates"))


def create_app(settings: Settings | None = None, engine: Engine | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(title="VSR collection", version="0.1.0")
    app.state.settings = settings
    app.state.engine = engine or make_engine(settings)
    app.state.templates = make_templates()
    app.mount("/static", StaticFiles(directory=str(WEBAPP_DIR / "static")), name="static")

    from webapp.routes import health

    app.include_router(health.router)
    return app
