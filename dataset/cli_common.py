"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from core.db import make_engine
from core.settings import Settings, get_settings


def settings_for(database_url: str | None) -> Settings:
    settings = get_settings()
    if database_url:
        settings = settings.model_copy(update={"database_url": database_url})
    return settings


def engine_for(database_url: str | None) -> Engine:
    return make_engine(settings_for(database_url))


DB_HELP = "Database URL (default: $DATABASE_URL, else sqlite:///./vsr.db)"
