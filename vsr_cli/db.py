"""`vsr db ...`: schema management through Alembic."""

from __future__ import annotations

from collections.abc import Callable

import typer

from vsr_cli.common import DB_HELP, open_failure, safe_url, settings_for
from vsr_cli.failure import CliError

app = typer.Typer(help="Create or upgrade the database schema (Alembic).", no_args_is_help=True)


@app.command("upgrade")
def upgrade(
    revision: str = typer.Argument("head", help="Target revision"),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
    app_role: str | None = typer.Option(
        None,
        "--app-role",
        help="PostgreSQL: then grant this login role (not the owner, not a superuser) "
        "read and write on every table but only SELECT and INSERT on the audit trail; "
        "the web app connects as it (docs/deployment.md)",
    ),
) -> None:
    """Upgrade the database schema to REVISION (default: head)."""
    from migrations.runner import upgrade as run_upgrade

    settings = settings_for(database_url)
    _migrate(run_upgrade, settings.database_url, revision)
    typer.echo(f"database at {revision}: {safe_url(settings.database_url)}")
    if app_role is not None:
        _grant(settings.database_url, app_role)
        typer.echo(f"{app_role} may add to and read the audit trail, never change it")


def _grant(url: str, role: str) -> None:
    from sqlalchemy.exc import DBAPIError

    from migrations.app_role import AppRoleError, grant_app_role

    try:
        grant_app_role(url, role)
    except AppRoleError as exc:
        raise CliError(f"--app-role {role}: {exc}") from exc
    except DBAPIError as exc:
        first = str(exc.orig or exc).splitlines()[0]
        raise CliError(f"--app-role {role}: the database refused the grants: {first}") from exc


@app.command("downgrade")
def downgrade(
    revision: str = typer.Argument(..., help="Target revision, e.g. -1 or base"),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Downgrade the database schema to REVISION."""
    from migrations.runner import downgrade as run_downgrade

    settings = settings_for(database_url)
    _migrate(run_downgrade, settings.database_url, revision)
    typer.echo(f"database at {revision}")


def _migrate(step: Callable[[str, str], None], url: str, revision: str) -> None:
    """Run one Alembic step; an unreachable database or a bad URL is one plain line."""
    from alembic.util import CommandError
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    try:
        step(url, revision)
    except CommandError as exc:  # e.g. an unknown revision
        raise CliError(f"{exc} (`vsr db upgrade` with no revision goes to the latest)") from exc
    except (OperationalError, ArgumentError, NoSuchModuleError) as exc:
        raise CliError(open_failure(url, exc)) from exc
