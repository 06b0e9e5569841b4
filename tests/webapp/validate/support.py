"""Seeding helpers shared by the validation tests (real rows through the real models)."""

from __future__ import annotations

import itertools

from sqlmodel import Session

from vsr_core.models import Example, Image, Worker

_ids = itertools.count(1)


def make_image(session: Session, coco_id: int | None = None, file_name: str | None = None) -> Image:
    n = coco_id or 900_000 + next(_ids)
    image = Image(
        coco_id=n,
        file_name=file_name or f"{n:012d}.jpg",
        coco_split="val2017",
        width=640,
        height=480,
    )
    session.add(image)
    session.commit()
    session.refresh(image)
    return image


def make_worker(session: Session, name: str, roles: list[str] | None = None) -> Worker:
    worker = Worker(source="invite", external_id=name, roles=roles or [])
    session.add(worker)
    session.commit()
    session.refresh(worker)
    return worker


def make_example(
    session: Session,
    image: Image,
    *,
    label: bool = True,
    origin: str = "human",
    author: Worker | None = None,
    relation: str = "left of",
    subj: str = "cat",
    obj: str = "dog",
    is_gold: bool = False,
    gold_label: bool | None = None,
    target_votes: int | None = None,
) -> Example:
    assert image.id is not None
    example = Example(
        image_id=image.id,
        caption=f"The {subj} is {relation} the {obj}.",
        relation=relation,
        subj=subj,
        obj=obj,
        label=label,
        origin=origin,
        author_id=author.id if author else None,
        is_gold=is_gold,
        gold_label=gold_label,
        target_votes=target_votes,
    )
    session.add(example)
    session.commit()
    session.refresh(example)
    return example
