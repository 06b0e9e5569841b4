"""The platform's screen-out path for a worker who failed a study's qualification check
(docs/platforms.md, "Screen-out after a failed check").

Prolific: the platform study's own no-pay code (``qualification_code``, a "request return"
completion code set on the study when the draft is made); a link from no platform study of
ours gets the study setting's screen-out code. MTurk: the worker is given the platform
study's "failed" qualification (``qualification_type_id``, which the HIT requires not to
exist), so MTurk stops offering them the HIT. Invite links: nothing beyond the page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlmodel import Session, select

from vsr_core.models import CrowdPlatform, PlatformStudy, Worker
from webapp.platforms.base import PlatformError
from webapp.platforms.engine import CallLog

log = logging.getLogger("webapp")

# The MTurk client the app uses (None: boto3's, from the environment); tests hand in one
# wrapped in botocore's Stubber.
MTurkClientFactory = Callable[[], Any]


def _platform_study(
    session: Session, study_id: int, platform: str, external_id: str
) -> PlatformStudy | None:
    return session.exec(
        select(PlatformStudy).where(
            PlatformStudy.study_id == study_id,
            PlatformStudy.platform == platform,
            PlatformStudy.external_id == external_id,
        )
    ).first()


def prolific_code(session: Session, study_id: int, entry: dict[str, Any]) -> str | None:
    """The no-pay return code of the Prolific study the worker came from, if it has one."""
    named = entry.get("study_id")
    if entry.get("source") != CrowdPlatform.prolific or not named:
        return None
    row = _platform_study(session, study_id, CrowdPlatform.prolific, str(named))
    code = (row.settings or {}).get("qualification_code") if row is not None else None
    return str(code) if code else None


def qualification_failed(
    session: Session,
    study_id: int,
    worker: Worker,
    entry: dict[str, Any],
    mturk_client: MTurkClientFactory | None = None,
) -> bool:
    """After a worker's last failed try: MTurk's qualification call (True when it was made).
    A platform that cannot be reached is logged, never shown to the worker: the page and
    the batch refusal stand whatever MTurk answers."""
    hit = entry.get("hit_id")
    if entry.get("source") != CrowdPlatform.mturk or not hit:
        return False
    row = _platform_study(session, study_id, CrowdPlatform.mturk, str(hit))
    qual_type = (row.settings or {}).get("qualification_type_id") if row is not None else None
    if row is None or not qual_type:
        return False
    from webapp.platforms.mturk import MTurkPlatform

    calls = CallLog(CrowdPlatform.mturk, row.id)
    client = mturk_client() if mturk_client is not None else None
    platform = MTurkPlatform(client=client, log=calls) if client else MTurkPlatform(log=calls)
    try:
        platform.mark_failed(str(qual_type), worker.external_id)
        done = True
    except PlatformError as exc:
        log.warning("qualification screen-out on MTurk failed: %s", exc)
        done = False
    calls.save(session)
    return done
