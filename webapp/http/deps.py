"""Dependencies injected into routes: the DB session, settings and templates."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates
from sqlmodel import Session

from vsr_core.settings import Settings
from vsr_core.study_context import StudyContext
from webapp.http.study import current_study


def get_session(request: Request) -> Iterator[Session]:
    with Session(request.app.state.engine) as session:
        yield session


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
    return found  # type: ignore[no-any-return]


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
TemplatesDep = Annotated[Jinja2Templates, Depends(get_templates)]
StudyDep = Annotated[StudyContext, Depends(get_study)]
