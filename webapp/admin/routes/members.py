"""Members: the study's admins and their roles; its owners grant, change and take away roles
and create admin accounts (docs/dashboard.md, "Roles")."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import Response
from sqlmodel import Session, select

from vsr_core.models import AdminRole, AdminUser
from vsr_core.roles import RoleError, grant, members, revoke
from webapp.admin.auth import AdminAccountError, actor_of, create_admin
from webapp.admin.pages import admin_study, back, render
from webapp.admin.roles import OwnerDep, OwnerPostDep, requires_owner
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_owner)])
log = logging.getLogger(__name__)
ROLE_PATTERN = "^(owner|researcher|viewer)$"
USERNAME_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"


@router.get("/members", include_in_schema=False)
def members_page(request: Request, admin: OwnerDep, session: SessionDep) -> Response:
    return render(
        request,
        admin,
        "members.html",
        "settings",  # reached from the settings page (the top bar has no room for a link)
        members=members(session, admin_study(request).id),
        roles=[r.value for r in AdminRole],
    )


def _account(session: Session, username: str) -> AdminUser:
    user = session.exec(select(AdminUser).where(AdminUser.username == username)).first()
    if user is None:
        raise HTTPException(
            status_code=404,
            detail=f"There is no admin account called {username}; create it below first.",
        )
    return user


@router.post("/members/grant", include_in_schema=False)
def grant_role(
    request: Request,
    admin: OwnerPostDep,
    session: SessionDep,
    username: Annotated[str, Form(pattern=USERNAME_PATTERN)],
    role: Annotated[str, Form(pattern=ROLE_PATTERN)],
) -> Response:
    study = admin_study(request)
    user = _account(session, username)
    try:
        before = grant(session, actor_of(admin), user, study.id, AdminRole(role))
    except RoleError as exc:
        session.rollback()
        raise HTTPException(status_code=409, detail=str(exc)) from None
    session.commit()
    log.info("admin %s made %s %s of study %s", admin.user_id, user.id, role, study.id)
    if before is None:
        return back("/admin/members", f"{username} is now {role} of {study.slug}.")
    if before.value == role:
        return back("/admin/members", f"{username} already was {role}; nothing changed.")
    return back("/admin/members", f"{username}: {before.value} → {role}.")


@router.post("/members/revoke", include_in_schema=False)
def revoke_role(
    request: Request,
    admin: OwnerPostDep,
    session: SessionDep,
    username: Annotated[str, Form(pattern=USERNAME_PATTERN)],
) -> Response:
    study = admin_study(request)
    user = _account(session, username)
    try:
        before = revoke(session, actor_of(admin), user, study.id)
    except RoleError as exc:
        session.rollback()
        raise HTTPException(status_code=409, detail=str(exc)) from None
    session.commit()
    log.info("admin %s took %s's role in study %s", admin.user_id, user.id, study.id)
    return back("/admin/members", f"{username} is no longer {before.value} of {study.slug}.")


@router.post("/members/create", include_in_schema=False)
def create_member(
    request: Request,
    admin: OwnerPostDep,
    session: SessionDep,
    username: Annotated[str, Form(pattern=USERNAME_PATTERN)],
    password: Annotated[str, Form(max_length=1024)],
    role: Annotated[str, Form(pattern=ROLE_PATTERN)],
) -> Response:
    study = admin_study(request)
    try:
        user = create_admin(
            session,
            username,
            password,
            actor=actor_of(admin),
            grants={study.id: AdminRole(role)},
        )
    except AdminAccountError as exc:
        session.rollback()
        raise HTTPException(status_code=422, detail=str(exc)) from None
    log.info("admin %s created admin %s as %s of study %s", admin.user_id, user.id, role, study.id)
    return back(
        "/admin/members",
        f"Admin {username} created as {role} of {study.slug}; give them the password you chose.",
    )
