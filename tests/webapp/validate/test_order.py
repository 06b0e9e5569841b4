"""The validation queue (docs/validation.md, Rules) never shows a validator both Examples of
one caption (the caption on its true and on its false image) back to back, nor within one
batch, and its order does not reveal labels. Driven through a queue seeded with real VSR
captions on both backends (the ``session`` fixture is parametrised over SQLite and
PostgreSQL)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from tests.support.webapp_coco import make_pairs
from tests.webapp.validate.support import make_image, make_worker
from vsr_core.captions import parse_caption
from vsr_core.models import Annotation, Assignment, Batch, Example, Worker
from vsr_core.studies.settings import StudyConfig
from webapp.validate import queue as vq
from webapp.validate.strategy import ExampleStrategy


def real_caption_pairs(vsr_dir: Path, n: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The first ``n`` annotations of the raw release: one caption written for two images,
    True on one and False on the other (consecutive lines of one annotator)."""
    rows = [
        json.loads(line)
        for line in (vsr_dir / "data/data_files/all_vsr_raw_data.jsonl").open(encoding="utf-8")
        if line.strip()
    ]
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for a, b in zip(rows, rows[1:], strict=False):
        if (
            (a["caption"], a["annotator_id"]) == (b["caption"], b["annotator_id"])
            and {a["label"], b["label"]} == {0, 1}
            and (not out or a is not out[-1][1])
        ):
            out.append((a, b))
            if len(out) == n:
                break
    return out


def seed_queue(session: Session, vsr_dir: Path, coco_dir: Path, n: int) -> dict[int, int]:
    """``n`` real annotations, each as two human Examples the way generation writes them
    (consecutive ids, one Annotation); returns Example id -> annotation id."""
    (pair_id,) = make_pairs(session, coco_dir, 1)
    author = make_worker(session, "author")
    assert author.id is not None
    images: dict[str, int] = {}
    sibling_of: dict[int, int] = {}
    for first, second in real_caption_pairs(vsr_dir, n):
        parsed = parse_caption(first["caption"], first["relation"])
        ann = Annotation(
            pair_id=pair_id,
            worker_id=author.id,
            relation=parsed.relation,
            subj=parsed.subj,
            obj=parsed.obj,
        )
        session.add(ann)
        session.flush()
        for row in (first, second):
            if row["image"] not in images:
                images[row["image"]] = make_image(session, file_name=row["image"]).id  # type: ignore[assignment]
            ex = Example(
                image_id=images[row["image"]],
                caption=row["caption"],
                relation=parsed.relation,
                subj=parsed.subj,
                obj=parsed.obj,
                label=bool(row["label"]),
                origin="human",
                author_id=author.id,
                annotation_id=ann.id,
            )
            session.add(ex)
            session.flush()
            assert ex.id is not None and ann.id is not None
            sibling_of[ex.id] = ann.id
    session.commit()
    return sibling_of


def drive(session: Session, strat: ExampleStrategy, worker_name: str) -> list[list[int]]:
    """One validator works batch after batch until the queue has nothing left for them;
    returns the Example ids served, per batch, in order."""
    worker = make_worker(session, worker_name)
    batches: list[list[int]] = []
    while True:
        vq.begin_batch(session, worker, strat)
        served: list[int] = []
        while True:
            item = vq.next_item(session, worker, strat)
            if item is None or item.lease_id is None:
                break
            lease = session.get(Assignment, item.lease_id)
            assert lease is not None and lease.example_id is not None
            served.append(lease.example_id)
            vq.record_vote(session, worker, item.lease_id, bool(len(served) % 2), strat)
        if not served:
            return batches
        batches.append(served)
        open_batch = session.exec(
            select(Batch).where(Batch.worker_id == worker.id).order_by(col(Batch.id).desc())
        ).first()
        if open_batch is not None and open_batch.status == "open":
            open_batch.status = "abandoned"
            session.add(open_batch)
            session.commit()


def test_siblings_never_back_to_back_nor_in_one_batch(
    session: Session, vsr_dir: Path, coco_dir: Path
) -> None:
    sibling_of = seed_queue(session, vsr_dir, coco_dir, 12)
    assert len(sibling_of) == 24
    strat = ExampleStrategy(
        config=StudyConfig(gold_rate=0.0, validate_batch_size=5), rng=random.Random(0)
    )
    for name in ("v1", "v2"):
        batches = drive(session, strat, name)
        flat = [e for b in batches for e in b]
        assert len(flat) == len(set(flat))
        # Never both sides of one caption in one batch ...
        for served in batches:
            annotations = [sibling_of[e] for e in served]
            assert len(annotations) == len(set(annotations)), served
        # ... nor back to back across a batch boundary, but where the other half of the
        # last item was all that was left: it opens the next batch rather than no batch.
        pairs = list(zip(flat, flat[1:], strict=False))
        for n, (a, b) in enumerate(pairs):
            assert sibling_of[a] != sibling_of[b] or n == len(pairs) - 1, (a, b)
        # Everything is served, across batches: a validator whose last batch held one
        # half of a caption is offered the other half in the next.
        assert set(flat) == set(sibling_of)


