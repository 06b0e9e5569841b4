"""Edge cases of the VSR rule and of bad input, on small COCO files the tests write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pycocotools import mask as mask_utils
from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from collection.coco import load_coco
from collection.errors import CocoFileError, UnknownCategoryError
from collection.pairs import SampledPair, sample_pairs
from collection.sampler import sample_into_db
from vsr_core.models import Image, ImagePair, Instance

ROOT = Path(__file__).resolve().parents[2]
CATS = [
    {"supercategory": "animal", "id": 17, "name": "cat"},
    {"supercategory": "animal", "id": 18, "name": "dog"},
    {"supercategory": "furniture", "id": 65, "name": "bed"},
    {"supercategory": "kitchen", "id": 44, "name": "bottle"},
]


def _square(x: float, y: float, side: float) -> list[list[float]]:
    return [[x, y, x + side, y, x + side, y + side, x, y + side]]


class Coco:
    """Builds a small COCO instances file, one image at a time."""

    def __init__(self) -> None:
        self.images: list[dict[str, Any]] = []
        self.anns: list[dict[str, Any]] = []

    def image(self, iid: int, w: int = 640, h: int = 480, split: str = "val2017") -> int:
        fname = f"{iid:012d}.jpg"
        self.images.append(
            {
                "license": 4,
                "file_name": fname,
                "coco_url": f"http://images.cocodataset.org/{split}/{fname}",
                "height": h,
                "width": w,
                "flickr_url": f"http://farm1.staticflickr.com/{iid}.jpg",
                "id": iid,
            }
        )
        return iid

    def ann(self, image_id: int, cat: int, size: float, **extra: Any) -> dict[str, Any]:
        """A square instance of ``size`` px; ``extra`` overrides fields (None drops one)."""
        area = size
        side = area**0.5
        a: dict[str, Any] = {
            "segmentation": _square(10, 10, side),
            "area": area,
            "iscrowd": 0,
            "image_id": image_id,
            "bbox": [10, 10, side, side],
            "category_id": cat,
            "id": len(self.anns) + 1000,
        }
        a.update(extra)
        a = {k: v for k, v in a.items() if v is not None}
        self.anns.append(a)
        return a

    def write(self, path: Path) -> Path:
        path.write_text(
            json.dumps(
                {
                    "info": {"description": "test"},
                    "licenses": [{"id": 4, "name": "Attribution License", "url": "x"}],
                    "images": self.images,
                    "annotations": self.anns,
                    "categories": CATS,
                }
            )
        )
        return path


def _crowd_rle(h: int, w: int) -> dict[str, Any]:
    """An uncompressed RLE crowd region, as in COCO's own crowd annotations."""
    m = np.zeros((h, w), dtype=np.uint8)
    m[300:400, 300:500] = 1
    flat = m.flatten(order="F").tolist()
    counts: list[int] = []
    cur, run = 0, 0
    for v in flat:
        if v != cur:
            counts.append(run)
            cur, run = v, 0
        run += 1
    counts.append(run)
    return {"counts": counts, "size": [h, w]}


