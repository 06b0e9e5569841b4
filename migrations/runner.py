"""Run Alembic programmatically, so `vsr db upgrade` works from an installed package."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config

from vsr_core.db import normalise_url

MIGRATIONS_DIR = Path(__file__).resolve().parent


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation would choke on '%' in passwords.
    cfg.set_main_option("sqlalchemy.url", normalise_url(database_url).replace("%", "%%"))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def include_object(dialect: str) -> Callable[..., bool]:
    """Alembic's ``include_object`` for comparing models and database on ``dialect``: an
    index the models mark ``info={"dialect": ...}`` for another database (the caption
    trigram index is PostgreSQL's) is not expected on this one."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, other: Any) -> bool:
        only = getattr(obj, "info", {}).get("dialect") if type_ == "index" else None
        return only is None or only == dialect

    return include


def current_heads() -> tuple[str, ...]:
    from alembic.script import ScriptDirectory

    return tuple(ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads())
