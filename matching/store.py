"""The thin database layer of matching: load kept Examples, write a MatchRun with its McItems
and (optionally) the adversarial negatives for validators, and read back surviving items.

Everything a run writes happens in the caller's one transaction, so a failure leaves no
half-written run.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from matching.pipeline import MatchResult
from matching.records import Record
from vsr_core.agreement_db import load_item_votes
from vsr_core.mc_items import surviving_items as surviving_items
from vsr_core.models import DEFAULT_STUDY_ID, Example, ExampleOrigin, Image, MatchRun, McItem


def load_records(session: Session, study_id: int = DEFAULT_STUDY_ID) -> list[Record]:
    """Every Example of the study with its votes (kept or not: matching filters).
    Adversarial negatives come along only so that those validators judged True count as
    known true."""
    ex, im = Example.__table__, Image.__table__  # type: ignore[attr-defined]
    mine = ex.c.study_id == study_id
    votes = {
        iv.item: tuple(v for _, v in iv.votes) for iv in load_item_votes(session, where=[mine])
    }
    stmt = (
        select(ex.c.id, ex.c.image_id, im.c.file_name, ex.c.subj, ex.c.relation, ex.c.obj,
               ex.c.caption, ex.c.label, ex.c.origin)
        .select_from(ex.join(im, im.c.id == ex.c.image_id))
        # copies for re-validation are not more data
        .where(ex.c.origin != "revalidation", mine)
        .order_by(ex.c.id)
    )
    return [
        Record(
            id=row.id, image=row.file_name, subj=row.subj, relation=row.relation, obj=row.obj,
            caption=row.caption, label=bool(row.label), votes=votes.get(row.id, ()),
            image_id=row.image_id, origin=row.origin,
        )
        for row in session.execute(stmt)
    ]


def save_run(
    session: Session,
    result: MatchResult,
    diagnostics: dict[str, Any],
    *,
    send_negatives: bool = False,
    extra_params: dict[str, Any] | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> MatchRun:
    """Write the run, one McItem per complete item and, with ``send_negatives``, each
    distractor as a False Example (origin adversarial) on the query's image, which the
    validation queue then serves like any new Example. An identical negative from an
    earlier run is reused rather than duplicated."""
    params = result.params.as_dict() | (extra_params or {}) | {"negatives_sent": send_negatives}
    run = MatchRun(study_id=study_id, params=params, diagnostics=diagnostics)
    session.add(run)
    session.flush()
    assert run.id is not None

    negatives: dict[tuple[int, str], int] = {}
    if send_negatives:
        ex = Example.__table__  # type: ignore[attr-defined]
        image_ids = sorted({it.query.image_id for it in result.items if it.query.image_id})
        for chunk in _chunks(image_ids, 500):
            found = session.execute(
                select(ex.c.id, ex.c.image_id, ex.c.caption).where(
                    ex.c.origin == ExampleOrigin.adversarial.value, ex.c.image_id.in_(chunk),
                    ex.c.study_id == study_id,
                )
            )
            negatives.update({(r.image_id, r.caption): r.id for r in found})
        fresh: dict[tuple[int, str], Example] = {}
        per_item: list[list[Example]] = []
        for it in result.items:
            if it.query.image_id is None:
                raise ValueError(f"Example {it.query.id} has no image row: cannot send negatives")
            mine = []
            for i, (caption, (s, rel, o)) in enumerate(zip(it.choices, it.triples, strict=True)):
                key = (it.query.image_id, caption)
                if i == it.answer_index or key in negatives or key in fresh:
                    continue
                fresh[key] = Example(
                    study_id=study_id,  # the query's study
                    image_id=it.query.image_id, caption=caption, relation=rel, subj=s, obj=o,
                    label=False, origin=ExampleOrigin.adversarial.value,
                    parent_example_id=it.query.id,
                )
                mine.append(fresh[key])
            per_item.append(mine)
        # Ids in turns (every item's first distractor, then every second, ...): the queue
        # serves in id order, and one query's distractors back to back (the same photo, the
        # same subject and object) would show a validator which captions belong together.
        turns = itertools.zip_longest(*per_item)
        session.add_all([ex for turn in turns for ex in turn if ex is not None])
        session.flush()
        negatives.update({k: e.id for k, e in fresh.items() if e.id is not None})

    rows = []
    for it in result.items:
        neg_ids: list[int | None] = [
            None if i == it.answer_index or not send_negatives
            else negatives[(it.query.image_id or 0, c)]
            for i, c in enumerate(it.choices)
        ]
        rows.append(
            McItem(
                run_id=run.id,
                query_example_id=it.query.id,
                split=it.split,
                choices=it.choices,
                relations=it.relations,
                answer_index=it.answer_index,
                distractor_example_ids=[
                    None if i == it.answer_index else src for i, src in enumerate(it.source_ids)
                ],
                params=params | {"negative_example_ids": neg_ids},
            )
        )
    session.add_all(rows)
    session.flush()
    return run


def _chunks(seq: Sequence[int], size: int) -> list[Sequence[int]]:
    return [seq[i : i + size] for i in range(0, len(seq), size)]