def _edge_file(tmp_path: Path) -> tuple[Path, set[int]]:
    """A file whose eligible (cat, dog) images are known by construction."""
    c = Coco()
    # exactly at the threshold counts (>=)
    i1 = c.image(1)
    c.ann(i1, 17, 30_000)
    c.ann(i1, 18, 40_000, segmentation=_square(300, 200, 200))
    # just under the threshold does not
    i2 = c.image(2)
    c.ann(i2, 17, 29_999.99)
    c.ann(i2, 18, 40_000)
    # a crowd region of dogs: more than one dog
    i3 = c.image(3)
    c.ann(i3, 17, 50_000)
    c.ann(i3, 18, 40_000)
    c.ann(i3, 18, 20_000, iscrowd=1, segmentation=_crowd_rle(480, 640), bbox=[300, 300, 200, 100])
    # no segmentation at all: eligible, geometry from the bbox
    i4 = c.image(4, split="train2017")
    c.ann(i4, 17, 60_000, segmentation=None, bbox=[0, 0, 300, 200])
    c.ann(i4, 18, 60_000, segmentation=[], bbox=[320, 0, 300, 200])
    # an image with no annotations at all
    c.image(5)
    # two cats
    i6 = c.image(6)
    c.ann(i6, 17, 40_000)
    c.ann(i6, 17, 35_000)
    c.ann(i6, 18, 40_000)
    # a compressed-RLE (non-crowd) cat, area missing: computed by pycocotools
    i7 = c.image(7)
    m = np.zeros((480, 640), dtype=np.uint8, order="F")
    m[100:350, 50:250] = 1  # 250 x 200 = 50,000 px
    rle = mask_utils.encode(m)
    rle["counts"] = rle["counts"].decode("ascii")
    c.ann(i7, 17, 1, segmentation=rle, bbox=[50, 100, 200, 250], area=None)
    c.ann(i7, 18, 40_000, segmentation=_square(400, 100, 200))
    # a small crowd cat elsewhere makes the cat count "many" even though it is tiny
    i8 = c.image(8)
    c.ann(i8, 17, 50_000)
    c.ann(i8, 18, 50_000)
    c.ann(i8, 17, 5, iscrowd=1, segmentation=_crowd_rle(480, 640))
    # bed + bottle in an eligible image of their own (only one image: no pair)
    i9 = c.image(9)
    c.ann(i9, 65, 90_000)
    c.ann(i9, 44, 31_000)
    c.ann(i9, 17, 45_000)
    c.ann(i9, 18, 45_000, segmentation=_square(200, 200, 212.2))
    # the crowd region comes first in the file this time
    i10 = c.image(10)
    c.ann(i10, 18, 20_000, iscrowd=1, segmentation=_crowd_rle(480, 640), bbox=[300, 300, 200, 100])
    c.ann(i10, 17, 50_000)
    c.ann(i10, 18, 40_000)
    return c.write(tmp_path / "instances_val2017_edge.json"), {1, 4, 7, 9}


def test_rule_edge_cases(tmp_path: Path) -> None:
    path, eligible = _edge_file(tmp_path)
    index = load_coco([path], min_area=30_000)
    cat_dog = {i for i, cats in index.eligible.items() if {17, 18} <= set(cats)}
    assert cat_dog == eligible
    assert index.n_images == 10 and index.n_annotations == 24
    assert index.eligible[7][17].area == pytest.approx(50_000)  # computed from the RLE
    assert index.images[4].split == "train2017" and index.images[1].split == "val2017"
    res = sample_pairs(index, 100, seed=0)
    # (cat, dog) over 4 images: 6 pairs; (bed, bottle) etc. have one image only
    assert res.available == 6 == len(res.pairs)
    assert {(p.concept_a, p.concept_b) for p in res.pairs} == {("cat", "dog")}


def test_geometry_from_bbox_and_rle(tmp_path: Path) -> None:
    path, _ = _edge_file(tmp_path)
    index = load_coco([path], min_area=30_000)
    pairs = {(p.image1, p.image2): p for p in sample_pairs(index, 100, seed=0).pairs}
    g = pairs[(4, 7)].geometry
    img4, img7 = g["image1"], g["image2"]
    # image 4: boxes side by side, cat left of dog, no overlap
    assert img4["a"]["bbox"] == [0.0, 0.0, round(300 / 640, 4), round(200 / 480, 4)]
    assert img4["a_left_of_b"] and img4["a_box_left_of_b_box"] and img4["iou"] == 0.0
    assert img4["direction_deg"] == 0.0
    # image 7: the RLE cat's shape is its mask rectangle
    assert img7["a"]["bbox"] == [
        round(50 / 640, 4),
        round(100 / 480, 4),
        round(250 / 640, 4),
        round(350 / 480, 4),
    ]
    assert img7["a"]["area_frac"] == pytest.approx(50_000 / (640 * 480), abs=1e-4)


