"""`vsr import-vsr`: import an existing VSR-format release."""

from __future__ import annotations

from dataset.errors import CliError


def import_vsr() -> None:
    """Import a VSR-format release into the database (not built yet)."""
    raise CliError("`vsr import-vsr` is not built yet")
