"""Drawing runs in a pool of child processes: a geometry that crashes pycocotools (stored
before `vsr sample` refused it) costs that image a 500, not the server process; and the
render cache is keyed by what is drawn, not only by ids."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.webapp_coco import client_for, make_app, make_pairs
from tests.webapp.images.test_render import first_image
from vsr_core.models import ImagePair, Instance
from webapp.images import render as images
from webapp.images.signed_urls import pair_image_url

# pycocotools segfaults on this polygon (checked: Python exits with SIGSEGV).
CRASHING = [[0.0, 0.0, 4.3e8, 0.0, 4.3e8, 4.3e8]]


def _pair(engine: Engine, coco_dir: Path) -> int:
    with Session(engine) as s:
        (pair_id,) = make_pairs(s, coco_dir, 1)
        return pair_id


def test_a_crashing_geometry_is_a_500_for_that_image_only(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    pair_id = _pair(engine, coco_dir)
    with Session(engine) as s:  # the row written straight to the database, past `vsr sample`
        pair = s.get(ImagePair, pair_id)
        assert pair is not None
        inst = s.get(Instance, pair.image1_a_id)
        assert inst is not None
        inst.segmentation = CRASHING
        s.add(inst)
        s.commit()
    app = make_app(db_url, tmp_path, image_root=coco_dir / "images")
    client = client_for(app)
    secret = app.state.settings.secret_key
    # Rendered in this (the test's) process, the GET would end it with SIGSEGV.
    r = client.get(pair_image_url(secret, pair_id, 1))
    assert r.status_code == 500 and "could not be drawn" in r.text
    # The pool is started again: the pair's other image, and every other route, still answer.
    r = client.get(pair_image_url(secret, pair_id, 2))
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
    assert client.get("/healthz").status_code == 200
    assert client.get(pair_image_url(secret, pair_id, 1)).status_code == 500  # not cached


def test_the_cache_is_keyed_by_the_geometry(
    session: Session, coco_dir: Path, tmp_path: Path
) -> None:
    """Two servers over different databases sharing one cache folder: same ids, different
    geometry, different files (before, the second server served the first one's drawing)."""
    image, a, b = first_image(session, coco_dir)
    cache, root = tmp_path / "shared_cache", coco_dir / "images"
    first = images.render_marked(root, cache, image, a, b)
    other_a = a.model_copy(update={"segmentation": None, "bbox": [5.0, 5.0, 50.0, 40.0]})
    second = images.render_marked(root, cache, image, other_a, b)
    assert first is not None and second is not None and first != second
    assert first.read_bytes() != second.read_bytes()
    assert images.render_marked(root, cache, image, a, b) == first
