"""The pipeline page's figures: the latest matching run's multiple-choice items."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session

from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.tables import MATCH_RUN, MC_ITEM


def mc_summary(session: Session, study_id: int = DEFAULT_STUDY_ID) -> dict[str, Any]:
    """The latest matching run's items, and how many of them build-dataset writes to mc/:
    those whose every distractor validators rejected (an unvalidated run: none)."""
    from vsr_core.mc_items import surviving_items
    from vsr_core.studies.settings import load_study_config

    run = MATCH_RUN
    conn = session.connection()
    latest = conn.execute(
        select(run.c.id, run.c.params)
        .where(run.c.study_id == study_id)
        .order_by(run.c.id.desc())
        .limit(1)
    ).first()
    if latest is None:
        return {"mc_items": 0, "mc_run_items": 0}
    total = conn.execute(
        select(func.count()).select_from(MC_ITEM).where(MC_ITEM.c.run_id == latest.id)
    ).scalar_one()
    ready = 0
    if (latest.params or {}).get("negatives_sent"):
        threshold = load_study_config(session, study_id).keep_threshold
        ready = len(surviving_items(session, int(latest.id), threshold))
    return {"mc_items": ready, "mc_run_items": int(total)}
