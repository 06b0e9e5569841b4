"""Roles from the command line, through the `vsr` entry point on both backends: `vsr admin
create --study --role`, `grant`, `revoke`, `roles`; VSR_ADMIN's role checked by the commands
that change a study; every role change in the audit trail (docs/dashboard.md, "Roles")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from vsr_core.models import AdminUser, AuditEvent, InviteToken, Study
from vsr_core.roles import role_in

VSR = str(Path(sys.executable).parent / "vsr")
ZH_FILE = Path(__file__).resolve().parents[2] / "studies" / "vsr-zh.toml"
PASSWORD = "correct horse battery staple"


def vsr(db_url: str, *args: str, admin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VSR_ADMIN_PASSWORD": PASSWORD, "DATABASE_URL": db_url}
    env.pop("VSR_ADMIN", None)
    env.pop("VSR_DEBUG", None)
    if admin is not None:
        env["VSR_ADMIN"] = admin
    return subprocess.run([VSR, *args], capture_output=True, text=True, env=env, timeout=120)


def one_line_error(res: subprocess.CompletedProcess[str], fragment: str) -> None:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode != 0, res.stdout
    assert "Traceback" not in res.stderr
    assert len(lines) == 1 and fragment in lines[0], res.stderr


def role_of(engine: Engine, username: str, slug: str) -> str | None:
    from vsr_core.models import AdminUser

    with Session(engine) as s:
        user = s.exec(select(AdminUser).where(AdminUser.username == username)).one()
        study = s.exec(select(Study).where(Study.slug == slug)).one()
        assert user.id is not None and study.id is not None
        role = role_in(s, user.id, study.id)
        return role.value if role is not None else None


def trail(engine: Engine) -> list[tuple[str, str, str, str, dict[str, object]]]:
    with Session(engine) as s:
        rows = s.exec(select(AuditEvent).order_by(col(AuditEvent.id))).all()
        return [(e.actor, e.kind, e.target, e.via, e.change) for e in rows]


def test_create_grant_revoke_and_list(db_url: str, engine: Engine) -> None:
    # No --study: an account with no role, and a hint how to give one.
    res = vsr(db_url, "admin", "create", "--username", "alice")
    assert res.returncode == 0, res.stderr
    assert "holds no role in any study yet" in res.stderr and "vsr admin grant alice" in res.stderr
    assert role_of(engine, "alice", "vsr") is None
    res = vsr(db_url, "admin", "create", "--username", "bob", "--study", "vsr", "--role", "owner")
    assert res.returncode == 0 and "roles: owner of vsr" in res.stdout, res.stderr
    assert role_of(engine, "bob", "vsr") == "owner"

    res = vsr(db_url, "admin", "grant", "alice", "--study", "vsr", "--role", "viewer")
    assert res.returncode == 0 and res.stdout.strip() == "alice is viewer of vsr", res.stderr
    res = vsr(db_url, "admin", "grant", "alice", "--study", "vsr", "--role", "researcher")
    assert res.stdout.strip() == "alice is researcher of vsr (was viewer)"
    assert vsr(db_url, "admin", "roles").stdout.splitlines() == [
        "alice\tvsr\tresearcher",
        "bob\tvsr\towner",
    ]
    # The last owner stays; bad input is one line.
    one_line_error(vsr(db_url, "admin", "revoke", "bob", "--study", "vsr"), "only owner")
    one_line_error(
        vsr(db_url, "admin", "grant", "bob", "--study", "vsr", "--role", "viewer"), "only owner"
    )
    one_line_error(
        vsr(db_url, "admin", "grant", "bob", "--study", "vsr", "--role", "god"), "--role takes"
    )
    one_line_error(
        vsr(db_url, "admin", "grant", "bob", "--study", "nosuch", "--role", "viewer"),
        "no study 'nosuch'",
    )
    one_line_error(
        vsr(db_url, "admin", "grant", "carol", "--study", "vsr", "--role", "viewer"),
        "no admin called 'carol'",
    )
    one_line_error(
        vsr(db_url, "admin", "create", "--username", "carol", "--study", "vsr"),
        "--study and --role go together",
    )
    # An admin below owner cannot hand out roles, not even to themselves.
    one_line_error(
        vsr(db_url, "admin", "grant", "alice", "--study", "vsr", "--role", "owner", admin="alice"),
        "admin 'alice' is researcher in this study; this command needs owner",
    )
    res = vsr(db_url, "admin", "grant", "alice", "--study", "vsr", "--role", "owner", admin="bob")
    assert res.returncode == 0, res.stderr
    res = vsr(db_url, "admin", "revoke", "bob", "--study", "vsr", admin="alice")
    assert res.returncode == 0 and res.stdout.strip() == "bob is no longer owner of vsr"
    assert vsr(db_url, "admin", "roles", "--study", "vsr").stdout.splitlines() == [
        "alice\tvsr\towner"
    ]
    assert "bob\t-\tno role" in vsr(db_url, "admin", "roles").stdout

    login = trail(engine)[0][0]
    assert login.startswith("cli:")
    with Session(engine) as s:
        ids = {u.username: u.id for u in s.exec(select(AdminUser))}
    assert trail(engine) == [
        (login, "admin_create", "admin alice", "cli", {"admin_id": ids["alice"]}),
        (login, "admin_create", "admin bob", "cli", {"admin_id": ids["bob"]}),
        (login, "role_grant", "bob", "cli", {"before": None, "after": "owner"}),
        (login, "role_grant", "alice", "cli", {"before": None, "after": "viewer"}),
        (login, "role_grant", "alice", "cli", {"before": "viewer", "after": "researcher"}),
        ("bob", "role_grant", "alice", "cli", {"before": "researcher", "after": "owner"}),
        ("alice", "role_revoke", "bob", "cli", {"before": "owner", "after": None}),
    ]


def test_vsr_admin_role_is_checked_by_commands_that_change_a_study(
    db_url: str, engine: Engine
) -> None:
    for name, role in (("olga", "owner"), ("rita", "researcher"), ("vic", "viewer")):
        res = vsr(db_url, "admin", "create", "--username", name, "--study", "vsr", "--role", role)
        assert res.returncode == 0, res.stderr
    res = vsr(db_url, "admin", "create", "--username", "nora")
    assert res.returncode == 0, res.stderr

    # Invites: researcher and up.
    one_line_error(
        vsr(db_url, "invite", "create", "--label", "x", admin="vic"),
        "admin 'vic' is viewer in this study; this command needs researcher",
    )
    one_line_error(
        vsr(db_url, "invite", "create", "--label", "x", admin="nora"),
        "admin 'nora' has no role in this study; this command needs researcher",
    )
    one_line_error(
        vsr(db_url, "invite", "create", "--label", "x", admin="ghost"), "names no admin account"
    )
    with Session(engine) as s:
        assert not s.exec(select(InviteToken)).all()
    assert vsr(db_url, "invite", "create", "--label", "x", admin="rita").returncode == 0

    # A study made with VSR_ADMIN set is owned by that admin (and by no one without it).
    res = vsr(db_url, "study", "create", "--file", str(ZH_FILE), admin="nora")
    assert res.returncode == 0 and "owner: nora" in res.stdout, res.stderr
    assert role_of(engine, "nora", "vsr-zh") == "owner"
    assert role_of(engine, "olga", "vsr-zh") is None
    assert trail(engine)[-1][:3] == ("nora", "role_grant", "nora")
    # Updating it needs researcher there; archiving needs its owner.
    one_line_error(
        vsr(db_url, "study", "update", "--file", str(ZH_FILE), admin="olga"),
        "admin 'olga' has no role in this study; this command needs researcher",
    )
    one_line_error(
        vsr(db_url, "study", "archive", "vsr", admin="rita"),
        "admin 'rita' is researcher in this study; this command needs owner",
    )
    with Session(engine) as s:
        assert all(study.archived_at is None for study in s.exec(select(Study)))
    res = vsr(db_url, "study", "archive", "vsr-zh", admin="nora")
    assert res.returncode == 0, res.stderr
    # Platform commands (money): owners only.
    one_line_error(
        vsr(
            db_url,
            "platform",
            "create",
            "--platform",
            "prolific",
            "--reward-cents",
            "100",
            "--places",
            "1",
            admin="rita",
        ),
        "this command needs owner",
    )
