"""Admin accounts and the admin session cookie.

Passwords are hashed with argon2 (argon2-cffi). The session is a cookie signed with
itsdangerous under its own salt, so a worker's cookie (or any other cookie signed with the
same SECRET_KEY) can never pass as an admin session.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from fastapi import Depends, HTTPException, Request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlmodel import Session, select

from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.models import AdminRole, AdminUser, AuditKind
from vsr_core.types import utcnow
from webapp.http.deps import SessionDep

COOKIE_NAME = "vsr_admin"
SESSION_MAX_AGE = 12 * 3600
_SALT = "vsr-admin-session-v1"
_hasher = PasswordHasher()


class AdminAccountError(ValueError):
    """Bad username/password when creating an account (message is shown to the user)."""


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


MIN_PASSWORD_LENGTH = 12
# zxcvbn's score, 0-4: 3 is "safely unguessable" (about 1e8 guesses and more); its word lists
# hold the common passwords ("password1234", "qwertyuiop12") and keyboard walks.
MIN_PASSWORD_SCORE = 3
MAX_PASSWORD_LENGTH = 1024  # the login form's limit: a longer one could never be typed in
_CHECKED_CHARACTERS = 100  # zxcvbn's time grows fast with length; the start is what it needs


def password_problem(password: str, username: str = "") -> str | None:
    """Why this admin password is refused (None: it is accepted): too short, or easy to
    guess (a common password, a keyboard walk, the username, repeats)."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"password must be at least {MIN_PASSWORD_LENGTH} characters"
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"password must be at most {MAX_PASSWORD_LENGTH} characters"
    from zxcvbn import zxcvbn

    result = zxcvbn(password[:_CHECKED_CHARACTERS], user_inputs=[username, "vsr", "admin"])
    if result["score"] >= MIN_PASSWORD_SCORE:
        return None
    why = str(result["feedback"].get("warning") or "").rstrip(".")
    return (
        f"password is too easy to guess{': ' + why[:1].lower() + why[1:] if why else ''}; "
        "use a longer one, for example four or more unrelated words"
    )


def validate_credentials(username: str, password: str) -> tuple[str, str]:
    username = username.strip()
    if (
        not username
        or len(username) > 64
        or not username.replace("_", "").replace(".", "").replace("-", "").isalnum()
    ):
        raise AdminAccountError("username must be 1-64 letters, digits, '.', '_' or '-'")
    problem = password_problem(password, username)
    if problem is not None:
        raise AdminAccountError(problem)
    return username, password


def create_admin(
    session: Session,
    username: str,
    password: str,
    *,
    update: bool = False,
    actor: Actor | None = None,
    grants: Mapping[int, AdminRole] | None = None,
) -> AdminUser:
    """Create an admin (or reset the password of an existing one when ``update``), with a
    role in each study of ``grants``. With an ``actor`` the creation and every role given
    are in the audit trail, committed with the account."""
    from vsr_core import roles

    username, password = validate_credentials(username, password)
    existing = session.exec(select(AdminUser).where(AdminUser.username == username)).first()
    if existing is not None and not update:
        raise AdminAccountError(f"admin {username!r} already exists (use --update to reset it)")
    if existing is not None and verify_password(existing.password_hash, password):
        user = existing  # the same password again (a re-run demo): its sessions stay valid
    else:
        user = existing or AdminUser(username=username, password_hash="")
        user.password_hash = hash_password(password)
        if existing is not None:
            user.session_version += 1  # a new password ends every session of the old one
        session.add(user)
        session.flush()
        if actor is not None:
            audit.record(
                session,
                actor,
                AuditKind.password_change if existing is not None else AuditKind.admin_create,
                study_id=None,
                target=f"admin {username}",
                change={"admin_id": user.id},
            )
    for study_id, role in (grants or {}).items():
        roles.grant(session, actor or Actor("system", None, via="cli"), user, study_id, role)
    session.commit()
    session.refresh(user)
    return user


