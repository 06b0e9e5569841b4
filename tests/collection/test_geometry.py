"""Instance shapes and pair layouts (collection.geometry) on hand-made and real shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pycocotools import mask as mask_utils
from shapely.geometry import box

from collection.geometry import (
    CONTRAST_WEIGHTS,
    area_from_segmentation,
    contrast,
    instance_shape,
    layout,
)

W, H = 640, 480


def _layout(
    a: tuple[float, float, float, float], b: tuple[float, float, float, float]
) -> dict[str, Any]:
    return layout(1, box(*a), 2, box(*b), W, H)


def test_side_by_side_and_above() -> None:
    g = _layout((0, 100, 100, 200), (300, 100, 400, 200))
    assert g["a_left_of_b"] and g["a_box_left_of_b_box"] and not g["b_box_left_of_a_box"]
    assert g["direction_deg"] == 0.0 and g["iou"] == 0.0 and not g["touching"]
    assert g["distance"] == round(300 / (W**2 + H**2) ** 0.5, 4)
    assert g["gap"] == round(200 / (W**2 + H**2) ** 0.5, 4)
    up = _layout((100, 300, 200, 400), (100, 0, 200, 100))  # B straight above A
    assert up["direction_deg"] == 90.0 and not up["a_above_b"] and up["b_box_above_a_box"]


def test_containment_and_overlap() -> None:
    g = _layout((100, 100, 150, 150), (0, 0, 400, 400))  # A inside B
    assert g["a_in_b"] == 1.0 and g["b_in_a"] == round(2500 / 160_000, 4)
    assert g["iou"] == round(2500 / 160_000, 4) and g["touching"]
    half = _layout((0, 0, 100, 100), (50, 0, 150, 100))
    assert half["iou"] == round(5000 / 15_000, 4) and half["a_in_b"] == 0.5


def test_contrast_scores() -> None:
    left = _layout((0, 100, 100, 200), (300, 100, 400, 200))
    right = _layout((300, 100, 400, 200), (0, 100, 100, 200))  # mirrored
    score, parts = contrast(left, left)
    assert score == 0.0 and all(v == 0 for v in parts.values())
    score, parts = contrast(left, right)
    assert parts["direction"] == 1.0 and score == pytest.approx(CONTRAST_WEIGHTS["direction"])
    inside = _layout((120, 120, 180, 180), (100, 100, 200, 200))
    score2, parts2 = contrast(left, inside)
    assert parts2["containment"] == 1.0 and 0 < score2 <= 1


def test_bow_tie_polygon_is_repaired() -> None:
    # self-intersecting ring: two triangles of area 50 each
    shape = instance_shape([[0, 0, 10, 10, 10, 0, 0, 10]], [0, 0, 10, 10], W, H)
    assert shape.is_valid and shape.area == pytest.approx(50)


def test_missing_or_degenerate_segmentation_falls_back_to_bbox() -> None:
    bad_rle = {"counts": "not an rle", "size": [H, W]}
    for seg in (None, [], [[1, 2, 3, 4]], [[0, 0, 5, 0, 10, 0]], [["a", 1, 2, 3, 4, 5]], bad_rle):
        shape = instance_shape(seg, [10, 20, 30, 40], W, H)
        assert shape.bounds == (10, 20, 40, 60)


def test_rle_shape_matches_the_mask() -> None:
    m = np.zeros((H, W), dtype=np.uint8, order="F")
    m[50:150, 60:100] = 1
    m[200:210, 300:400] = 1  # a second, separate part
    rle = mask_utils.encode(m)
    shape = instance_shape(rle, [], W, H)
    assert shape.area == pytest.approx(int(m.sum()))
    assert shape.bounds == (60, 50, 400, 210)
    assert area_from_segmentation(rle, [], W, H) == int(m.sum())


def test_real_polygons_agree_with_coco_area(coco_dir: Path) -> None:
    """Shapely's area of real COCO polygons is close to COCO's rasterised area."""
    data = json.loads((coco_dir / "annotations/instances_val2017_subset.json").read_text())
    sizes = {i["id"]: (i["width"], i["height"]) for i in data["images"]}
    big = [a for a in data["annotations"] if not a["iscrowd"] and a["area"] >= 30_000]
    assert len(big) > 100
    for a in big:
        w, h = sizes[a["image_id"]]
        shape = instance_shape(a["segmentation"], a["bbox"], w, h)
        assert shape.is_valid
        assert shape.area == pytest.approx(a["area"], rel=0.05)
        assert area_from_segmentation(a["segmentation"], a["bbox"], w, h) == pytest.approx(
            a["area"], rel=0.02
        )
