"""Options and helpers shared by the CLI commands.

Kept free of heavy imports (SQLAlchemy, SQLModel, tqdm load inside the functions): every
command imports this module, and `vsr <command> --help` should start fast.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vsr_cli.failure import CliError, CliUsageError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from vsr_core.models import AdminRole
    from vsr_core.settings import Settings
    from vsr_core.studies.context import StudyContext

# A table every migrated database has (the first revision creates it).
_SCHEMA_TABLE = "imagepair"


def settings_for(database_url: str | None) -> Settings:
    from vsr_core.settings import get_settings

    settings = get_settings()
    if database_url:
        settings = settings.model_copy(update={"database_url": database_url})
    return settings


def safe_url(url: str) -> str:
    """The URL as it may be printed: the password hidden."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from vsr_core.db import normalise_url

    try:
        return make_url(normalise_url(url)).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unreadable URL)"


def sqlite_file(url: str) -> Path | None:
    """The file an SQLite URL names, or None (not SQLite, in memory, or a `file:` URI)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    if parsed.database == ":memory:" or parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


def engine_for(database_url: str | None) -> Engine:
    """An engine on an existing, migrated database, or a one-line CliError that says what to
    do. Never creates a database: SQLite would make an empty file on first connect, and a
    command that only reads must not leave one behind (`vsr db upgrade` creates databases)."""
    from vsr_core.db import make_engine

    url = settings_for(database_url).database_url
    path = sqlite_file(url)
    if path is not None and not path.is_file():
        raise CliError(_no_database(url, path, database_url))
    try:
        engine = make_engine(url)
    except Exception as exc:  # a malformed URL or an unknown driver
        raise CliError(bad_url_message(url, exc)) from exc
    try:
        tables = _table_names(engine)
    except Exception as exc:
        engine.dispose()
        raise CliError(open_failure(url, exc)) from exc
    if _SCHEMA_TABLE not in tables:
        engine.dispose()
        raise CliError(
            f"the database {safe_url(url)} has no schema yet: run `vsr db upgrade` first"
        )
    return engine


def bad_url_message(url: str, exc: BaseException) -> str:
    reason = _first_line(exc)
    if "Can't load plugin" in reason:
        reason = f"unknown kind of database {url.split(':', 1)[0]!r}"
    return (
        f"cannot use the database URL {safe_url(url)}: {reason} "
        "(use sqlite:///path/to/file.db or postgresql+psycopg://user:password@host/db)"
    )


def open_failure(url: str, exc: BaseException) -> str:
    """Why a database could not be opened (or migrated), in one line."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    if isinstance(exc, ArgumentError | NoSuchModuleError):
        return bad_url_message(url, exc)
    return f"cannot open the database {safe_url(url)}: {db_reason(exc)}"


def _table_names(engine: Engine) -> set[str]:
    from sqlalchemy import inspect

    return set(inspect(engine).get_table_names())


def _no_database(url: str, path: Path, given: str | None) -> str:
    if given:
        where = f"--database-url is {safe_url(url)}"
    elif "database_url" in settings_for(None).model_fields_set:  # from the environment
        where = f"DATABASE_URL is {safe_url(url)}"
    else:
        where = f"DATABASE_URL is not set, so the default {safe_url(url)}"
    msg = f"no database at {os.path.abspath(path)} ({where})"
    hints = [
        "run `vsr db upgrade` first to create one",
        "or point --database-url / DATABASE_URL at an existing database",
    ]
    demo = Path("vsr_demo.db")
    if demo.is_file() and path.resolve() != demo.resolve():
        hints.append("the demo's is sqlite:///./vsr_demo.db")
    return f"{msg}: {', '.join(hints)}"


def db_reason(exc: BaseException) -> str:
    """A database failure in plain words: the driver's first line, without the SQL, the
    parameters or the exception's class name."""
    orig: Any = getattr(exc, "orig", None)
    text = _first_line(orig if orig is not None else exc)
    low = text.lower()
    if "unable to open database file" in low:
        return f"{text} (does the folder exist, and may this user write to it?)"
    if (
        "no such table" in low
        or "no such column" in low
        or ("does not exist" in low and ("relation" in low or "column" in low))
    ):
        return f"{text}: the schema is missing or old, run `vsr db upgrade`"
    return text


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    line = lines[0] if lines else "unknown error"
    # SQLAlchemy prefixes "(sqlite3.OperationalError) ": the class name says nothing to a user.
    if line.startswith("(") and ") " in line:
        line = line.split(") ", 1)[1]
    return line[:300]


def progress_bar(*, quiet: bool = False, **kwargs: Any) -> Any:
    """A tqdm bar on stderr that only shows on a terminal (never in logs or pipes, where its
    carriage returns would put the next line, an error say, on the bar's line) and leaves no
    line behind."""
    from tqdm import tqdm

    kwargs.setdefault("leave", False)
    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(disable=True if quiet else None, **kwargs)


def no_library_bars_off_terminal() -> None:
    """Hugging Face's own progress bars (transformers' "Loading weights") only on a terminal:
    in a log or a pipe their carriage returns garble the lines. Read when huggingface_hub is
    first imported, so call this before anything loads a model."""
    import sys

    if not sys.stderr.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


# A stage bar (build, match): the fraction done and the stage, no meaningless "%/s" rate.
STAGE_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {postfix} [{elapsed}]"

DB_HELP = "Database URL (default: $DATABASE_URL, else sqlite:///./vsr.db)"

STUDY_HELP = "The study's slug (default: the default study; see `vsr study list`)"


def study_for(engine: Engine, slug: str | None, needed: AdminRole | None = None) -> StudyContext:
    """The study named by ``--study`` (None: the default one); an unknown slug is a one-line
    error with exit 2. With ``needed``, an admin named by ``VSR_ADMIN`` must hold that role
    in it (vsr_cli.actor; a one-line error otherwise)."""
    from sqlmodel import Session

    from vsr_core.studies.store import StudyError, study_context

    try:
        with Session(engine) as session:
            found = study_context(session, slug)
    except StudyError as exc:
        raise CliUsageError(str(exc)) from None
    if needed is not None:
        from vsr_cli.actor import require_role

        require_role(engine, found.id, needed)
    return found
