"""`vsr serve` (the annotation site, implemented in webapp/) and `vsr admin ...`."""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vsr_cli.common import DB_HELP
from vsr_cli.failure import CliError, CliUsageError

if TYPE_CHECKING:
    from sqlmodel import Session

    from vsr_core.audit import Actor
    from vsr_core.models import AdminRole, AdminUser

admin_app = typer.Typer(help="Manage admin accounts.", no_args_is_help=True)


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=1, max=65535, envvar="PORT", help="TCP port (env PORT)")
    ] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker processes")] = 1,
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    image_root: Annotated[
        Path | None,
        typer.Option(help="Folder of COCO images (<split>/<file> or <file>) to mark server-side"),
    ] = None,
    reload: Annotated[bool, typer.Option(help="Restart on code changes (development)")] = False,
    access_log: Annotated[
        bool,
        typer.Option(
            help="Log every request (off behind a proxy that logs them: a log line "
            "costs CPU on every round trip, docs/scaling.md)"
        ),
    ] = True,
) -> None:
    """Start the annotation site (FastAPI app factory under uvicorn)."""
    import uvicorn

    from vsr_core.settings import Settings

    # Every uvicorn worker builds its own app from the environment, so options travel as env.
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    if image_root is not None:
        if not image_root.is_dir():
            raise CliUsageError(f"--image-root {image_root} is not a directory")
        os.environ["IMAGE_ROOT"] = str(image_root.resolve())
    if reload and workers > 1:
        raise CliUsageError("--reload works with one worker only")
    # The workers build their settings from the environment: BASE_URL, when unset, follows it.
    os.environ["PORT"] = str(port)
    settings = Settings()
    trusted = ",".join(p.strip() for p in settings.trusted_proxies.split(",") if p.strip())
    _check_database(database_url)
    _ensure_secret_key(settings.secret_key, host)
    _check_port(host, port)
    uvicorn.run(
        "webapp.app:create_server_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        reload=reload,
        access_log=access_log,
        # X-Forwarded-For/-Proto are believed only from TRUSTED_PROXIES (default none): a
        # client could otherwise pick its own address (and dodge per-address limits).
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or None,
    )


def _ensure_secret_key(key: str, host: str) -> None:
    """Refuse to serve with a missing, short or public SECRET_KEY, and off loopback one of too
    little entropy or written in the repository: whoever knows the key forges admin cookies.
    Only a server bound to a loopback address (development on this machine)
    starts without one, with a random key for this run that every worker process inherits."""
    from vsr_core.settings import exposed_key_problem, get_settings, secret_key_problem

    loopback = is_loopback(host)
    problem = secret_key_problem(key) if loopback else exposed_key_problem(key)
    if problem is None:
        return
    if key or not loopback:
        raise CliError(
            f"{problem}: set SECRET_KEY to a long random value (openssl rand -hex 32); only a "
            "server bound to 127.0.0.1 may start without one, for development"
        )
    os.environ["SECRET_KEY"] = secrets.token_hex(32)
    get_settings.cache_clear()  # a single worker builds its app in this process
    typer.secho(
        f"note: SECRET_KEY is not set: using a random key for this run ({host} is loopback, "
        "development only; sessions end when the server stops)",
        err=True,
        fg="yellow",
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an interface to listen on) is reachable from this machine alone."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _check_port(host: str, port: int) -> None:
    """Fail in one line when the port is taken (uvicorn would log a traceback-like block and
    exit 3). A bind-and-release check: another process may still take it before uvicorn binds,
    then uvicorn's own error stands."""
    from vsr_cli.ports import bind_error, busy_message

    exc = bind_error(host, port)
    if exc is not None:
        raise CliError(busy_message(host, port, exc, "--port {port}"))


def _check_database(database_url: str | None) -> None:
    """Fail in one line before starting when the database is missing, unreachable or not
    migrated (and never create an empty SQLite file)."""
    from vsr_cli.common import engine_for

    engine_for(database_url).dispose()


