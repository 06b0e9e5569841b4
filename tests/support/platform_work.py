"""Work done through a platform link, as the site records it: a batch whose entry names the
Prolific session (= submission id) and study, its leases, and the captions' Examples or the
votes made in them. For the settlement tests and the ledger script."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from itertools import count
from typing import Any

from sqlmodel import Session

from vsr_core.models import (
    Annotation,
    Assignment,
    Batch,
    BatchStatus,
    Example,
    Image,
    ImagePair,
    Instance,
    LeaseStatus,
    PlatformStudy,
    PlatformSubmission,
    Vote,
    Worker,
)
from vsr_core.types import utcnow

# Settled by validation, every vote agreeing with the label: kept.
KEPT: dict[str, Any] = {"queue_settled": True, "queue_votes": 3, "queue_agree": 3}
NOT_KEPT: dict[str, Any] = {"queue_settled": True, "queue_votes": 3, "queue_agree": 1}
_serial = count(1)


@dataclass
class Scene:
    """One image pair to write captions on and one Example to vote on."""

    pair_id: int
    image_id: int
    target_id: int  # an Example to vote on


def scene(session: Session, study_id: int = 1) -> Scene:
    n = next(_serial)
    images = [
        Image(
            coco_id=10_000 * n + i,
            file_name=f"{n}-{i}.jpg",
            coco_split="val2017",
            width=10,
            height=10,
        )
        for i in (1, 2)
    ]
    session.add_all(images)
    session.flush()
    inst = [
        Instance(
            coco_ann_id=10_000 * n + 10 * k + i,
            image_id=images[k].id or 0,
            category_id=1,
            category="cat",
            bbox=[0, 0, 1, 1],
            area=1.0,
        )
        for k in (0, 1)
        for i in (1, 2)
    ]
    session.add_all(inst)
    session.flush()
    pair = ImagePair(
        study_id=study_id,
        concept_a="cat",
        concept_b="dog",
        image1_id=images[0].id or 0,
        image1_a_id=inst[0].id or 0,
        image1_b_id=inst[1].id or 0,
        image2_id=images[1].id or 0,
        image2_a_id=inst[2].id or 0,
        image2_b_id=inst[3].id or 0,
    )
    session.add(pair)
    session.flush()
    target = Example(
        study_id=study_id,
        image_id=images[0].id or 0,
        caption="The cat is on the dog.",
        relation="on",
        subj="cat",
        obj="dog",
        label=True,
    )
    session.add(target)
    session.commit()
    return Scene(pair.id or 0, images[0].id or 0, target.id or 0)


def worker(session: Session, pid: str, source: str = "prolific") -> Worker:
    w = Worker(source=source, external_id=pid)
    session.add(w)
    session.commit()
    return w


def batch(
    session: Session,
    w: Worker,
    entry: dict[str, str],
    kind: str = "generate",
    study_id: int = 1,
    size: int = 4,
) -> Batch:
    start = utcnow() - timedelta(hours=1)
    b = Batch(
        study_id=study_id,
        worker_id=w.id or 0,
        kind=kind,
        status=BatchStatus.completed,
        size=size,
        created_at=start,
        deadline=start + timedelta(hours=1),
        finished_at=start + timedelta(minutes=20),
        entry=entry,
    )
    session.add(b)
    session.commit()
    return b


def _lease(
    session: Session, b: Batch, kind: str, pair_id: int | None = None, example_id: int | None = None
) -> Assignment:
    a = Assignment(
        batch_id=b.id or 0,
        worker_id=b.worker_id,
        kind=kind,
        pair_id=pair_id,
        example_id=example_id,
        status=LeaseStatus.done,
        lease_expires_at=utcnow(),
    )
    session.add(a)
    session.flush()
    return a


def captions(session: Session, b: Batch, s: Scene, kept: int, not_kept: int = 0) -> list[int]:
    """Captions written in the batch: one Example each (``kept`` kept by validation)."""
    ids = []
    for i in range(kept + not_kept):
        a = _lease(session, b, "generate", pair_id=s.pair_id)
        ann = Annotation(
            pair_id=s.pair_id,
            worker_id=b.worker_id,
            assignment_id=a.id,
            relation="on",
            subj="cat",
            obj="dog",
            true_image_id=s.image_id,
        )
        session.add(ann)
        session.flush()
        ex = Example(
            study_id=b.study_id,
            image_id=s.image_id,
            caption=f"The cat {i} is on the dog.",
            relation="on",
            subj="cat",
            obj="dog",
            label=True,
            author_id=b.worker_id,
            annotation_id=ann.id,
            **(KEPT if i < kept else NOT_KEPT),
        )
        session.add(ex)
        session.flush()
        ids.append(ex.id or 0)
    session.commit()
    return ids


def votes(session: Session, b: Batch, s: Scene, n: int) -> None:
    """``n`` votes in the batch, each on an Example of its own (one vote per worker and
    Example)."""
    for i in range(n):
        target = Example(
            study_id=b.study_id,
            image_id=s.image_id,
            relation="on",
            subj="cat",
            obj="dog",
            label=True,
            caption=f"The cat {i} is on the dog.",
        )
        session.add(target)
        session.flush()
        a = _lease(session, b, "validate", example_id=target.id)
        session.add(
            Vote(example_id=target.id or 0, worker_id=b.worker_id, value=True, assignment_id=a.id)
        )
    session.commit()


def prolific_entry(study_ext: str, submission: str) -> dict[str, str]:
    return {"study_id": study_ext, "session_id": submission}


def crowd(session: Session, row: PlatformStudy, n: int, start: int = 0) -> None:
    """``n`` submissions to the platform study ``row``, synced as AWAITING REVIEW, each
    worker with one batch from its own session holding one kept caption (bulk inserts: the
    statement-count test and the bench use thousands)."""
    s = scene(session, row.study_id)
    workers = [Worker(source=row.platform, external_id=f"w{start + i}") for i in range(n)]
    session.add_all(workers)
    session.flush()
    begun = utcnow() - timedelta(hours=1)
    batches = [
        Batch(
            study_id=row.study_id,
            worker_id=w.id or 0,
            kind="generate",
            status=BatchStatus.completed,
            size=1,
            done_count=1,
            created_at=begun,
            deadline=begun + timedelta(hours=1),
            finished_at=begun,
            entry=prolific_entry(row.external_id, f"s{start + i}"),
        )
        for i, w in enumerate(workers)
    ]
    session.add_all(batches)
    session.flush()
    leases = [
        Assignment(
            batch_id=b.id or 0,
            worker_id=b.worker_id,
            kind="generate",
            pair_id=s.pair_id,
            status=LeaseStatus.done,
            lease_expires_at=begun,
        )
        for b in batches
    ]
    session.add_all(leases)
    session.flush()
    notes = [
        Annotation(
            pair_id=s.pair_id,
            worker_id=a.worker_id,
            assignment_id=a.id,
            relation="on",
            subj="cat",
            obj="dog",
            true_image_id=s.image_id,
        )
        for a in leases
    ]
    session.add_all(notes)
    session.flush()
    session.add_all(
        Example(
            study_id=row.study_id,
            image_id=s.image_id,
            relation="on",
            subj="cat",
            obj="dog",
            label=True,
            author_id=a.worker_id,
            caption="The cat is on the dog.",
            annotation_id=a.id,
            **KEPT,
        )
        for a in notes
    )
    session.add_all(
        PlatformSubmission(
            platform_study_id=row.id or 0,
            platform=row.platform,
            external_id=f"s{start + i}",
            worker_external_id=w.external_id,
            status="AWAITING REVIEW",
            worker_id=w.id,
        )
        for i, w in enumerate(workers)
    )
    session.commit()
