"""`vsr db ...`: schema management through Alembic."""

from __future__ import annotations

import typer

from dataset.cli_common import DB_HELP, settings_for

app = typer.Typer(help="Create or upgrade the database schema (Alembic).", no_args_is_help=True)


@app.command("upgrade")
def upgrade(
    revision: str = typer.Argument("head", help="Target revision"),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Upgrade the database schema to REVISION (default: head)."""
    from migrations.runner import upgrade as run_upgrade

    settings = settings_for(database_url)
    run_upgrade(settings.database_url, revision)
    typer.echo(f"database at {revision}: {_safe(settings.database_url)}")


@app.command("downgrade")
def downgrade(
    revision: str = typer.Argument(..., help="Target revision, e.g. -1 or base"),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
) -> None:
    """Downgrade the database schema to REVISION."""
    from migrations.runner import downgrade as run_downgrade

    settings = settings_for(database_url)
    run_downgrade(settings.database_url, revision)
    typer.echo(f"database at {revision}")


def _safe(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
