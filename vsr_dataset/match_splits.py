"""The split matching runs within: build-dataset's random split of the validated Examples, so no
multiple-choice test truth ever sits in random/train. Shared by `vsr match` and the dashboard's
matching job."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from vsr_core.agreement import as_fraction
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_dataset.export_rows import read_rows
from vsr_dataset.splits import (
    BINARY_ORIGINS,
    SplitError,
    binary_items,
    binary_random_split,
    zeroshot_split,
)


def export_split_mapping(
    engine: Engine, threshold: float, seed: int, study_id: int = DEFAULT_STUDY_ID
) -> dict[int, str]:
    """Example id -> part of build-dataset's random split of the study's human and imported
    validated Examples (its defaults: annotation groups, 70/10/20)."""
    with engine.connect() as conn:
        rows = read_rows(
            conn,
            threshold=as_fraction(threshold),
            origins=sorted(BINARY_ORIGINS),
            study_id=study_id,
        )
    return {k: part for part, keys in binary_random_split(rows, seed).items() for k in keys}


def export_train_ids(
    engine: Engine, threshold: float, seed: int, study_id: int = DEFAULT_STUDY_ID
) -> frozenset[int]:
    """The Examples build-dataset (its defaults) writes to random/train or zeroshot/train: a
    multiple-choice dev/test item whose truth is one of them is left out of the export
    (vsr_dataset.mc_publish), so `vsr match --report` leaves it out of its figure too."""
    with engine.connect() as conn:
        rows = read_rows(
            conn,
            threshold=as_fraction(threshold),
            origins=sorted(BINARY_ORIGINS),
            study_id=study_id,
        )
    random_train = binary_random_split(rows, seed)["train"]
    zeroshot_train = zeroshot_split(binary_items(rows), seed).parts["train"]
    return frozenset(random_train) | frozenset(zeroshot_train)


def check_mc_truths(conn: Connection, study_id: int, random_parts: dict[str, list[int]]) -> None:
    """Fail (``SplitError``, one line) when a truth of the study's latest matching run would
    sit in another random part than its multiple-choice part: an mc/test truth in
    random/train leaks the test set. Matching and the export split with the same function
    (``binary_random_split``), so this fails only when the export's seed, ratios, unit or
    keep rule differ from the run's."""
    from vsr_core.tables import MATCH_RUN, MC_ITEM
    from vsr_dataset.mc_export import latest_run_id

    run_id = latest_run_id(conn, study_id)
    if run_id is None:
        return
    part_of = {k: p for p, keys in random_parts.items() for k in keys}
    moved = [
        (qid, split, part_of[qid])
        for qid, split in conn.execute(
            select(MC_ITEM.c.query_example_id, MC_ITEM.c.split)
            .where(MC_ITEM.c.run_id == run_id)
            .order_by(MC_ITEM.c.query_example_id)
        )
        if qid in part_of and part_of[qid] != split
    ]
    if not moved:
        return
    params = conn.execute(select(MATCH_RUN.c.params).where(MATCH_RUN.c.id == run_id)).scalar()
    params = params or {}
    qid, split, part = moved[0]
    raise SplitError(
        f"{len(moved)} multiple-choice truth(s) of matching run {run_id} would move to another "
        f"random part (Example {qid}: mc/{split} but random/{part}); the run split with seed "
        f"{params.get('split_seed', 0)} and keep rule {params.get('keep_threshold', '?')}: "
        "export with that seed, --split-unit annotation and 70/10/20, or match again"
    )
