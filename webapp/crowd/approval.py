"""The least work a platform submission is approved (and paid) for, shown to the worker on
the task page and before "Finish now".

It is the platform study's ``rules.min_items`` when the researcher set one, else the batch's
own size (webapp.platforms.engine judges a submission by the same figures). It is read once,
when the worker enters by the study's link, and kept in their session, so the task pages
cost no statement for it. Invited workers are paid by no platform: nothing is shown.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from sqlmodel import Session, select

from vsr_core.models import CrowdPlatform, PlatformStudy
from webapp.crowd.identity import Entry, scoped

# The entry parameter that names the platform study (Prolific STUDY_ID, MTurk hitId).
STUDY_PARAM: dict[str, str] = {CrowdPlatform.prolific: "study_id", CrowdPlatform.mturk: "hit_id"}
KEY = "approval_min"


def remember(request: Request, session: Session, study_id: int, kind: str, entry: Entry) -> None:
    """At entry: note the platform study's minimum (None: the batch's size) for this kind."""
    kept: dict[str, Any] = dict(request.session.get(KEY) or {})
    where = scoped(request, kind)
    if entry.source not in STUDY_PARAM:
        kept.pop(where, None)
    else:
        named = entry.params.get(STUDY_PARAM[entry.source])
        settings = (
            session.exec(
                select(PlatformStudy.settings).where(
                    PlatformStudy.study_id == study_id,
                    PlatformStudy.platform == entry.source,
                    PlatformStudy.external_id == named,
                )
            ).first()
            if named
            else None
        )
        minimum = ((settings or {}).get("rules") or {}).get("min_items")
        kept[where] = int(minimum) if minimum is not None else None
    request.session[KEY] = kept


def items_needed(request: Request, kind: str, batch_size: int) -> int | None:
    """The items this worker's submission needs to be approved; None: not a platform's."""
    kept = request.session.get(KEY) or {}
    where = scoped(request, kind)
    if where not in kept:
        return None
    minimum = kept[where]
    return max(1, int(minimum)) if minimum is not None else batch_size
