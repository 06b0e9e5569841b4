"""An admin account for tests that exercise the dashboard as its owner: an admin created with
no role can see nothing (docs/dashboard.md, "Roles"), so tests of pages and actions make one
that owns every study there is."""

from __future__ import annotations

from sqlmodel import Session, select

from vsr_core.audit import Actor
from vsr_core.models import AdminRole, AdminUser, Study
from vsr_core.roles import grant, studies_of
from webapp.admin.auth import create_admin


def create_owner(session: Session, username: str, password: str) -> AdminUser:
    """A new admin, owner of every study in the database now."""
    studies = session.exec(select(Study.id)).all()
    return create_admin(
        session,
        username,
        password,
        grants={study_id: AdminRole.owner for study_id in studies if study_id is not None},
    )


def own_every_study(session: Session, username: str) -> None:
    """Make the admin owner of every study made since (a test that adds a study later)."""
    user = session.exec(select(AdminUser).where(AdminUser.username == username)).one()
    assert user.id is not None
    held = set(studies_of(session, user.id))
    for study_id in session.exec(select(Study.id)).all():
        if study_id is not None and study_id not in held:
            grant(session, Actor("test"), user, study_id, AdminRole.owner)
    session.commit()
