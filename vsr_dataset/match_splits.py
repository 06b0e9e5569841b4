"""The split matching runs within: build-dataset's random split of the validated Examples, so no
multiple-choice test truth ever sits in random/train. Shared by `vsr match` and the dashboard's
matching job.

Two splits can be build-dataset's: the one it draws (seed, annotation groups, 70/10/20) and,
with ``--vsr-compatible`` after the release folder was imported, the VSR release's own parts
(vsr_dataset.release_splits). Matching follows the one it is told (``vsr match --splits
export`` or ``--splits release``): it cannot know which the later build will write."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from vsr_core.agreement import as_fraction
from vsr_core.models import DEFAULT_STUDY_ID
from vsr_dataset.export_rows import ExportRow, read_rows
from vsr_dataset.release_splits import load_release_splits
from vsr_dataset.splits import (
    BINARY_ORIGINS,
    SplitError,
    binary_items,
    binary_random_split,
    zeroshot_split,
)


def _rows(conn: Connection, threshold: float, study_id: int) -> list[ExportRow]:
    return read_rows(
        conn,
        threshold=as_fraction(threshold),
        origins=sorted(BINARY_ORIGINS),
        study_id=study_id,
    )


def _mapping(parts: dict[str, list[int]]) -> dict[int, str]:
    return {k: part for part, keys in parts.items() for k in keys}


def export_split_mapping(
    engine: Engine, threshold: float, seed: int, study_id: int = DEFAULT_STUDY_ID
) -> dict[int, str]:
    """Example id -> part of build-dataset's random split of the study's human and imported
    validated Examples (its defaults: annotation groups, 70/10/20)."""
    with engine.connect() as conn:
        rows = _rows(conn, threshold, study_id)
    return _mapping(binary_random_split(rows, seed))


def release_split_mapping(
    engine: Engine, threshold: float, seed: int, study_id: int = DEFAULT_STUDY_ID
) -> dict[int, str]:
    """Example id -> part of the VSR release's own random split, for the kept Examples it
    put in one (what ``build-dataset --vsr-compatible`` writes to random/); a kept Example
    in none of the release's files is in no part, so it is matched nowhere. Fails
    (``SplitError``, one line) when no random split file of a release was imported.

    The release's two schemes cross: a third of its random dev/test Examples are in its
    zero-shot train part. Such an Example is matched nowhere either: as a truth its item
    would be left out of mc/ (vsr_dataset.mc_publish), and as another item's distractor
    source it would put that source in a binary train file. ``seed`` draws the zero-shot
    split where the release's was not imported, as build-dataset does."""
    with engine.connect() as conn:
        rows = _rows(conn, threshold, study_id)
        items = binary_items(rows)
        release = load_release_splits(conn, study_id, items)
    if release.random is None:
        raise SplitError(
            "no split of a VSR release was imported into this study: import the release "
            "folder with its splits/ (`vsr import-vsr DIR`), or match with --splits export"
        )
    zeroshot = release.zeroshot or zeroshot_split(items, seed)
    zeroshot_train = set(zeroshot.parts["train"])
    return {
        k: part
        for k, part in _mapping(release.random).items()
        if part == "train" or k not in zeroshot_train
    }


def has_release_split(engine: Engine, study_id: int = DEFAULT_STUDY_ID) -> bool:
    """Whether a random split file of a VSR release was imported into the study."""
    from vsr_core.models import ReleaseScheme
    from vsr_core.tables import EXAMPLE, RELEASE_SPLIT

    with engine.connect() as conn:
        found = conn.execute(
            select(RELEASE_SPLIT.c.example_id)
            .join(EXAMPLE, EXAMPLE.c.id == RELEASE_SPLIT.c.example_id)
            .where(
                EXAMPLE.c.study_id == study_id,
                RELEASE_SPLIT.c.scheme == ReleaseScheme.random.value,
            )
            .limit(1)
        ).first()
    return found is not None


def export_train_ids(
    engine: Engine,
    threshold: float,
    seed: int,
    study_id: int = DEFAULT_STUDY_ID,
    *,
    release: bool = False,
) -> frozenset[int]:
    """The Examples build-dataset (its defaults; with ``release``, ``--vsr-compatible`` after
    the release folder's import) writes to random/train or zeroshot/train: a multiple-choice
    dev/test item whose truth is one of them is left out of the export
    (vsr_dataset.mc_publish), so `vsr match --report` leaves it out of its figure too."""
    with engine.connect() as conn:
        rows = _rows(conn, threshold, study_id)
        items = binary_items(rows)
        parts = load_release_splits(conn, study_id, items) if release else None
    random_parts = parts.random if parts is not None else None
    if random_parts is None:
        random_parts = binary_random_split(rows, seed)
    zeroshot = parts.zeroshot if parts is not None else None
    if zeroshot is None:
        zeroshot = zeroshot_split(items, seed)
    return frozenset(random_parts["train"]) | frozenset(zeroshot.parts["train"])


def check_mc_truths(
    conn: Connection,
    study_id: int,
    random_parts: dict[str, list[int]],
    *,
    release_parts: bool = False,
) -> None:
    """Fail (``SplitError``, one line) when a truth of the study's latest matching run would
    sit in another random part than its multiple-choice part: an mc/test truth in
    random/train leaks the test set. ``release_parts``: ``random_parts`` are the VSR
    release's own (``--vsr-compatible``). Matching and the export split with the same
    function (``binary_random_split``) or read the same release parts, so this fails only
    when the export's split differs from the run's: another seed, ratios, unit or keep rule,
    or the release's parts on one side only."""
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
    head = (
        f"{len(moved)} multiple-choice truth(s) of matching run {run_id} would move to another "
        f"random part (Example {qid}: mc/{split} but random/{part}); "
    )
    if params.get("splits") == "release":
        raise SplitError(
            head + "the run matched within the VSR release's own random split: export with "
            "--vsr-compatible (after importing the release folder), or match again"
        )
    if release_parts:
        raise SplitError(
            head + "this export writes the VSR release's own random split but the run drew "
            f"its own (seed {params.get('split_seed', 0)}): match again with "
            "`vsr match --splits release`"
        )
    raise SplitError(
        head + f"the run split with seed {params.get('split_seed', 0)} and keep rule "
        f"{params.get('keep_threshold', '?')}: export with that seed, --split-unit annotation "
        "and 70/10/20, or match again"
    )
