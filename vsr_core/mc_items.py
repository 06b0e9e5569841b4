"""Which multiple-choice items of a matching run may be published: those whose every
distractor validators rejected (the export's ``mc/``, the dashboard's count of it)."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import Session

from vsr_core.agreement import DEFAULT_THRESHOLD, Threshold, is_kept
from vsr_core.agreement_db import load_item_votes
from vsr_core.models import McItem


def surviving_items(
    session: Session, run_id: int, threshold: Threshold = DEFAULT_THRESHOLD
) -> list[McItem]:
    """The run's items fit for export: if its negatives went to validators, every one of
    them must be kept as False (validators rejected the distractor); otherwise all items."""
    items = list(
        session.execute(
            select(McItem).where(McItem.run_id == run_id).order_by(McItem.id)  # type: ignore[arg-type]
        ).scalars()
    )
    neg_ids = sorted(
        {n for it in items for n in (it.params or {}).get("negative_example_ids", []) if n}
    )
    verdict: dict[int, bool] = {}
    for start in range(0, len(neg_ids), 500):
        chunk = neg_ids[start : start + 500]
        for iv in load_item_votes(session, example_ids=chunk):
            verdict[int(iv.item)] = is_kept(iv.label, iv.values, threshold)  # type: ignore[call-overload]
    out: list[McItem] = []
    for it in items:
        ids = [n for n in (it.params or {}).get("negative_example_ids", []) if n]
        if all(verdict.get(n, False) for n in ids):
            out.append(it)
    return out
