"""`vsr match`: adversarial matching (implemented in matching/)."""

from __future__ import annotations

from dataset.errors import CliError


def match() -> None:
    """Build multiple-choice distractors by adversarial matching (not built yet)."""
    raise CliError("`vsr match` is not built yet")
