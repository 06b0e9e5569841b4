"""Roles per study: which role an admin holds in a study (``StudyRoleGrant``), read and changed
here only; the dashboard's route dependencies and the CLI ask ``role_in`` (docs/dashboard.md)."""

from __future__ import annotations

from sqlmodel import Session, select

from vsr_core.models import AdminRole, StudyRoleGrant


def role_in(session: Session, admin_id: int, study_id: int) -> AdminRole | None:
    """The admin's role in the study, or None (no access at all)."""
    grant = session.get(StudyRoleGrant, (admin_id, study_id))
    return AdminRole(grant.role) if grant is not None else None


def studies_of(session: Session, admin_id: int) -> dict[int, AdminRole]:
    """study id -> role, for every study the admin may see."""
    rows = session.exec(select(StudyRoleGrant).where(StudyRoleGrant.admin_id == admin_id))
    return {g.study_id: AdminRole(g.role) for g in rows}
