"""`vsr serve` and `vsr admin ...`: the annotation site (implemented in webapp/)."""

from __future__ import annotations

import typer

from dataset.errors import CliError

admin_app = typer.Typer(help="Manage admin accounts.", no_args_is_help=True)


def serve() -> None:
    """Start the annotation site (not built yet)."""
    raise CliError("`vsr serve` is not built yet")


@admin_app.command("create")
def admin_create() -> None:
    """Create an admin account (not built yet)."""
    raise CliError("`vsr admin create` is not built yet")
