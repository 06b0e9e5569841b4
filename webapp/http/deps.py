"""Dependencies injected into routes: the DB session, settings and templates."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from vsr_core.db import is_dropped_connection
from vsr_core.settings import Settings
from vsr_core.studies.context import StudyContext
from webapp.http.study import current_study

log = logging.getLogger("webapp")


def get_session(request: Request) -> Iterator[Session]:
    session = Session(request.app.state.engine)
    try:
        yield session
    finally:
        try:
            session.close()
        except DBAPIError as exc:
            # The database went away after the answer was made (the closing ROLLBACK found
            # the connection dead; it is invalidated already). Raised, it would reach the
            # server after the response had started, and uvicorn would drop the client's
            # keep-alive connection: behind nginx, the next request on it became a 502.
            if not is_dropped_connection(exc):
                raise
            log.warning(
                "database connection lost while closing the session of %s %s",
                request.method,
                request.url.path,
            )


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def get_templates(request: Request) -> Jinja2Templates:
    return request.app.state.templates  # type: ignore[no-any-return]


async def get_study(request: Request) -> StudyContext:
    """The request's study (webapp.http.study); async, so no thread hop on the hot path."""
    return current_study(request)


T = TypeVar("T")


def app_owned(request: Request, name: str, make: Callable[[], T]) -> T:
    """The app's own ``name`` object, made by ``make`` on first use: one per app instance, so
    one per server process and a fresh one in every test app."""
    found = getattr(request.app.state, name, None)
    if found is None:
        found = make()
        setattr(request.app.state, name, found)
    return found


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
TemplatesDep = Annotated[Jinja2Templates, Depends(get_templates)]
StudyDep = Annotated[StudyContext, Depends(get_study)]
