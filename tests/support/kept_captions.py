"""Kept captions on the demo's pairs, as the demo walk-through leaves them: the pairs
scripts/demo_data.sh samples from the bundled COCO slice, N captions with relations drawn at
random (seeded) from the enabled ones, and each caption's two Examples judged right by three
validators, so every one is kept. For `vsr match` on demo-sized data (tests and
bench/match_demo_size.py)."""

from __future__ import annotations

import random

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.admin_captions import DEMO_COCO
from vsr_core.captions import render_caption
from vsr_core.models import Annotation, Example, ImagePair, Vote, Worker
from vsr_core.relations import enabled_relations


def write_kept_captions(engine: Engine, n: int, seed: int, *, judged: bool = True) -> None:
    """``judged=False`` writes the captions with no votes: nothing is kept yet."""
    from collection.sampler import sample_into_db

    sample_into_db(engine, [DEMO_COCO], 34, seed=0, min_area=10_000)  # as demo_data.sh
    relations = [r.name for r in enabled_relations()]
    rng = random.Random(seed)
    with Session(engine) as s:
        writer = Worker(source="invite", external_id="writer", roles=["generate"])
        judges = [
            Worker(source="invite", external_id=f"judge-{i}", roles=["validate"]) for i in range(3)
        ]
        s.add_all([writer, *judges])
        s.flush()
        pairs = list(s.exec(select(ImagePair).order_by(col(ImagePair.id))))
        for pair in rng.sample(pairs, n):
            relation = rng.choice(relations)
            ann = Annotation(
                pair_id=pair.id,  # type: ignore[arg-type]
                worker_id=writer.id,  # type: ignore[arg-type]
                relation=relation,
                subj=pair.concept_a,
                obj=pair.concept_b,
                true_image_id=pair.image1_id,
                duration_ms=9000,
            )
            s.add(ann)
            s.flush()
            for image_id, label in ((pair.image1_id, True), (pair.image2_id, False)):
                ex = Example(
                    image_id=image_id,
                    relation=relation,
                    subj=pair.concept_a,
                    obj=pair.concept_b,
                    label=label,
                    annotation_id=ann.id,
                    author_id=writer.id,
                    study_id=pair.study_id,
                    caption=render_caption(pair.concept_a, relation, pair.concept_b),
                )
                s.add(ex)
                s.flush()
                for judge in judges if judged else ():
                    s.add(Vote(example_id=ex.id, worker_id=judge.id, value=label))  # type: ignore[arg-type]
        s.commit()