StudyOpt = Annotated[
    list[str] | None,
    typer.Option("--study", help="A study's slug (see `vsr study list`); repeatable"),
]
RoleOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--role",
        help="owner, researcher or viewer: one for every --study, or one per --study in order",
    ),
]


def _role(value: str) -> AdminRole:
    from vsr_core.models import AdminRole

    try:
        return AdminRole(value.strip())
    except ValueError:
        raise CliUsageError(
            f"--role takes owner, researcher or viewer; got {value[:40]!r}"
        ) from None


def _study_roles(
    session: Session, studies: list[str], roles_given: list[str]
) -> dict[int, AdminRole]:
    """study id -> role from the --study and --role options (one role for all, or pairs)."""
    from vsr_core.studies.store import StudyError, resolve_study

    if len(roles_given) not in (1, len(studies)) or (roles_given and not studies):
        raise CliUsageError("give one --role for every --study, or a single --role for all")
    chosen = [_role(r) for r in roles_given] * (len(studies) if len(roles_given) == 1 else 1)
    found: dict[int, AdminRole] = {}
    for slug, role in zip(studies, chosen, strict=True):
        try:
            study = resolve_study(session, slug.strip())
        except StudyError as exc:
            raise CliUsageError(str(exc)) from None
        assert study.id is not None
        found[study.id] = role
    return found


def _owner_of(session: Session, study_ids: Iterable[int]) -> Actor:
    """Roles are managed by a study's owners: a VSR_ADMIN must own every study named."""
    from vsr_cli.actor import cli_actor
    from vsr_core.models import AdminRole

    actor = cli_actor(session, None, None)
    for study_id in study_ids:
        actor = cli_actor(session, study_id, AdminRole.owner)
    return actor


def _may_reset(session: Session, username: str) -> None:
    """``admin create --update`` resets a password: as ``VSR_ADMIN``, one's own, or that of
    an admin whose every study the actor owns (an admin with no role: an owner of some
    study); the operator without ``VSR_ADMIN`` holds the database and may."""
    from sqlmodel import select

    from vsr_cli.actor import proven_admin
    from vsr_core.models import AdminRole, AdminUser
    from vsr_core.roles import studies_of

    actor = proven_admin(session)
    target = session.exec(select(AdminUser).where(AdminUser.username == username.strip())).first()
    if actor is None or target is None or target.id == actor.id:
        return
    assert actor.id is not None and target.id is not None
    mine = studies_of(session, actor.id)
    theirs = studies_of(session, target.id)
    owned = {s for s, r in mine.items() if r == AdminRole.owner}
    if (theirs and not set(theirs) <= owned) or not owned:
        raise CliError(
            f"admin {actor.username!r} may not reset the password of {target.username!r}: "
            "that needs the owner role in every study they hold a role in"
        )


def _no_tables(exc: Exception) -> bool:
    return "no such table" in str(exc) or "does not exist" in str(exc)


