"""What a task page measured about how one answer was given: parsed, checked, stored.

The page sends one short field (``signals``) with its answer, e.g.
``shown=2310;focus=0;pointer=14;keys=1;canary=0;paste=0``: milliseconds from the photo
being decoded and on screen to the answer (``none``: it never was), focus/visibility
changes, counts of pointer and key events (never what was typed or where), a hidden canary
acted on, a paste into the caption. Everything comes from the crowd's browser and is
hostile until checked: the whole field must match, each number has a range, and a field that
does not is refused with a plain 422 (docs/quality.md). Shared by the validation and the
caption task, so it lives on the floor both stand on.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlmodel import Session

from vsr_core.authenticity import ItemSignals
from vsr_core.models import ItemSignal

MAX_LENGTH = 96
PATTERN = re.compile(
    r"shown=(?P<shown>none|\d{1,8});focus=(?P<focus>\d{1,4});pointer=(?P<pointer>\d{1,6});"
    r"keys=(?P<keys>\d{1,6});canary=(?P<canary>[01])(?:;paste=(?P<paste>[01]))?",
    re.ASCII,  # "\d" alone would take any script's digits ("１２")
)
MAX_SHOWN_MS = 24 * 3600 * 1000  # a batch lasts hours at most; more is a broken clock


class SignalsError(ValueError):
    """The page's measurements were not in the expected form."""


def parse_signals(text: str | None) -> ItemSignals | None:
    """The measurements in ``text``; None when the page sent none (the JSON API)."""
    if not text:
        return None
    m = PATTERN.fullmatch(text) if len(text) <= MAX_LENGTH else None
    if m is None:
        raise SignalsError("The page's measurements of this answer were not understood.")
    shown = None if m["shown"] == "none" else int(m["shown"])
    if shown is not None and shown > MAX_SHOWN_MS:
        shown = None  # a clock glitch: the answer itself still counts
    return ItemSignals(
        shown_ms=shown,
        image_shown=shown is not None,
        focus_changes=int(m["focus"]),
        pointer_events=int(m["pointer"]),
        key_events=int(m["keys"]),
        canary=m["canary"] == "1",
        pasted=m["paste"] == "1",
    )


def signal_values(
    signals: ItemSignals,
    now: datetime,
    study_id: int,
    worker_id: int,
    vote_id: int | None = None,
    annotation_id: int | None = None,
) -> dict[str, Any]:
    return {
        "study_id": study_id,
        "worker_id": worker_id,
        "vote_id": vote_id,
        "annotation_id": annotation_id,
        "shown_ms": signals.shown_ms,
        "image_shown": signals.image_shown,
        "focus_changes": signals.focus_changes,
        "pointer_events": signals.pointer_events,
        "key_events": signals.key_events,
        "canary": signals.canary,
        "pasted": signals.pasted,
        "created_at": now,
    }


def store_signals(session: Session, values: dict[str, Any]) -> None:
    """One row in the caller's transaction (committed with the vote or caption it measures)."""
    session.execute(insert(ItemSignal).values(**values))
