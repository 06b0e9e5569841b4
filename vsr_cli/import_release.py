"""`vsr import-vsr`: import an existing VSR-format release."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vsr_cli.common import DB_HELP, engine_for, progress_bar
from vsr_cli.failure import CliError

if TYPE_CHECKING:
    from vsr_core.audit import Actor


def import_vsr(
    paths: list[Path] = typer.Argument(  # noqa: B008
        ...,
        help="VSR JSONL files (raw, validated or split files), meta_data.csv, or a release "
        "directory (all of them: raw first).",
    ),
    database_url: str | None = typer.Option(None, "--database-url", help=DB_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Import a VSR-format release into the database (each file all-or-nothing; re-running
    an import changes nothing)."""
    from vsr_dataset.import_vsr import import_path, release_files
    from vsr_dataset.vsr_format import VsrFormatError

    try:
        files = [f for p in paths for f in release_files(p)]
    except VsrFormatError as exc:
        raise CliError(str(exc)) from None
    engine = engine_for(database_url)
    try:
        actor = _actor(engine)
        for f in files:
            total = _count_lines(f) if not quiet and f.suffix == ".jsonl" else None
            with progress_bar(quiet=quiet, desc=f.name, total=total, unit=" lines") as bar:
                try:
                    result = import_path(engine, f, bar.update, actor)
                except VsrFormatError as exc:
                    raise CliError(f"{exc} (nothing from this file was imported)") from None
            typer.echo(result.line())
    finally:
        engine.dispose()


def _actor(engine: Any) -> Actor:
    """Who imports: a release goes into the default study, a researcher's action."""
    from sqlmodel import Session

    from vsr_cli.actor import cli_actor
    from vsr_core.models import DEFAULT_STUDY_ID, AdminRole

    with Session(engine) as session:
        return cli_actor(session, DEFAULT_STUDY_ID, AdminRole.researcher)


def _count_lines(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            return sum(buf.count(b"\n") for buf in iter(lambda: fh.read(1 << 20), b""))
    except OSError:
        return None  # the import itself reports the problem
