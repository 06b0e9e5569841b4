"""Roles per study: which role an admin holds in a study (``StudyRoleGrant``), read and changed
here only; the dashboard's route dependencies and the CLI ask ``role_in`` (docs/dashboard.md)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.models import AdminRole, AdminUser, AuditKind, Study, StudyRoleGrant


def role_in(session: Session, admin_id: int, study_id: int) -> AdminRole | None:
    """The admin's role in the study, or None (no access at all)."""
    grant = session.get(StudyRoleGrant, (admin_id, study_id))
    return AdminRole(grant.role) if grant is not None else None


def studies_of(session: Session, admin_id: int) -> dict[int, AdminRole]:
    """study id -> role, for every study the admin may see."""
    rows = session.exec(select(StudyRoleGrant).where(StudyRoleGrant.admin_id == admin_id))
    return {g.study_id: AdminRole(g.role) for g in rows}


def owns_every_study(session: Session, admin_id: int) -> bool:
    """The admin is owner of every study there is (archived ones too): the one who may act on
    a worker in every study at once (vsr_core.standing)."""
    held = studies_of(session, admin_id)
    every = [s for s in session.exec(select(Study.id)).all() if s is not None]
    return bool(every) and all(held.get(s) == AdminRole.owner for s in every)


class RoleError(ValueError):
    """A role change that is refused (the message is shown to the admin as is)."""


def _owner_count(session: Session, study_id: int) -> int:
    # Locked on PostgreSQL so two owners demoting each other at once cannot both pass.
    query = select(StudyRoleGrant).where(
        StudyRoleGrant.study_id == study_id, StudyRoleGrant.role == AdminRole.owner.value
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update()
    return len(session.exec(query).all())


def grant(
    session: Session, actor: Actor, admin: AdminUser, study_id: int, role: AdminRole
) -> AdminRole | None:
    """Give ``admin`` the ``role`` in the study (a new grant or a change) and record it; the
    previous role is returned. The caller commits. The study's last owner stays an owner."""
    assert admin.id is not None
    existing = session.get(StudyRoleGrant, (admin.id, study_id))
    before = AdminRole(existing.role) if existing is not None else None
    if before == role:
        return before
    if before == AdminRole.owner and _owner_count(session, study_id) <= 1:
        raise RoleError(
            f"{admin.username} is the study's only owner; make another admin owner first"
        )
    row = existing or StudyRoleGrant(admin_id=admin.id, study_id=study_id, role=role.value)
    row.role = role.value
    session.add(row)
    audit.record(
        session,
        actor,
        AuditKind.role_grant,
        study_id=study_id,
        target=admin.username,
        change={"before": before.value if before else None, "after": role.value},
    )
    return before


def revoke(session: Session, actor: Actor, admin: AdminUser, study_id: int) -> AdminRole:
    """Take away the admin's role in the study and record it; the role it was is returned.
    The caller commits. The study's last owner cannot be removed."""
    assert admin.id is not None
    existing = session.get(StudyRoleGrant, (admin.id, study_id))
    if existing is None:
        raise RoleError(f"{admin.username} holds no role in this study")
    before = AdminRole(existing.role)
    if before == AdminRole.owner and _owner_count(session, study_id) <= 1:
        raise RoleError(
            f"{admin.username} is the study's only owner; make another admin owner first"
        )
    session.delete(existing)
    audit.record(
        session,
        actor,
        AuditKind.role_revoke,
        study_id=study_id,
        target=admin.username,
        change={"before": before.value, "after": None},
    )
    return before


def members(session: Session, study_id: int) -> list[tuple[AdminUser, AdminRole]]:
    """The study's admins and their roles, owners first, then by name."""
    rows = session.exec(
        select(AdminUser, StudyRoleGrant)
        .join(StudyRoleGrant, col(StudyRoleGrant.admin_id) == AdminUser.id)
        .where(StudyRoleGrant.study_id == study_id)
    ).all()
    found = [(user, AdminRole(g.role)) for user, g in rows]
    return sorted(found, key=lambda pair: (-pair[1].rank, pair[0].username))
