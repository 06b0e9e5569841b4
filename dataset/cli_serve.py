"""`vsr serve` (the annotation site, implemented in webapp/) and `vsr admin ...`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from dataset.cli_common import DB_HELP
from dataset.errors import CliError

admin_app = typer.Typer(help="Manage admin accounts.", no_args_is_help=True)


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="Worker processes")] = 1,
    database_url: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    image_root: Annotated[
        Path | None,
        typer.Option(help="Folder of COCO images (<split>/<file> or <file>) to mark server-side"),
    ] = None,
    reload: Annotated[bool, typer.Option(help="Restart on code changes (development)")] = False,
) -> None:
    """Start the annotation site (FastAPI app factory under uvicorn)."""
    import uvicorn

    from core.settings import Settings

    # Every uvicorn worker builds its own app from the environment, so options travel as env.
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    if image_root is not None:
        if not image_root.is_dir():
            raise CliError(f"--image-root {image_root} is not a directory")
        os.environ["IMAGE_ROOT"] = str(image_root.resolve())
    if reload and workers > 1:
        raise CliError("--reload works with one worker only")
    settings = Settings()
    _check_database(settings.database_url)
    uvicorn.run(
        "webapp.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        reload=reload,
        proxy_headers=True,
    )


def _check_database(url: str) -> None:
    """Fail in one line before starting when the database is unreachable or not migrated."""
    from sqlalchemy import inspect

    from core.db import make_engine

    engine = make_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
    except Exception as exc:
        raise CliError(f"cannot open the database: {str(exc).splitlines()[0]}") from exc
    finally:
        engine.dispose()
    if "imagepair" not in tables:
        raise CliError("the database has no schema yet: run `vsr db upgrade` first")


@admin_app.command("create")
def admin_create() -> None:
    """Create an admin account (not built yet)."""
    raise CliError("`vsr admin create` is not built yet")