def test_the_other_half_opens_the_next_batch_when_nothing_else_is_left(
    session: Session, vsr_dir: Path, coco_dir: Path
) -> None:
    """One caption: its first half ends a validator's batch, and the second half, all that is
    left for them, opens their next batch (it once needed an empty batch in between, and with
    empty batches refused it was never served to them)."""
    sibling_of = seed_queue(session, vsr_dir, coco_dir, 1)
    strat = ExampleStrategy(config=StudyConfig(gold_rate=0.0), rng=random.Random(0))
    batches = drive(session, strat, "v1")
    assert [len(b) for b in batches] == [1, 1], batches
    assert sorted(e for b in batches for e in b) == sorted(sibling_of)


def test_every_caption_in_two_batches_whose_size_is_reached(
    session: Session, vsr_dir: Path, coco_dir: Path
) -> None:
    """7 captions (14 Examples) and room for all in a batch: each validator is served one half
    of every caption in their first batch and the other halves in their second (one reopen),
    and each batch's size, the "of N" of its counter, is what it served."""
    sibling_of = seed_queue(session, vsr_dir, coco_dir, 7)
    strat = ExampleStrategy(config=StudyConfig(gold_rate=0.0), rng=random.Random(0))
    for name in ("v1", "v2", "v3"):
        batches = drive(session, strat, name)
        assert [len(b) for b in batches] == [7, 7], batches
        assert sorted(e for b in batches for e in b) == sorted(sibling_of)
        sizes = session.exec(
            select(Batch.size)
            .join(Worker, col(Worker.id) == Batch.worker_id)
            .where(Worker.external_id == name)
            .order_by(col(Batch.id))
        ).all()
        # The third batch finds nothing and keeps the study's size (it ends at once).
        assert list(sizes[:2]) == [7, 7], sizes


def add_machine_negatives(session: Session, queries: list[Example], per_query: int) -> set[int]:
    """``per_query`` False captions on each query's photo, made and ordered as ``vsr match``
    writes them (matching.store.save_run: origin adversarial, parent the query, ids in
    turns); returns their ids."""
    made: list[Example] = []
    for turn in range(per_query):
        for q in queries:
            ex = Example(
                image_id=q.image_id,
                caption=f"{q.subj} distractor {turn} {q.obj}",
                relation=f"distractor {turn}",
                subj=q.subj,
                obj=q.obj,
                label=False,
                origin="adversarial",
                parent_example_id=q.id,
            )
            session.add(ex)
            made.append(ex)
    session.commit()
    return {ex.id for ex in made if ex.id is not None}


def test_machine_negatives_apart_and_mixed_with_human_captions(
    session: Session, vsr_dir: Path, coco_dir: Path
) -> None:
    """Three distractors of each of four queries, queued after 16 human Examples (their ids
    come last, as after a match run): a batch never holds two Examples on one photo among
    the machine negatives, and machine negatives alternate with human captions while both
    are left; every Example is still served."""
    sibling_of = seed_queue(session, vsr_dir, coco_dir, 8)
    humans = session.exec(select(Example).where(col(Example.id).in_(sibling_of))).all()
    queries = [e for e in humans if e.label][:4]
    machine = add_machine_negatives(session, queries, 3)
    photo = {e.id: e.image_id for e in session.exec(select(Example)).all()}
    strat = ExampleStrategy(
        config=StudyConfig(gold_rate=0.0, validate_batch_size=8), rng=random.Random(0)
    )
    for name in ("v1", "v2"):
        batches = drive(session, strat, name)
        flat = [e for b in batches for e in b]
        assert len(flat) == len(set(flat))
        assert machine <= set(flat), machine - set(flat)
        for served in batches:
            # No photo twice where a machine negative is one of the two.
            for i, a in enumerate(served):
                for b in served[i + 1 :]:
                    if a in machine or b in machine:
                        assert photo[a] != photo[b], (served, a, b)
            # Never two machine negatives back to back while a human caption follows.
            for i, (a, b) in enumerate(zip(served, served[1:], strict=False)):
                later_human = any(e not in machine for e in served[i + 2 :])
                assert not (a in machine and b in machine and later_human), served
        # Mixed: the first batch has both, though every human caption has the lower id.
        assert machine & set(batches[0]) and set(batches[0]) - machine, batches[0]
