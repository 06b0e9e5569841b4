"""Reading a run of Examples at once for the display cache (webapp.validate.display_ahead)
gives exactly what reading each on its own gives (view.display_one): human Examples (their
annotation's image pair), an adversarial child (its parent's annotation), Examples without
an annotation (the image's only instance of each concept, or nothing when that is unclear),
with and without local images; settled Examples in between are not read."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.webapp.validate.test_routes import seed_examples
from vsr_core.models import Example, Instance
from webapp.validate.display_ahead import fill_ahead
from webapp.validate.display_cache import DisplayCache
from webapp.validate.view import display_one, example_display


def _more(session: Session, first: Example) -> list[int]:
    """An adversarial child of ``first`` and annotation-less Examples on its image."""
    insts = session.exec(select(Instance).where(Instance.image_id == first.image_id)).all()
    categories = sorted({i.category for i in insts})
    made = [
        Example(
            image_id=first.image_id,
            caption="child",
            relation=first.relation,
            subj=first.obj,
            obj=first.subj,
            label=not first.label,
            origin="adversarial",
            parent_example_id=first.id,
        ),
        Example(
            image_id=first.image_id,
            caption="imported",
            relation="near",
            subj=first.subj,
            obj=first.obj,
            label=True,
            origin="imported",
        ),
        Example(
            image_id=first.image_id,
            caption="no such",
            relation="near",
            subj="unicorn",
            obj=first.obj,
            label=True,
            origin="imported",
        ),
        Example(
            image_id=first.image_id,
            caption="settled",
            relation="near",
            subj=categories[0],
            obj=categories[-1],
            label=True,
            origin="human",
            queue_open=False,
        ),
    ]
    for ex in made:
        session.add(ex)
    session.commit()
    return [ex.id for ex in made if ex.id is not None]


@pytest.mark.parametrize("local_images", [False, True])
def test_a_run_read_at_once_equals_each_read_alone(
    engine: Engine, coco_dir: Path, local_images: bool
) -> None:
    with Session(engine) as s:
        ids = seed_examples(s, coco_dir, n_pairs=3)
        first = s.get(Example, ids[0])
        assert first is not None
        extra = _more(s, first)
    everything = ids + extra
    settled = extra[-1]
    with Session(engine) as s:
        alone = {i: display_one(s, i, local_images) for i in everything}
    assert any(d["image"]["shapes_subj"] or d["image"]["marked"] for d in alone.values())
    assert any(not (d["image"]["shapes_subj"] or d["image"]["marked"]) for d in alone.values())
    cache: DisplayCache = DisplayCache()
    with Session(engine) as s:
        fill_ahead(s, everything[0], local_images, cache)
        assert set(cache) == set(everything) - {settled}
        for i in everything:
            assert example_display(s, i, local_images, cache) == alone[i], i