def test_prefer_contrast_picks_mirrored_layouts(tmp_path: Path) -> None:
    """Six images with the cat left of the dog, six with it right: contrast finds the flips."""
    c = Coco()
    for k in range(12):
        iid = c.image(100 + k)
        left, right = (20 + 3 * k, 320) if k % 2 else (320, 20 + 3 * k)
        c.ann(iid, 17, 40_000, segmentation=_square(left, 100, 200), bbox=[left, 100, 200, 200])
        c.ann(iid, 18, 40_000, segmentation=_square(right, 100, 200), bbox=[right, 100, 200, 200])
    index = load_coco([c.write(tmp_path / "mirror.json")])

    def flips(ps: list[SampledPair]) -> int:
        geo = [(p.geometry["image1"], p.geometry["image2"]) for p in ps]
        return sum(1 for one, two in geo if one["a_left_of_b"] != two["a_left_of_b"])

    pref = sample_pairs(index, 6, seed=3, prefer_contrast=True).pairs
    plain = sample_pairs(index, 6, seed=3).pairs
    assert flips(pref) == 6 and all(p.contrast >= 0.4 for p in pref)
    assert flips(plain) < 6


def test_stored_rows_on_both_backends(engine: Engine, tmp_path: Path) -> None:
    path, _ = _edge_file(tmp_path)
    first = sample_into_db(engine, [path], n_pairs=4, seed=1)
    again = sample_into_db(engine, [path], n_pairs=4, seed=1)
    assert (first.stored, again.stored) == (4, 2)
    with Session(engine) as s:
        pairs = s.exec(select(ImagePair)).all()
        assert len({(p.image1_id, p.image2_id) for p in pairs}) == 6
        images = s.exec(select(Image)).all()
        assert {i.coco_id for i in images} == {1, 4, 7, 9}  # upserted once each
        assert {i.license_name for i in images} == {"Attribution License"}
        insts = s.exec(select(Instance)).all()
        assert len(insts) == 8 and not any(i.iscrowd for i in insts)
        by_id = {i.id: i for i in insts}
        rle_cat = next(i for i in insts if i.category == "cat" and isinstance(i.segmentation, dict))
        assert rle_cat.area == pytest.approx(50_000)
        assert all(p.created_at.tzinfo is not None for p in pairs)
        for p in pairs:
            assert by_id[p.image1_a_id].image_id == by_id[p.image1_b_id].image_id == p.image1_id
            assert by_id[p.image2_a_id].image_id == by_id[p.image2_b_id].image_id == p.image2_id
            assert (by_id[p.image1_a_id].category, by_id[p.image2_b_id].category) == ("cat", "dog")


def test_failed_store_leaves_nothing(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import collection.store as store

    path, _ = _edge_file(tmp_path)
    real = store._id_map
    calls = {"n": 0}

    def failing(*args: Any) -> dict[int, int]:
        calls["n"] += 1
        if calls["n"] == 2:  # after images went in, while instances are written
            raise RuntimeError("disk full")
        return real(*args)

    monkeypatch.setattr(store, "_id_map", failing)
    with pytest.raises(RuntimeError):
        sample_into_db(engine, [path], n_pairs=3, seed=1)
    with Session(engine) as s:
        for model in (Image, Instance, ImagePair):
            assert s.execute(sa_select(func.count()).select_from(model)).scalar_one() == 0


def test_bad_files_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CocoFileError, match="not found"):
        load_coco([tmp_path / "nope.json"])
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(CocoFileError, match="not a COCO instances file"):
        load_coco([tmp_path / "list.json"])
    (tmp_path / "broken.json").write_text('{"images": [')
    with pytest.raises(CocoFileError, match="not valid JSON"):
        load_coco([tmp_path / "broken.json"])
    c = Coco()
    c.ann(c.image(1), 99, 40_000)  # a category the file does not have
    c.ann(1, 17, 40_000)
    with pytest.raises(CocoFileError, match="category_id 99"):
        load_coco([c.write(tmp_path / "badcat.json")])
    c = Coco()
    c.ann(c.image(1), 17, 40_000)
    c.ann(2, 18, 40_000)  # an image the file does not have
    with pytest.raises(CocoFileError, match="image 2"):
        load_coco([c.write(tmp_path / "badimg.json")])
    path, _ = _edge_file(tmp_path)
    with pytest.raises(CocoFileError, match="given twice"):
        load_coco([path, path])
    copy = tmp_path / "copy.json"
    copy.write_text(path.read_text())
    with pytest.raises(CocoFileError, match="also in another file"):
        load_coco([path, copy])
    with pytest.raises(UnknownCategoryError, match="did you mean 'cat'"):
        sample_pairs(load_coco([path]), 3, concepts=["dog", "kat"])


