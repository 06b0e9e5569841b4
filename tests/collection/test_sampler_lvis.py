"""LVIS-format and lab-style COCO exports in the sampler, made from the real COCO subsets."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from collection.coco import load_coco
from collection.errors import CocoFileError
from collection.sampler import sample_into_db
from vsr_core.models import ImagePair, Instance


def _val(coco_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (coco_dir / "annotations" / "instances_val2017_subset.json").read_text()
    )
    return data


def _singles(data: dict[str, Any], min_area: float) -> dict[int, set[int]]:
    """image -> categories with exactly one non-crowd instance of area >= min_area."""
    count: Counter[tuple[int, int]] = Counter()
    for a in data["annotations"]:
        count[(a["image_id"], a["category_id"])] += 1000 if a["iscrowd"] else 1
    out: dict[int, set[int]] = {}
    for a in data["annotations"]:
        key = (a["image_id"], a["category_id"])
        if count[key] == 1 and a["area"] >= min_area:
            out.setdefault(a["image_id"], set()).add(a["category_id"])
    return out


def make_lvis(coco_dir: Path, path: Path, min_area: float) -> dict[int, set[int]]:
    """Write an LVIS-style file (no iscrowd, federated image fields) from the real val subset;
    return the (image -> categories) marked not exhaustive where they would be eligible."""
    data = _val(coco_dir)
    singles = _singles(data, min_area)
    rng = random.Random(15)
    marked: dict[int, set[int]] = {}
    for img in data["images"]:
        present = sorted(
            {a["category_id"] for a in data["annotations"] if a["image_id"] == img["id"]}
        )
        cands = sorted(singles.get(img["id"], set()))
        chosen = set(rng.sample(cands, 1)) if cands and rng.random() < 0.4 else set()
        if chosen:
            marked[img["id"]] = chosen
        img["not_exhaustive_category_ids"] = sorted(chosen)
        img["neg_category_ids"] = [c["id"] for c in data["categories"] if c["id"] not in present][
            :5
        ]
        del img["file_name"]  # LVIS images carry coco_url only
    # LVIS has no crowd regions: drop them (and the images' other instances stay real).
    data["annotations"] = [dict(a, iscrowd=0) for a in data["annotations"] if not a["iscrowd"]]
    for a in data["annotations"]:
        a.pop("iscrowd")
    path.write_text(json.dumps(data))
    return marked


def test_lvis_non_exhaustive_categories_are_never_used(coco_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "lvis_v1_val.json"
    marked = make_lvis(coco_dir, path, 5_000)
    assert sum(len(c) for c in marked.values()) >= 10
    index = load_coco([path], min_area=5_000)
    for image_id, cats in marked.items():
        assert not cats & set(index.eligible.get(image_id, {}))
    assert index.lvis_set_aside == len(marked)
    # the rest of each marked image is still usable: what remains is the plain COCO rule
    plain = load_coco([coco_dir / "annotations" / "instances_val2017_subset.json"], 5_000)
    assert index.lvis_set_aside and plain.lvis_set_aside == 0
    data = _val(coco_dir)
    no_crowd = dict(data, annotations=[a for a in data["annotations"] if not a["iscrowd"]])
    want = {i: c - marked.get(i, set()) for i, c in _singles(no_crowd, 5_000).items()}
    got = {i: set(c) for i, c in index.eligible.items()}
    assert got == {i: c for i, c in want.items() if c}


def test_lvis_sample_reports_set_aside_images(
    engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "lvis.json"
    marked = make_lvis(coco_dir, path, 5_000)
    summary = sample_into_db(engine, [path], 40, seed=3, min_area=5_000)
    assert summary.stored > 0 and summary.lvis_set_aside == len(marked)
    assert f"{len(marked)} images set aside where a category is not exhaustively" in (
        summary.line()
    )
    ann_image = {a["id"]: a["image_id"] for a in _val(coco_dir)["annotations"]}
    with Session(engine) as s:
        assert s.exec(select(ImagePair)).first() is not None
        used = {(ann_image[i.coco_ann_id], i.category_id) for i in s.exec(select(Instance))}
    assert used and not {(img, c) for img, cats in marked.items() for c in cats} & used


def test_bad_lvis_field_is_a_clear_error(coco_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "lvis.json"
    make_lvis(coco_dir, path, 5_000)
    data = json.loads(path.read_text())
    data["images"][0]["not_exhaustive_category_ids"] = "all"
    path.write_text(json.dumps(data))
    # only reported when the image has a candidate; give every image one
    with pytest.raises(CocoFileError, match="not_exhaustive_category_ids"):
        load_coco([path], min_area=0)


def test_lab_export_with_its_own_categories(engine: Engine, coco_dir: Path, tmp_path: Path) -> None:
    """A lab's own COCO export: three custom categories with real polygons borrowed from
    COCO (cats, dogs and laptops renamed), ids of their own."""
    data = _val(coco_dir)
    rename = {17: (1, "specimen"), 18: (2, "probe"), 73: (3, "monitor unit")}
    anns = [
        dict(a, category_id=rename[a["category_id"]][0])
        for a in data["annotations"]
        if a["category_id"] in rename
    ]
    images = {a["image_id"] for a in anns}
    export = {
        "images": [i for i in data["images"] if i["id"] in images],
        "annotations": anns,
        "categories": [{"id": i, "name": n, "supercategory": "lab"} for i, n in rename.values()],
    }
    path = tmp_path / "lab_export.json"
    path.write_text(json.dumps(export))
    summary = sample_into_db(engine, [path], 10, seed=1, min_area=1_000)
    assert summary.stored > 0 and summary.lvis_set_aside == 0
    with Session(engine) as s:
        pairs = s.exec(select(ImagePair)).all()
        assert {(p.concept_a, p.concept_b) for p in pairs} <= {
            ("monitor unit", "probe"),
            ("monitor unit", "specimen"),
            ("probe", "specimen"),
        }
