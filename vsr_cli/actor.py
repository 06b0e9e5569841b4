"""Who acts when a CLI command changes a study: the admin named by ``VSR_ADMIN``, proven by
their password or one of their tokens (``VSR_ADMIN_SECRET``, or asked for at a terminal),
whose role in the study is checked as the dashboard checks it; else the machine's operator,
recorded as ``cli:<login>``. Either way the audit row keeps the operating-system login.

The operator holds the database's credentials and with them every power, so the CLI without
``VSR_ADMIN`` is not limited by roles; it is still recorded (docs/security.md, "Who can do
what").
"""

from __future__ import annotations

import getpass
import hashlib
import os
import sys

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from vsr_cli.failure import CliError
from vsr_core import admin_tokens
from vsr_core.audit import Actor
from vsr_core.models import AdminRole, AdminUser, AuditKind
from vsr_core.roles import role_in

ADMIN_ENV = "VSR_ADMIN"
SECRET_ENV = "VSR_ADMIN_SECRET"

# (admin name, SHA-256 of the secret) -> admin id, once proven in this process: one command
# asks for the actor several times, and a password check costs an argon2 hash.
_proven: dict[tuple[str, str], int] = {}


def os_login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return "unknown"


def _secret(name: str) -> str:
    secret = os.environ.get(SECRET_ENV, "")
    if not secret and sys.stdin.isatty():
        secret = getpass.getpass(f"Password or token of admin {name}: ")
    if not secret:
        raise CliError(
            f"{ADMIN_ENV}={name!r} needs their password or a token (`vsr admin token create`) "
            f"in {SECRET_ENV}, or a terminal to type it in"
        )
    return secret


def _prove(session: Session, user: AdminUser) -> None:
    """The secret given is the admin's password or one of their live tokens; else a one-line
    CliError (and a failed-login record, as the dashboard keeps)."""
    from webapp.admin.auth import verify_password

    assert user.id is not None
    secret = _secret(user.username)
    key = (user.username, hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest())
    if _proven.get(key) == user.id:
        return
    if admin_tokens.looks_like_token(secret):
        ok = admin_tokens.owner_of(session, secret) == user.id
    else:
        ok = verify_password(user.password_hash, secret)
    if not ok:
        from vsr_core import audit

        # In the command's own session, after letting go of anything it began (so nothing
        # of the refused command is written, and SQLite's one write lock is this session's).
        session.rollback()
        audit.record(
            session,
            Actor(user.username, None, via="cli", os_login=os_login()),
            AuditKind.login_failed,
            study_id=None,
            target=user.username,
        )
        session.commit()
        raise CliError(
            f"{SECRET_ENV} is not the password or a live token of admin {user.username!r}"
        )
    _proven[key] = user.id


def proven_admin(session: Session) -> AdminUser | None:
    """The admin named by ``VSR_ADMIN``, proven; None without ``VSR_ADMIN``."""
    name = os.environ.get(ADMIN_ENV, "").strip()
    if not name:
        return None
    user = session.exec(select(AdminUser).where(AdminUser.username == name)).first()
    if user is None or user.id is None:
        raise CliError(f"{ADMIN_ENV}={name!r} names no admin account (see `vsr admin create`)")
    _prove(session, user)
    return user


def cli_actor(session: Session, study_id: int | None, needed: AdminRole | None) -> Actor:
    """The actor of a CLI command on ``study_id``; a one-line CliError when ``VSR_ADMIN``
    names no admin, is not proven, or holds a role in the study below ``needed``."""
    user = proven_admin(session)
    if user is None:
        return Actor(f"cli:{os_login()}", None, via="cli", os_login=os_login())
    assert user.id is not None
    if needed is not None and study_id is not None:
        role = role_in(session, user.id, study_id)
        if role is None or not role.allows(needed):
            held = f"is {role.value}" if role is not None else "has no role"
            raise CliError(
                f"admin {user.username!r} {held} in this study; this command needs {needed.value}"
            )
    return Actor(user.username, user.id, via="cli", os_login=os_login())


def require_role(engine: Engine, study_id: int, needed: AdminRole) -> Actor:
    """``cli_actor`` in its own session, for commands that check before they open theirs."""
    with Session(engine) as session:
        return cli_actor(session, study_id, needed)
