"""The load average a bench records before and after its figures, and the mark a figure
taken on a busy machine carries (docs/scaling.md: figures at a load above 1.5 are marked)."""

from __future__ import annotations

import os

LOADED_ABOVE = 1.5


def load_note(start: tuple[float, float, float]) -> str:
    """One line: the 1-minute load average at start and now, on how many CPUs, and the
    mark when either was above LOADED_ABOVE."""
    end = os.getloadavg()
    note = (
        f"load average (1 min) at start {start[0]:.2f}, at end {end[0]:.2f} "
        f"on {os.cpu_count()} CPUs"
    )
    if max(start[0], end[0]) > LOADED_ABOVE:
        note += f"  ** LOADED (> {LOADED_ABOVE}): these figures were taken on a busy machine **"
    return note
