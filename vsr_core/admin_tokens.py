"""Revocable CLI tokens of admins (docs/security.md, "Who can do what"): an admin proves who
they are to the CLI with their password or one of these. Only a token's SHA-256 is stored, so
the table gives nobody a usable token; revoking one stops it at once."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlmodel import Session, col, select

from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.models import AdminToken, AdminUser, AuditKind
from vsr_core.types import utcnow

PREFIX = "vsr_"  # a token reads as one, so the CLI does not try it as a password first


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def looks_like_token(secret: str) -> bool:
    return secret.startswith(PREFIX)


def create(session: Session, actor: Actor, user: AdminUser, label: str = "") -> tuple[int, str]:
    """A new token of ``user`` (recorded); returns its id and the token, shown once. The
    caller commits."""
    assert user.id is not None
    token = PREFIX + secrets.token_urlsafe(32)
    row = AdminToken(admin_id=user.id, token_hash=_digest(token), label=label[:200])
    session.add(row)
    session.flush()
    assert row.id is not None
    audit.record(
        session,
        actor,
        AuditKind.token_create,
        study_id=None,
        target=user.username,
        change={"token": row.id, "label": row.label},
    )
    return row.id, token


def owner_of(session: Session, token: str) -> int | None:
    """The admin id a live (not revoked) token belongs to, else None."""
    if not looks_like_token(token) or len(token) > 200:
        return None
    digest = _digest(token)
    row = session.exec(select(AdminToken).where(AdminToken.token_hash == digest)).first()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.token_hash, digest):
        return None
    return row.admin_id


def revoke(session: Session, actor: Actor, user: AdminUser, token_id: int) -> bool:
    """Revoke one of ``user``'s tokens (recorded); False when they have no such live token.
    The caller commits."""
    row = session.get(AdminToken, token_id)
    if row is None or row.admin_id != user.id or row.revoked_at is not None:
        return False
    row.revoked_at = utcnow()
    session.add(row)
    audit.record(
        session,
        actor,
        AuditKind.token_revoke,
        study_id=None,
        target=user.username,
        change={"token": token_id},
    )
    return True


def live(session: Session, admin_id: int) -> list[AdminToken]:
    """The admin's tokens not revoked, oldest first."""
    return list(
        session.exec(
            select(AdminToken)
            .where(AdminToken.admin_id == admin_id, col(AdminToken.revoked_at).is_(None))
            .order_by(col(AdminToken.id))
        )
    )
