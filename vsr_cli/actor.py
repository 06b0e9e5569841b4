"""Who acts when a CLI command changes a study: the admin named by ``VSR_ADMIN`` (their role in
the study is checked and the audit trail names them), else the machine's operator, recorded as
``cli:<login>``. The operator holds the database's credentials and with them every power, so
the CLI without ``VSR_ADMIN`` is not limited by roles; it is still recorded (docs/dashboard.md).
"""

from __future__ import annotations

import getpass
import os

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from vsr_cli.failure import CliError
from vsr_core.audit import Actor
from vsr_core.models import AdminRole, AdminUser
from vsr_core.roles import role_in

ADMIN_ENV = "VSR_ADMIN"


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return "unknown"


def cli_actor(session: Session, study_id: int | None, needed: AdminRole | None) -> Actor:
    """The actor of a CLI command on ``study_id``; a one-line CliError when ``VSR_ADMIN`` names
    no admin or an admin whose role in the study is below ``needed``."""
    name = os.environ.get(ADMIN_ENV, "").strip()
    if not name:
        return Actor(f"cli:{_login()}", None, via="cli")
    user = session.exec(select(AdminUser).where(AdminUser.username == name)).first()
    if user is None or user.id is None:
        raise CliError(f"{ADMIN_ENV}={name!r} names no admin account (see `vsr admin create`)")
    if needed is not None and study_id is not None:
        role = role_in(session, user.id, study_id)
        if role is None or not role.allows(needed):
            held = f"is {role.value}" if role is not None else "has no role"
            raise CliError(
                f"admin {name!r} {held} in this study; this command needs {needed.value}"
            )
    return Actor(name, user.id, via="cli")


def require_role(engine: Engine, study_id: int, needed: AdminRole) -> Actor:
    """``cli_actor`` in its own session, for commands that check before they open theirs."""
    with Session(engine) as session:
        return cli_actor(session, study_id, needed)
