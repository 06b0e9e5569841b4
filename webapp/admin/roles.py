"""The dashboard's role checks: each admin route depends on the least role it needs in the
chosen study (``ViewerDep`` reads, ``ResearcherPostDep`` changes the study's data,
``OwnerPostDep`` spends money or manages admins; docs/dashboard.md, "Roles").

A role too low, or none at all, is a 403 in plain words. A GET of a page in a study the admin
holds no role in, reached without asking for it (the default study, or one remembered from an
earlier session), goes to the first study they do hold a role in instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Depends, HTTPException, Request
from sqlmodel import Session, col, select

from vsr_core.models import AdminRole, Study
from vsr_core.roles import studies_of
from webapp.admin import csrf
from webapp.admin.auth import AdminDep, AdminSession
from webapp.admin.pages import admin_study
from webapp.http.deps import SessionDep


def _wants_page(request: Request) -> bool:
    return request.method == "GET" and "text/html" in request.headers.get("accept", "")


def _remember_grants(request: Request, session: Session, grants: dict[int, AdminRole]) -> None:
    """The switcher lists only the studies the admin holds a role in (read by pages.render)."""
    rows = session.exec(
        select(Study).where(col(Study.id).in_(list(grants))).order_by(col(Study.id))
    ).all()
    request.state.admin_studies = [
        (s.slug, s.name + (" (archived)" if s.archived_at else "")) for s in rows
    ]


def check_role(
    request: Request, session: Session, admin: AdminSession, needed: AdminRole
) -> AdminRole:
    """The admin's role in the chosen study if it allows ``needed``; else a 403 (or, for a
    page of a study not asked for, a 303 to one of theirs)."""
    study = admin_study(request)
    grants = studies_of(session, admin.user_id)
    _remember_grants(request, session, grants)
    role = grants.get(study.id)
    request.state.admin_role = role
    if role is not None and role.allows(needed):
        return role
    if role is None and grants and _wants_page(request) and "study" not in request.query_params:
        first = session.get(Study, min(grants))
        if first is not None:
            raise HTTPException(
                status_code=303,
                detail="Going to a study you hold a role in",
                headers={"Location": f"{request.url.path}?{urlencode({'study': first.slug})}"},
            )
    if role is None:
        where = (
            f"You hold no role in the study {study.slug}; ask one of its owners to grant you one."
            if grants
            else "You hold no role in any study yet; ask a study's owner to grant you one "
            "(the Members page, or `vsr admin grant`)."
        )
        raise HTTPException(status_code=403, detail=where)
    raise HTTPException(
        status_code=403,
        detail=f"Your role in the study {study.slug} is {role.value}; this needs {needed.value}.",
    )


def _requires(needed: AdminRole) -> Callable[[Request, AdminSession, Session], AdminSession]:
    def dependency(request: Request, admin: AdminDep, session: SessionDep) -> AdminSession:
        check_role(request, session, admin, needed)
        return admin

    dependency.__name__ = f"requires_{needed.value}"
    return dependency


def _requires_post(
    needed: AdminRole,
) -> Callable[[Request, AdminSession], Awaitable[AdminSession]]:
    role_dependency = _requires(needed)

    # A default, not an Annotated hint: the hint is a string (postponed annotations) that
    # FastAPI resolves in the module's globals, where this closure's variable is not.
    async def dependency(
        request: Request,
        admin: AdminSession = Depends(role_dependency),  # noqa: B008
    ) -> AdminSession:
        await csrf.check_request(request, admin.nonce)
        return admin

    dependency.__name__ = f"requires_{needed.value}_post"
    return dependency


requires_viewer = _requires(AdminRole.viewer)
requires_researcher = _requires(AdminRole.researcher)
requires_owner = _requires(AdminRole.owner)

ViewerDep = Annotated[AdminSession, Depends(requires_viewer)]
ResearcherDep = Annotated[AdminSession, Depends(requires_researcher)]
OwnerDep = Annotated[AdminSession, Depends(requires_owner)]
# State-changing routes: the role AND a valid CSRF token (as auth.AdminPostDep).
ViewerPostDep = Annotated[AdminSession, Depends(_requires_post(AdminRole.viewer))]
ResearcherPostDep = Annotated[AdminSession, Depends(_requires_post(AdminRole.researcher))]
OwnerPostDep = Annotated[AdminSession, Depends(_requires_post(AdminRole.owner))]