def authenticate(session: Session, username: str, password: str) -> AdminUser | None:
    user = session.exec(select(AdminUser).where(AdminUser.username == username.strip())).first()
    if user is None:
        # Spend the same time as a real check so timing does not reveal valid usernames.
        verify_password(_dummy_hash(), password)
        return None
    if not verify_password(user.password_hash, password):
        return None
    if _hasher.check_needs_rehash(user.password_hash):
        user.password_hash = hash_password(password)
    user.last_login_at = utcnow()
    session.add(user)
    assert user.id is not None
    audit.record(
        session, Actor(user.username, user.id), AuditKind.login, study_id=None, target=user.username
    )
    session.commit()
    session.refresh(user)
    return user


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    return _hasher.hash("not-a-real-password")


def _serializer(secret_key: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key, salt=_SALT)


@dataclass(frozen=True)
class AdminSession:
    user_id: int
    username: str
    nonce: str  # per-login random value; the CSRF token is derived from it
    version: int = 0  # the account's session_version when the cookie was made


def actor_of(admin: AdminSession) -> Actor:
    """The admin as the audit trail names them."""
    return Actor(admin.username, admin.user_id, via="dashboard")


def make_session_cookie(secret_key: str, user: AdminUser) -> str:
    assert user.id is not None
    payload = {
        "uid": user.id,
        "u": user.username,
        "n": secrets.token_urlsafe(16),
        "v": user.session_version,
    }
    return _serializer(secret_key).dumps(payload)


def read_session_cookie(secret_key: str, value: str | None) -> AdminSession | None:
    if not value:
        return None
    try:
        data: Any = _serializer(secret_key).loads(value, max_age=SESSION_MAX_AGE)
    except BadSignature:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("uid"), int):
        return None
    version = data.get("v")
    return AdminSession(
        user_id=data["uid"],
        username=str(data.get("u", "")),
        nonce=str(data.get("n", "")),
        version=version if isinstance(version, int) else -1,
    )


def end_sessions(session: Session, admin: AdminSession) -> None:
    """Revoke every session cookie of this admin (logout ends them all, server-side)."""
    user = session.get(AdminUser, admin.user_id)
    if user is not None:
        user.session_version += 1
        session.add(user)
        audit.record(
            session, actor_of(admin), AuditKind.logout, study_id=None, target=admin.username
        )
        session.commit()


class AdminLoginRequired(HTTPException):
    """Raised for anonymous visitors and workers on any admin URL."""


def current_admin_session(request: Request, session: SessionDep) -> AdminSession:
    """The logged-in admin, or: GET of a page -> 303 to the login form; anything else -> 403."""
    settings = request.app.state.settings
    admin = read_session_cookie(settings.secret_key, request.cookies.get(COOKIE_NAME))
    # The account must still exist (deleting an admin ends their sessions) and the cookie
    # must be of its current session version (logout and password change raise it).
    user = session.get(AdminUser, admin.user_id) if admin is not None else None
    if admin is not None and user is not None and user.session_version == admin.version:
        request.state.admin = admin
        return admin
    wants_page = request.method == "GET" and "text/html" in request.headers.get("accept", "")
    if wants_page:
        from urllib.parse import quote

        target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        raise AdminLoginRequired(
            status_code=303,
            detail="Please log in",
            headers={"Location": f"/admin/login?next={target}"},
        )
    raise AdminLoginRequired(status_code=403, detail="Admins only: please log in at /admin/login")


AdminDep = Annotated[AdminSession, Depends(current_admin_session)]


async def admin_with_csrf(request: Request, admin: AdminDep) -> AdminSession:
    """For state-changing routes: a logged-in admin AND a valid CSRF token."""
    from webapp.admin import csrf

    await csrf.check_request(request, admin.nonce)
    return admin


AdminPostDep = Annotated[AdminSession, Depends(admin_with_csrf)]
