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

from vsr_core.models import AdminUser, AuditEvent, InviteToken, PlatformStudy, Study
from vsr_core.roles import role_in

VSR = str(Path(sys.executable).parent / "vsr")
ZH_FILE = Path(__file__).resolve().parents[2] / "studies" / "vsr-zh.toml"
PASSWORD = "correct horse battery staple"


def vsr(db_url: str, *args: str, admin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VSR_ADMIN_PASSWORD": PASSWORD, "DATABASE_URL": db_url}
    env.pop("VSR_ADMIN", None)
    env.pop("VSR_ADMIN_SECRET", None)
    env.pop("VSR_DEBUG", None)
    if admin is not None:  # proven by their password (vsr_cli.actor)
        env["VSR_ADMIN"] = admin
        env["VSR_ADMIN_SECRET"] = PASSWORD
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
    with Session(engine) as s:
        default = s.exec(select(Study).where(Study.slug == "vsr")).one()
        ps = PlatformStudy(study_id=default.id or 0, platform="prolific", external_id="x1")
        s.add(ps)
        s.commit()
        common = ("--platform", "prolific", "--platform-study", str(ps.id))
    for command in (
        ("reconcile", *common),
        ("override-minutes", *common, "--minutes", "5", "--reason", "pilot"),
    ):
        one_line_error(
            vsr(db_url, "platform", *command, admin="rita"),
            "admin 'rita' is researcher in this study; this command needs owner",
        )


def _run(db_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`vsr` with exactly the VSR_ADMIN / VSR_ADMIN_SECRET given (none inherited)."""
    full = {**os.environ, "DATABASE_URL": db_url}
    for name in ("VSR_ADMIN", "VSR_ADMIN_SECRET", "VSR_ADMIN_PASSWORD", "VSR_DEBUG"):
        full.pop(name, None)
    full.update(env)
    return subprocess.run(
        [VSR, *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_cli_admin_is_proven_and_checked_like_the_dashboard(
    db_url: str, engine: Engine
) -> None:
    """VSR_ADMIN is a claim until their password or a live token proves it; a viewer of one
    study cannot reset the password of another study's only owner; the trail keeps the
    operating-system login next to the admin."""
    import getpass

    from webapp.admin.auth import verify_password

    assert vsr(db_url, "study", "create", "--file", str(ZH_FILE)).returncode == 0
    for name, study, role in (("viewer-a", "vsr", "viewer"), ("owner-b", "vsr-zh", "owner")):
        res = vsr(db_url, "admin", "create", "--username", name, "--study", study, "--role", role)
        assert res.returncode == 0, res.stderr
    new = "a brand new long password"
    reset = ("admin", "create", "--username", "owner-b", "--update")
    # A name alone proves nothing, and a wrong secret is refused (and recorded).
    one_line_error(
        _run(db_url, *reset, VSR_ADMIN="viewer-a", VSR_ADMIN_PASSWORD=new), "VSR_ADMIN_SECRET"
    )
    wrong = _run(
        db_url, *reset, VSR_ADMIN="viewer-a", VSR_ADMIN_SECRET="guess", VSR_ADMIN_PASSWORD=new
    )
    one_line_error(wrong, "not the password or a live token")
    # Proven, the viewer still may not reset the owner's password.
    proven = {"VSR_ADMIN": "viewer-a", "VSR_ADMIN_SECRET": PASSWORD, "VSR_ADMIN_PASSWORD": new}
    one_line_error(_run(db_url, *reset, **proven), "owner role in every study")
    with Session(engine) as s:
        owner = s.exec(select(AdminUser).where(AdminUser.username == "owner-b")).one()
        assert verify_password(owner.password_hash, PASSWORD)  # unchanged
    # Their own password they may change.
    mine = _run(db_url, "admin", "create", "--username", "viewer-a", "--update", **proven)
    assert mine.returncode == 0, mine.stderr
    # A token proves the owner; the audit row names them and the login that ran it.
    made = _run(
        db_url,
        "admin",
        "token",
        "create",
        "--label",
        "ci",
        VSR_ADMIN="owner-b",
        VSR_ADMIN_SECRET=PASSWORD,
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("vsr_")
    as_owner = {"VSR_ADMIN": "owner-b", "VSR_ADMIN_SECRET": token}
    done = _run(
        db_url, "admin", "grant", "viewer-a", "--study", "vsr-zh", "--role", "viewer", **as_owner
    )
    assert done.returncode == 0, done.stderr
    with Session(engine) as s:
        last = s.exec(select(AuditEvent).order_by(col(AuditEvent.id).desc())).first()
        assert last is not None
        assert (last.kind, last.actor, last.via) == ("role_grant", "owner-b", "cli")
        assert last.os_login == getpass.getuser()
        failed = s.exec(select(AuditEvent).where(AuditEvent.kind == "login_failed")).all()
        assert [(e.target, e.via) for e in failed] == [("viewer-a", "cli")]
    # Revoked, the token proves nothing.
    listed = _run(db_url, "admin", "token", "list", **as_owner).stdout.split("\t")[0]
    assert _run(db_url, "admin", "token", "revoke", listed, **as_owner).returncode == 0
    again = _run(db_url, "admin", "revoke", "viewer-a", "--study", "vsr-zh", **as_owner)
    one_line_error(again, "not the password or a live token")
    # Without VSR_ADMIN the operator acts, recorded as cli:<login> with the login too.
    op = _run(db_url, "admin", "revoke", "viewer-a", "--study", "vsr-zh")
    assert op.returncode == 0, op.stderr
    with Session(engine) as s:
        last = s.exec(select(AuditEvent).order_by(col(AuditEvent.id).desc())).first()
        assert last is not None and last.actor == f"cli:{getpass.getuser()}"
        assert last.os_login == getpass.getuser()
