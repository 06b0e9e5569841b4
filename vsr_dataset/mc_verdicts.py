"""What validators said about each multiple-choice item's distractors.

An item of a run whose distractors went to validators is

- ``cleared`` when validators rejected every distractor (each kept as False by the keep
  rule): it may be published in ``mc/``;
- ``rejected`` when validators judged one of its distractors true (it has votes and fails
  the keep rule): the item has two right answers, so it is counted, never exported;
- ``pending`` otherwise: some distractor nobody has judged yet (``mc_unvalidated/``).

A run that never sent its distractors to validators has only pending items.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.engine import Connection

from vsr_core.agreement import Threshold, is_kept
from vsr_core.agreement_db import load_item_votes
from vsr_core.tables import MATCH_RUN, MC_ITEM


class McState(StrEnum):
    cleared = "cleared"
    rejected = "rejected"
    pending = "pending"


def item_states(conn: Connection, run_id: int, threshold: Threshold) -> dict[int, McState]:
    """Query Example id -> state of the run's item (see the module docstring)."""
    params = conn.execute(select(MATCH_RUN.c.params).where(MATCH_RUN.c.id == run_id)).scalar()
    items = [
        (qid, [n for n in (p or {}).get("negative_example_ids", []) if n])
        for qid, p in conn.execute(
            select(MC_ITEM.c.query_example_id, MC_ITEM.c.params)
            .where(MC_ITEM.c.run_id == run_id)
            .order_by(MC_ITEM.c.id)
        )
    ]
    if not (params or {}).get("negatives_sent"):
        return {qid: McState.pending for qid, _ in items}
    verdict: dict[int, bool] = {}  # judged negatives: True = rejected as a caption (kept False)
    neg_ids = sorted({n for _, ids in items for n in ids})
    for chunk in _chunks(neg_ids, 500):
        for iv in load_item_votes(conn, example_ids=chunk):
            if iv.values:
                verdict[int(iv.item)] = is_kept(iv.label, iv.values, threshold)  # type: ignore[call-overload]
    return {qid: _state(ids, verdict) for qid, ids in items}


def _state(ids: list[int], verdict: dict[int, bool]) -> McState:
    if any(n in verdict and not verdict[n] for n in ids):
        return McState.rejected
    if all(verdict.get(n, False) for n in ids):
        return McState.cleared
    return McState.pending


def count_rejected(conn: Connection, run_id: int | None, threshold: Threshold) -> int:
    """Items of the run that validators rejected (counted in the card, never exported)."""
    if run_id is None:
        return 0
    return sum(1 for s in item_states(conn, run_id, threshold).values() if s is McState.rejected)


def _chunks(ids: list[int], size: int) -> Iterable[list[int]]:
    for i in range(0, len(ids), size):
        yield ids[i : i + size]
