"""Marked images: masks from real COCO segmentations, Pillow rendering, cache, SVG fallback."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.webapp_coco import client_for, make_app, make_pairs, start_prolific, task
from vsr_core.models import Image, ImagePair, Instance
from webapp.admin.thumbs import thumbnail
from webapp.images import render as images
from webapp.images.signed_urls import pair_image_url


def _instance(ann: dict) -> Instance:  # type: ignore[type-arg]
    return Instance(
        coco_ann_id=ann["id"],
        image_id=1,
        category_id=ann["category_id"],
        category="x",
        bbox=ann["bbox"],
        area=ann["area"],
        iscrowd=bool(ann["iscrowd"]),
        segmentation=ann["segmentation"],
    )


def test_masks_equal_pycocotools_for_polygons_and_crowd_rle(coco_dir: Path) -> None:
    import contextlib
    import io

    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(coco_dir / "annotations" / "instances_val2017_subset.json"))
    data = coco.dataset
    sizes = {i["id"]: (i["height"], i["width"]) for i in data["images"]}
    crowd = [a for a in data["annotations"] if a["iscrowd"]][:5]
    polys = [a for a in data["annotations"] if not a["iscrowd"] and a["area"] > 30_000][:10]
    multi = [a for a in data["annotations"] if not a["iscrowd"] and len(a["segmentation"]) > 1]
    assert crowd and polys and multi
    for ann in crowd + polys + multi[:5]:
        h, w = sizes[ann["image_id"]]
        mask = images.instance_mask(_instance(ann), h, w)
        assert mask.shape == (h, w)
        assert np.array_equal(mask, coco.annToMask(ann).astype(bool))
        if not ann["iscrowd"] and ann["area"] > 30_000:
            # a polygon's COCO area is its mask area up to boundary pixels
            assert mask.sum() == pytest.approx(ann["area"], rel=0.03)


def first_image(session: Session, coco_dir: Path) -> tuple[Image, Instance, Instance]:
    """A real pair's first image with its two instances."""
    (pair_id,) = make_pairs(session, coco_dir, 1)
    pair = session.get(ImagePair, pair_id)
    assert pair is not None
    image = session.get(Image, pair.image1_id)
    a = session.get(Instance, pair.image1_a_id)
    b = session.get(Instance, pair.image1_b_id)
    assert image is not None and a is not None and b is not None
    return image, a, b


def test_rendered_image_marks_both_instances_and_is_cached(
    session: Session, coco_dir: Path, tmp_path: Path
) -> None:
    image, a, b = first_image(session, coco_dir)
    cache = tmp_path / "cache"
    out = images.render_marked(coco_dir / "images", cache, image, a, b)
    assert out is not None and out.parent == cache
    with PILImage.open(out) as marked:
        assert max(marked.size) <= images.MAX_SIDE
        scale = marked.width / image.width
        pixels = np.asarray(marked.convert("RGB")).astype(int)
    # pure-ish red and blue outline pixels exist (the two colours of the legend)
    red = (pixels[..., 0] > 180) & (pixels[..., 1] < 80) & (pixels[..., 2] < 110)
    blue = (pixels[..., 2] > 180) & (pixels[..., 0] < 80) & (pixels[..., 1] > 100)
    assert red.sum() > 100 and blue.sum() > 100
    # red sits inside A's box, blue inside B's box
    for mask, inst in ((red, a), (blue, b)):
        ys, xs = np.nonzero(mask)
        x, y, w, h = (v * scale for v in inst.bbox)
        inside = (xs >= x - 6) & (xs <= x + w + 6) & (ys >= y - 6) & (ys <= y + h + 6)
        assert inside.mean() > 0.9
    # the second call reads the cache (no re-render: same file, same mtime)
    mtime = out.stat().st_mtime_ns
    assert images.render_marked(coco_dir / "images", cache, image, a, b) == out
    assert out.stat().st_mtime_ns == mtime
    # Cache files are the server user's alone (0600), the admin thumbnails too.
    assert out.stat().st_mode & 0o777 == 0o600
    thumb = thumbnail(out, cache)
    assert thumb.parent == cache / "thumbs" and thumb.stat().st_mode & 0o777 == 0o600


def test_flat_image_root_and_missing_files(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        (pair_id,) = make_pairs(s, coco_dir, 1)
        pair = s.get(ImagePair, pair_id)
        assert pair is not None
        name = s.get(Image, pair.image1_id).file_name  # type: ignore[union-attr]
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(coco_dir / "images" / "val2017" / name, flat / name)  # <root>/<file_name>
    app = make_app(db_url, tmp_path, image_root=flat)
    client = client_for(app)
    secret = app.state.settings.secret_key
    r = client.get(pair_image_url(secret, pair_id, 1))
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert r.content[:2] == b"\xff\xd8"
    r = client.get(pair_image_url(secret, pair_id, 2))  # not copied: a clear 404, no crash
    assert r.status_code == 404 and "missing" in r.text
    for bad in (
        f"/images/pair/{pair_id}/3.jpg",
        "/images/pair/999999/1.jpg",
        "/images/pair/-1/1.jpg",
        "/images/pair/99999999999999999999/1.jpg",
    ):
        assert client.get(bad).status_code in (404, 422)


def test_without_image_root_the_page_overlays_svg_on_the_coco_url(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        make_pairs(s, coco_dir, 1)
    client = client_for(make_app(db_url, tmp_path))
    start_prolific(client, "svg")
    page = client.get("/generate").text
    fields = task(client)
    assert fields["assignment_id"]
    with Session(engine) as s:
        pair = s.exec(select(ImagePair)).one()
        image = s.get(Image, pair.image1_id)
        assert image is not None
    assert f'<image href="{image.coco_url}"' in page
    assert page.count('class="seg a"') >= 2 and page.count('class="seg b"') >= 2
    assert "/images/pair/" not in page
    assert client.get(f"/images/pair/{pair.id}/1.jpg").status_code == 404


def test_an_instance_filling_the_photo_is_outlined_inside_it(
    session: Session, coco_dir: Path, tmp_path: Path
) -> None:
    """A whole-image instance (its box is the photo) gets its outline drawn inset, all round
    the frame, in full colour: along the frame the old outline fell half off the picture."""
    (pair_id,) = make_pairs(session, coco_dir, 1)
    pair = session.get(ImagePair, pair_id)
    assert pair is not None
    image = session.get(Image, pair.image1_id)
    b = session.get(Instance, pair.image1_b_id)
    assert image is not None and image.id is not None and b is not None
    whole = Instance(
        coco_ann_id=-1,
        image_id=image.id,
        category_id=1,
        category="x",
        bbox=[0, 0, image.width, image.height],
        area=image.width * image.height,
        iscrowd=False,
        segmentation=[],
    )
    out = images.render_marked(coco_dir / "images", tmp_path / "cache", image, whole, b)
    assert out is not None
    with PILImage.open(out) as marked:
        pixels = np.asarray(marked.convert("RGB")).astype(int)
    red = (pixels[..., 0] > 180) & (pixels[..., 1] < 90) & (pixels[..., 2] < 120)
    # Each side's outermost 2 px are red along most of their length.
    for side in (red[:2, :], red[-2:, :], red[:, :2].T, red[:, -2:].T):
        assert side.mean() > 0.8, side.mean()
