"""Completion and screen-out codes: drawn at random for each study and each platform study,
never a fixed word a past participant could reuse or guess."""

from __future__ import annotations

import secrets
import string

from sqlmodel import Session, col, select

from vsr_core.models import StudySetting

CODE_ALPHABET = string.ascii_uppercase + string.digits
CODE_LENGTH = 12  # 62 bits from `secrets`: not guessable, not shared between studies
# The study settings that hold a study's own codes (for links that name no platform study).
STUDY_CODE_KEYS = ("completion_code", "screenout_code")


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def give_study_codes(session: Session, study_id: int) -> dict[str, str]:
    """Store random codes for the study's settings that have none yet (flushed, not
    committed); returns the codes the study has."""
    have = {
        s.key: s.value
        for s in session.exec(
            select(StudySetting).where(
                StudySetting.study_id == study_id,
                col(StudySetting.key).in_(STUDY_CODE_KEYS),
            )
        )
    }
    for key in STUDY_CODE_KEYS:
        if not have.get(key):
            have[key] = new_code()
            session.merge(StudySetting(study_id=study_id, key=key, value=have[key]))
    session.flush()
    return {k: str(v) for k, v in have.items()}