def _vsr(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": db}
    return subprocess.run(
        [sys.executable, "-m", "vsr_cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_cli_sample_and_its_errors(sqlite_url: str, tmp_path: Path) -> None:
    path, _ = _edge_file(tmp_path)
    ok = _vsr(
        "sample", "--coco", str(path), "--pairs", "9", "--seed", "2", "--prefer-contrast",
        "--max-per-concept-pair", "4", "--concepts", "dog,cat", db=sqlite_url,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("stored 4 new image pairs (1 concept pairs, 2 concepts, ")
    short = _vsr("sample", "--coco", str(path), "--pairs", "5", db=sqlite_url)
    assert short.returncode == 0
    assert "stored 2 new image pairs" in short.stdout and "only 2 new pairs exist" in short.stdout

    (tmp_path / "other.json").write_text('{"hello": "world"}')
    empty_db = f"sqlite:///{tmp_path / 'empty.db'}"
    cases = {
        "not found": ["--coco", str(tmp_path / "missing.json")],
        "not a COCO instances file": ["--coco", str(tmp_path / "other.json")],
        "unknown category name 'kat'": ["--coco", str(path), "--concepts", "cat,kat"],
    }
    for expect, args in cases.items():
        r = _vsr("sample", *args, "--pairs", "3", db=sqlite_url)
        assert r.returncode == 1, (expect, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], r.stderr
    r = _vsr("sample", "--coco", str(path), db=empty_db)
    assert r.returncode == 1 and "run `vsr db upgrade` first" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _vsr("sample", "--coco", str(path), "--pairs", "0", db=sqlite_url)
    assert r.returncode != 0 and "Traceback" not in r.stderr


@st.composite
def _worlds(draw: st.DrawFn) -> Coco:
    """Random small COCO files: few categories, repeats, crowds, areas around the threshold."""
    c = Coco()
    for iid in range(1, draw(st.integers(1, 12)) + 1):
        c.image(iid)
        for _ in range(draw(st.integers(0, 6))):
            cat = draw(st.sampled_from([17, 18, 65, 44]))
            size = draw(st.sampled_from([100.0, 29_999.0, 30_000.0, 30_001.5, 90_000.0]))
            crowd = draw(st.integers(0, 5)) == 0
            c.ann(iid, cat, size, iscrowd=int(crowd))
    return c


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(world=_worlds(), n=st.integers(1, 30), seed=st.integers(0, 3))
def test_random_worlds_match_the_independent_rule(
    tmp_path: Path, world: Coco, n: int, seed: int
) -> None:
    from tests.collection.test_sampler_real import independent_rule

    path = world.write(tmp_path / "world.json")
    truth = independent_rule([path], 30_000)
    res = sample_pairs(load_coco([path]), n, seed=seed)
    available = sum(len(v) * (len(v) - 1) // 2 for v in truth.values())
    assert res.available == available and len(res.pairs) == min(n, available)
    assert len({p.key for p in res.pairs}) == len(res.pairs)
    for p in res.pairs:
        imgs = truth[(p.concept_a, p.concept_b)]
        assert p.image1 < p.image2 and p.image1 in imgs and p.image2 in imgs
        assert p.geometry["image1"]["a"]["ann_id"] == imgs[p.image1][0]["id"]


def test_progress_callback_reports_every_stage(engine: Engine, tmp_path: Path) -> None:
    """The dashboard follows a run through progress(stage, done, total)."""
    path, _ = _edge_file(tmp_path)
    calls: list[tuple[str, int, int | None]] = []
    summary = sample_into_db(engine, [path], 5, seed=0, progress=lambda *a: calls.append(a))
    stages = [c[0] for c in calls]
    assert stages.index("load") < stages.index("sample") < stages.index("store")
    assert ("load", 24, None) in calls and ("sample", 5, 5) in calls
    last_store = [c for c in calls if c[0] == "store"][-1]
    assert last_store[1] == last_store[2] == summary.images + summary.instances + summary.stored
