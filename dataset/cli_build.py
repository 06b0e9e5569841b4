"""`build-dataset` / `vsr build`: export JSONL splits, stats and a dataset card."""

from __future__ import annotations

from dataset.errors import CliError


def build() -> None:
    """Export the dataset: JSONL splits, stats.json and a dataset card (not built yet)."""
    raise CliError("`build-dataset` is not built yet")
