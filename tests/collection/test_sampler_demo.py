"""The bundled demo data: real, complete COCO records, its images present, a useful demo."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image as PILImage
from sqlalchemy.engine import Engine

from collection.sampler import sample_into_db
from tests.collection.test_sampler_real import independent_rule

DEMO = Path(__file__).resolve().parents[2] / "demo"
DEMO_JSON = DEMO / "coco" / "annotations" / "instances_demo.json"


def test_demo_is_small_and_its_images_match() -> None:
    total = sum(
        p.stat().st_size for p in DEMO.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    assert total <= 5_000_000
    data = json.loads(DEMO_JSON.read_text())
    assert len(data["categories"]) == 80
    for img in data["images"]:
        split = "val2017" if "/val2017/" in img["coco_url"] else "train2017"
        with PILImage.open(DEMO / "coco" / "images" / split / img["file_name"]) as im:
            assert im.format == "JPEG" and im.size == (img["width"], img["height"])
    source_md = (DEMO / "SOURCE.md").read_text()
    assert all(img["flickr_url"] in source_md for img in data["images"])  # attribution


def test_demo_records_are_real_and_complete(coco_dir: Path) -> None:
    """Every image and annotation is verbatim from ../shared/coco, with ALL its annotations."""
    demo = json.loads(DEMO_JSON.read_text())
    images, anns = {}, {}
    for f in sorted((coco_dir / "annotations").glob("instances_*_subset.json")):
        data = json.loads(f.read_text())
        images.update({i["id"]: i for i in data["images"]})
        anns.update({a["id"]: a for a in data["annotations"]})
    ids = {i["id"] for i in demo["images"]}
    for img in demo["images"]:
        assert img == images[img["id"]]
    for a in demo["annotations"]:
        assert a == anns[a["id"]]
    want = {a["id"] for a in anns.values() if a["image_id"] in ids}
    assert {a["id"] for a in demo["annotations"]} == want


def test_demo_samples_its_pairs(engine: Engine) -> None:
    truth = independent_rule([DEMO_JSON], 10_000)
    summary = sample_into_db(engine, [DEMO_JSON], n_pairs=34, seed=0, min_area=10_000)
    assert summary.stored == 34 == sum(len(v) * (len(v) - 1) // 2 for v in truth.values())
    assert summary.concept_pairs == len(truth) >= 15
