"""Multiple-choice items of the latest adversarial matching run, as ``mc/{split}.jsonl``.

What a benchmark user reads must not give the answer away together with any other file of
the same export (vsr_dataset.mc_publish does the aligning, shuffling and the provenance
split): this module only reads the run's items with everything known about them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from vsr_core.agreement import DEFAULT_THRESHOLD, Threshold
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.tables import EXAMPLE, IMAGE, MATCH_RUN, MC_ITEM

COCO_BASE = "http://images.cocodataset.org"


@dataclass(frozen=True)
class McRow:
    """One item of a run: what the public record shows and its provenance (kept apart)."""

    split: str  # the random part matching put it in
    query_example_id: int  # the truth
    image: str
    image_link: str
    subj: str
    obj: str
    choices: tuple[str, ...]
    answer: int
    relations: tuple[str, ...]
    answer_caption: str
    distractor_example_ids: tuple[int, ...]  # the Examples the distractors were made from
    negative_example_ids: tuple[int, ...]  # the machine-made negatives sent to validators
    run_id: int


def latest_run_id(conn: Connection, study_id: int = DEFAULT_STUDY_ID) -> int | None:
    """The study's newest matching run."""
    return conn.execute(
        select(func.max(MATCH_RUN.c.id)).where(MATCH_RUN.c.study_id == study_id)
    ).scalar()


def mc_rows(
    conn: Connection,
    run_id: int | None = None,
    threshold: Threshold = DEFAULT_THRESHOLD,
    *,
    unvalidated: bool = False,
    study_id: int = DEFAULT_STUDY_ID,
) -> list[McRow]:
    """The run's items (ordered by query Example id); empty if matching never ran.

    By default only the items whose every distractor validators rejected (``mc/``); with
    ``unvalidated`` the items with a distractor nobody has judged yet (``mc_unvalidated/``).
    Items with a distractor validators judged true are in neither (``vsr_dataset.mc_verdicts``).
    """
    run_id = latest_run_id(conn, study_id) if run_id is None else run_id
    if run_id is None:
        return []
    from vsr_dataset.mc_verdicts import McState, item_states

    wanted = McState.pending if unvalidated else McState.cleared
    states = item_states(conn, run_id, threshold)
    stmt = (
        select(
            MC_ITEM.c.split,
            MC_ITEM.c.query_example_id,
            MC_ITEM.c.choices,
            MC_ITEM.c.relations,
            MC_ITEM.c.answer_index,
            MC_ITEM.c.distractor_example_ids,
            MC_ITEM.c.params,
            EXAMPLE.c.subj,
            EXAMPLE.c.obj,
            EXAMPLE.c.caption,
            IMAGE.c.file_name,
            IMAGE.c.coco_split,
        )
        .select_from(
            MC_ITEM.join(EXAMPLE, EXAMPLE.c.id == MC_ITEM.c.query_example_id).join(
                IMAGE, IMAGE.c.id == EXAMPLE.c.image_id
            )
        )
        .where(MC_ITEM.c.run_id == run_id)
        .order_by(MC_ITEM.c.split, MC_ITEM.c.query_example_id)
    )
    out: list[McRow] = []
    for (
        split,
        qid,
        choices,
        relations,
        answer,
        distractors,
        params,
        subj,
        obj,
        caption,
        file_name,
        coco_split,
    ) in conn.execute(stmt):
        if states.get(qid) is not wanted:
            continue
        negatives = (params or {}).get("negative_example_ids", [])
        out.append(
            McRow(
                split=split,
                query_example_id=qid,
                image=file_name,
                image_link=f"{COCO_BASE}/{coco_split}/{file_name}",
                subj=subj,
                obj=obj,
                choices=tuple(choices),
                answer=answer,
                relations=tuple(relations),
                answer_caption=caption,
                distractor_example_ids=tuple(sorted(d for d in distractors if d is not None)),
                negative_example_ids=tuple(sorted(n for n in negatives if n)),
                run_id=run_id,
            )
        )
    return out


def eval_negative_ids(conn: Connection, study_id: int = DEFAULT_STUDY_ID) -> frozenset[int]:
    """The machine-made negatives of the latest run's dev and test items, whatever
    validators said of them: each is a distractor of an evaluation item (or of one that may
    become one), so a file that lists it would name a wrong answer."""
    run_id = latest_run_id(conn, study_id)
    if run_id is None:
        return frozenset()
    rows = conn.execute(
        select(MC_ITEM.c.params).where(MC_ITEM.c.run_id == run_id, MC_ITEM.c.split != "train")
    )
    return frozenset(
        n for (params,) in rows for n in (params or {}).get("negative_example_ids", []) if n
    )
