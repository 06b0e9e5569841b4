"""`vsr sample`: sample COCO image pairs (implemented in collection/)."""

from __future__ import annotations

from dataset.errors import CliError


def sample() -> None:
    """Sample COCO 2017 image pairs that share two concepts (not built yet)."""
    raise CliError("`vsr sample` is not built yet")
