"""The split matching runs within: build-dataset's random split of the validated Examples, so no
multiple-choice test truth ever sits in random/train. Shared by `vsr match` and the dashboard's
matching job."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from vsr_core.agreement import as_fraction
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_dataset.export_rows import read_rows
from vsr_dataset.splits import SplitItem, random_split


def export_split_mapping(
    engine: Engine, threshold: float, seed: int, study_id: int = DEFAULT_STUDY_ID
) -> dict[int, str]:
    """Example id -> part of build-dataset's random split of the study's human and imported
    validated Examples (its defaults: annotation groups, 70/10/20)."""
    with engine.connect() as conn:
        rows = read_rows(conn, threshold=as_fraction(threshold), origins=["human", "imported"],
                         study_id=study_id)
    items = [SplitItem(r.id, r.group, r.subj, r.obj) for r in rows if r.kept]
    return {k: part for part, keys in random_split(items, seed).items() for k in keys}
