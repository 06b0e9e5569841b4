"""Multiple-choice items of the latest adversarial matching run, as ``mc/{split}.jsonl``."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from vsr_core.agreement import DEFAULT_THRESHOLD, Threshold
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_core.tables import EXAMPLE, IMAGE, MATCH_RUN, MC_ITEM

COCO_BASE = "http://images.cocodataset.org"


def latest_run_id(conn: Connection, study_id: int = DEFAULT_STUDY_ID) -> int | None:
    """The study's newest matching run."""
    return conn.execute(
        select(func.max(MATCH_RUN.c.id)).where(MATCH_RUN.c.study_id == study_id)
    ).scalar()


def mc_lines(
    conn: Connection,
    run_id: int | None = None,
    threshold: Threshold = DEFAULT_THRESHOLD,
    *,
    unvalidated: bool = False,
    study_id: int = DEFAULT_STUDY_ID,
) -> dict[str, list[bytes]]:
    """Split name -> JSONL lines (ordered by query Example id); empty if matching never ran.

    By default only the items whose every distractor validators rejected (``mc/``); with
    ``unvalidated`` the items with a distractor nobody has judged yet (``mc_unvalidated/``),
    each marked ``"validated": false``. Items with a distractor validators judged true are
    in neither (``vsr_dataset.mc_verdicts``).

    One line per item: the query image and concepts, the candidate captions (``choices``),
    the index of the true one (``answer``), each choice's relation, the answer's caption and
    Example id (``answer_caption``, ``answer_example_id``: the key, named as such) and the
    ids of the Examples the distractors came from, sorted (``distractor_example_ids``).
    """
    run_id = latest_run_id(conn, study_id) if run_id is None else run_id
    if run_id is None:
        return {}
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
    out: dict[str, list[bytes]] = {}
    for (
        split,
        qid,
        choices,
        relations,
        answer,
        distractors,
        subj,
        obj,
        caption,
        file_name,
        coco_split,
    ) in conn.execute(stmt):
        if states.get(qid) is not wanted:
            continue
        # Nothing but ``answer`` and the fields named answer_* tells which choice is true:
        # the distractors' source Examples are listed sorted, not by choice position.
        record: dict[str, Any] = {
            "image": file_name,
            "image_link": f"{COCO_BASE}/{coco_split}/{file_name}",
            "subj": subj,
            "obj": obj,
            "choices": list(choices),
            "answer": answer,
            "relations": list(relations),
            "split": split,
            "answer_caption": caption,
            "answer_example_id": qid,
            "distractor_example_ids": sorted(d for d in distractors if d is not None),
            "run_id": run_id,
        }
        if unvalidated:
            record["validated"] = False
        out.setdefault(split, []).append(orjson.dumps(record) + b"\n")
    return out
