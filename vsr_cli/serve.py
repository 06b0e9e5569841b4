"""`vsr serve` (the annotation site, implemented in webapp/) and `vsr admin ...`."""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path
from typing import Annotated

import typer

from vsr_cli.common import DB_HELP
from vsr_cli.failure import CliError, CliUsageError

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
    """Refuse to serve with a missing, short or public SECRET_KEY: whoever knows the key forges
    admin cookies. Only a server bound to a loopback address (development on this machine)
    starts without one, with a random key for this run that every worker process inherits."""
    from vsr_core.settings import get_settings, secret_key_problem

    problem = secret_key_problem(key)
    if problem is None:
        return
    if key or not is_loopback(host):
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
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As uvicorn binds: SO_REUSEADDR, so a port in TIME_WAIT is not mistaken for busy.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CliError(
                f"port {port} on {host} is not free ({exc.strerror}): stop what uses it or "
                f"choose another (--port, or PORT=8100 bash scripts/demo.sh)"
            ) from None


def _check_database(database_url: str | None) -> None:
    """Fail in one line before starting when the database is missing, unreachable or not
    migrated (and never create an empty SQLite file)."""
    from vsr_cli.common import engine_for

    engine_for(database_url).dispose()


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
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Create an admin account for the dashboard at /admin (password hashed with argon2)."""
    from sqlalchemy.exc import OperationalError, ProgrammingError
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_cli.common import engine_for
    from webapp.admin.auth import AdminAccountError, create_admin

    if password is None:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    engine = engine_for(database_url)
    try:
        with Session(engine) as session:
            user = create_admin(
                session, username, password, update=update, actor=cli_actor(session, None, None)
            )
    except AdminAccountError as exc:
        raise CliError(str(exc)) from None
    except (OperationalError, ProgrammingError) as exc:
        if "no such table" in str(exc) or "does not exist" in str(exc):
            raise CliError("the database has no tables yet: run `vsr db upgrade` first") from None
        raise
    finally:
        engine.dispose()
    typer.echo(f"admin {user.username!r} {'updated' if update else 'created'} (id {user.id})")


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