@admin_app.command("create")
def admin_create(
    username: Annotated[str, typer.Option(help="Login name (letters, digits, . _ -)")],
    password: Annotated[
        str | None,
        typer.Option(
            envvar="VSR_ADMIN_PASSWORD",
            help="Password (at least 12 characters, not easy to guess); prompted for when "
            "not given "
            "(scripts: set VSR_ADMIN_PASSWORD)",
        ),
    ] = None,
    update: Annotated[
        bool, typer.Option("--update", help="Reset the password of an existing admin")
    ] = False,
    study: StudyOpt = None,
    role: RoleOpt = None,
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Create an admin account for the dashboard at /admin (password hashed with argon2),
    with a role in each --study. Without --study the account holds no role: it sees nothing
    until an owner grants one (`vsr admin grant`, or the dashboard's Members page)."""
    from sqlalchemy.exc import OperationalError, ProgrammingError
    from sqlmodel import Session

    from vsr_cli.common import engine_for
    from vsr_core.roles import RoleError, studies_of
    from webapp.admin.auth import AdminAccountError, create_admin

    if bool(study) != bool(role):
        raise CliUsageError("--study and --role go together")
    if password is None:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            grants = _study_roles(session, study or [], role or [])
            actor = _owner_of(session, grants)
            if update:
                _may_reset(session, username)
            user = create_admin(
                session, username, password, update=update, actor=actor, grants=grants
            )
            held = sorted(studies_of(session, user.id or 0).items())
            names = _slugs(session, [sid for sid, _ in held])
    except (AdminAccountError, RoleError) as exc:
        raise CliError(str(exc)) from None
    except (OperationalError, ProgrammingError) as exc:
        if _no_tables(exc):
            raise CliError("the database has no tables yet: run `vsr db upgrade` first") from None
        raise
    finally:
        engine.dispose()
    typer.echo(f"admin {user.username!r} {'updated' if update else 'created'} (id {user.id})")
    if held:
        typer.echo("roles: " + ", ".join(f"{r.value} of {names[sid]}" for sid, r in held))
    else:
        typer.echo(
            f"{user.username} holds no role in any study yet and sees nothing on the "
            f"dashboard: `vsr admin grant {user.username} --study SLUG --role ROLE`",
            err=True,
        )


def _slugs(session: Session, study_ids: list[int]) -> dict[int, str]:
    from vsr_core.models import Study

    found = {sid: session.get(Study, sid) for sid in study_ids}
    return {sid: s.slug if s is not None else f"#{sid}" for sid, s in found.items()}


def _account(session: Session, username: str) -> AdminUser:
    from sqlmodel import select

    from vsr_core.models import AdminUser

    user = session.exec(select(AdminUser).where(AdminUser.username == username.strip())).first()
    if user is None:
        raise CliError(f"no admin called {username[:64]!r} (see `vsr admin roles`)")
    return user


@admin_app.command("grant")
def admin_grant(
    username: Annotated[str, typer.Argument(help="The admin's login name")],
    study: Annotated[str, typer.Option("--study", help="The study's slug")],
    role: Annotated[str, typer.Option("--role", help="owner, researcher or viewer")],
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Give an admin a role in a study, or change it (with VSR_ADMIN: an owner of it only)."""
    from sqlmodel import Session

    from vsr_cli.common import engine_for
    from vsr_core.roles import RoleError, grant

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            ((study_id, wanted),) = _study_roles(session, [study], [role]).items()
            actor = _owner_of(session, [study_id])
            user = _account(session, username)
            try:
                before = grant(session, actor, user, study_id, wanted)
            except RoleError as exc:
                raise CliError(str(exc)) from None
            name = user.username
            session.commit()
            slug = _slugs(session, [study_id])[study_id]
    finally:
        engine.dispose()
    was = f" (was {before.value})" if before is not None and before != wanted else ""
    same = " (unchanged)" if before == wanted else ""
    typer.echo(f"{name} is {wanted.value} of {slug}{was}{same}")


@admin_app.command("revoke")
def admin_revoke(
    username: Annotated[str, typer.Argument(help="The admin's login name")],
    study: Annotated[str, typer.Option("--study", help="The study's slug")],
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Take away an admin's role in a study (a study always keeps one owner)."""
    from sqlmodel import Session

    from vsr_cli.common import engine_for
    from vsr_core.roles import RoleError, revoke

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            ((study_id, _),) = _study_roles(session, [study], ["viewer"]).items()
            actor = _owner_of(session, [study_id])
            user = _account(session, username)
            try:
                before = revoke(session, actor, user, study_id)
            except RoleError as exc:
                raise CliError(str(exc)) from None
            name = user.username
            session.commit()
            slug = _slugs(session, [study_id])[study_id]
    finally:
        engine.dispose()
    typer.echo(f"{name} is no longer {before.value} of {slug}")


token_app = typer.Typer(
    help="Revocable tokens that prove VSR_ADMIN to the CLI instead of a password.",
    no_args_is_help=True,
)
admin_app.add_typer(token_app, name="token")


def _token_owner(session: Session) -> AdminUser:
    from vsr_cli.actor import ADMIN_ENV, proven_admin

    user = proven_admin(session)
    if user is None:
        raise CliError(f"set {ADMIN_ENV} to the admin whose tokens these are")
    return user


@token_app.command("create")
def token_create(
    label: Annotated[str, typer.Option(help="What the token is for (a script, a machine)")] = "",
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Make a token of VSR_ADMIN (proven by their password); printed once, stored hashed.
    Scripts set it as VSR_ADMIN_SECRET."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_cli.common import engine_for
    from vsr_core import admin_tokens

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            user = _token_owner(session)
            name = user.username
            token_id, token = admin_tokens.create(
                session, cli_actor(session, None, None), user, label
            )
            session.commit()
    finally:
        engine.dispose()
    typer.echo(
        f"token {token_id} of {name} (shown once; revoke: vsr admin token revoke {token_id}):",
        err=True,
    )
    typer.echo(token)


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[int, typer.Argument(help="The token's number (vsr admin token list)")],
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Revoke one of VSR_ADMIN's tokens: it proves nothing from now on."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_cli.common import engine_for
    from vsr_core import admin_tokens

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            user = _token_owner(session)
            name = user.username
            if not admin_tokens.revoke(session, cli_actor(session, None, None), user, token_id):
                raise CliError(f"{name} has no live token {token_id}")
            session.commit()
    finally:
        engine.dispose()
    typer.echo(f"token {token_id} revoked")


@token_app.command("list")
def token_list(database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None) -> None:
    """VSR_ADMIN's live tokens: number, made, label."""
    from sqlmodel import Session

    from vsr_cli.common import engine_for
    from vsr_core import admin_tokens

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            user = _token_owner(session)
            assert user.id is not None
            for row in admin_tokens.live(session, user.id):
                typer.echo(f"{row.id}\t{row.created_at.isoformat()}\t{row.label}")
    finally:
        engine.dispose()


@admin_app.command("roles")
def admin_roles(
    study: Annotated[
        str | None, typer.Option("--study", help="Only this study's admins (a slug)")
    ] = None,
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """List every admin and their role in each study (one line per admin and study; admins
    without any role are listed with "no role")."""
    from sqlmodel import Session, col, select

    from vsr_cli.common import engine_for
    from vsr_core.models import AdminUser, Study, StudyRoleGrant

    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            only = None
            if study is not None:
                ((only, _),) = _study_roles(session, [study], ["viewer"]).items()
            slugs = {s.id: s.slug for s in session.exec(select(Study))}
            admins = session.exec(select(AdminUser).order_by(col(AdminUser.username))).all()
            grants: dict[int, list[StudyRoleGrant]] = {}
            for g in session.exec(select(StudyRoleGrant).order_by(col(StudyRoleGrant.study_id))):
                grants.setdefault(g.admin_id, []).append(g)
            lines = []
            for admin in admins:
                mine = [g for g in grants.get(admin.id or 0, []) if only in (None, g.study_id)]
                lines += [f"{admin.username}\t{slugs.get(g.study_id)}\t{g.role}" for g in mine]
                if not mine and only is None:
                    lines.append(f"{admin.username}\t-\tno role")
    finally:
        engine.dispose()
    typer.echo("\n".join(lines) if lines else "no admins")


@admin_app.command("run-job", hidden=True)
def admin_run_job(
    job_id: Annotated[int, typer.Argument(help="Job id (the dashboard starts these itself)")],
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Run one background job queued from the dashboard (used by the web server)."""
    from vsr_cli.admin_jobs import run_job
    from vsr_cli.common import engine_for
    from vsr_core.models import JobStatus

    engine = engine_for(database_url)
    try:
        job = run_job(engine, job_id)
    except (LookupError, RuntimeError) as exc:
        raise CliError(str(exc)) from None
    finally:
        engine.dispose()
    typer.echo(f"job {job_id} {job.status}: {job.message}")
    if job.status != JobStatus.succeeded:
        raise typer.Exit(1)
