"""Captions the way the site stores them, for the dashboard's tests: real image pairs sampled
from the bundled demo slice (real COCO 2017, demo/SOURCE.md), one Annotation per pair and its
two Examples (the True image and the False image), in-house workers made from invite links,
and validator votes with the given answer times."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from vsr_core.models import Annotation, Example, ImagePair, InviteToken, Vote, Worker

ROOT = Path(__file__).resolve().parents[2]
DEMO_COCO = ROOT / "demo" / "coco" / "annotations" / "instances_demo.json"
DEMO_IMAGES = ROOT / "demo" / "coco" / "images"


@dataclass
class Captions:
    writer_id: int
    validator_id: int
    annotation_ids: list[int]
    example_ids: list[int]  # two per annotation, True image first


def invite_worker(session: Session, label: str, role: str, n: int) -> Worker:
    """A worker made from an invite link, as /start/...?token= makes them (invite-N)."""
    w = Worker(source="invite", external_id=f"invite-{n}", roles=[role])
    session.add(w)
    session.flush()
    session.add(
        InviteToken(
            token=f"tok-{label.replace(' ', '-')}", label=label, roles=[role], worker_id=w.id
        )
    )
    return w


def write_captions(engine: Engine, n: int, *, vote_ms: int, caption_ms: int = 20_000) -> Captions:
    from collection.sampler import sample_into_db

    sample_into_db(engine, [DEMO_COCO], n, seed=0, min_area=10_000)
    with Session(engine) as s:
        writer = invite_worker(s, "Ada (lab)", "generate", 1)
        validator = invite_worker(s, "Grace (lab)", "validate", 2)
        ann_ids, ex_ids = [], []
        for pair in s.exec(select(ImagePair).order_by(ImagePair.id)).all()[:n]:  # type: ignore[arg-type]
            ann = Annotation(
                pair_id=pair.id,  # type: ignore[arg-type]
                worker_id=writer.id,  # type: ignore[arg-type]
                relation="near",
                subj=pair.concept_a,
                obj=pair.concept_b,
                true_image_id=pair.image1_id,
                duration_ms=caption_ms,
            )
            s.add(ann)
            s.flush()
            ann_ids.append(ann.id)
            for image_id, label in ((pair.image1_id, True), (pair.image2_id, False)):
                ex = Example(
                    image_id=image_id,
                    caption=f"The {pair.concept_a} is near the {pair.concept_b}.",
                    relation="near",
                    subj=pair.concept_a,
                    obj=pair.concept_b,
                    label=label,
                    annotation_id=ann.id,
                    author_id=writer.id,
                    queue_votes=1,  # its one vote below, counted as the queue counts it
                    queue_agree=1,
                )
                s.add(ex)
                s.flush()
                ex_ids.append(ex.id)
                s.add(
                    Vote(
                        example_id=ex.id,  # type: ignore[arg-type]
                        worker_id=validator.id,  # type: ignore[arg-type]
                        value=label,
                        duration_ms=vote_ms,
                    )
                )
        s.commit()
        return Captions(writer.id, validator.id, ann_ids, ex_ids)  # type: ignore[arg-type]
