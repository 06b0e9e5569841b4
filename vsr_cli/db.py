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
) -> None:
    """Upgrade the database schema to REVISION (default: head)."""
    from migrations.runner import upgrade as run_upgrade

    settings = settings_for(database_url)
    _migrate(run_upgrade, settings.database_url, revision)
    typer.echo(f"database at {revision}: {safe_url(settings.database_url)}")


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
