"""Instance shapes (shapely) and the spatial features of two instances in one image.

The features are stored per pair in ``ImagePair.geometry`` so later tasks and the dashboard
can use them (see docs/sampling.md for the JSON layout). ``contrast`` scores how much the
layout of the two concepts differs between the two images of a pair: contrastive pairs make
good caption tasks, because one relation can be true in one image and false in the other.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import shapely
from shapely.geometry import Polygon, box
from shapely.geometry.base import BaseGeometry

GEOMETRY_VERSION = 1

# Weights of the contrast parts (sum 1). Direction dominates because most VSR relations are
# directional or projective (left/right of, above, under, in front of); containment and
# overlap cover the topological ones (in, on, contains, touching); distance the proximity ones.
CONTRAST_WEIGHTS = {
    "direction": 0.4,
    "containment": 0.2,
    "overlap": 0.15,
    "distance": 0.15,
    "size": 0.1,
}


def _mask_shape(rle: dict[str, Any], width: int, height: int) -> BaseGeometry:
    """An RLE mask as a shapely geometry: the union of its vertical pixel runs."""
    import numpy as np
    from pycocotools import mask as mask_utils

    if isinstance(rle.get("counts"), list):  # uncompressed RLE, as in COCO crowd regions
        rle = mask_utils.frPyObjects(rle, *rle.get("size", [height, width]))
    with warnings.catch_warnings():
        # pycocotools 2.0.x built for numpy 1 warns about the copy keyword under numpy 2;
        # the decoded mask is right, the warning is noise for our users.
        warnings.simplefilter("ignore", DeprecationWarning)
        m = mask_utils.decode(rle)
    if m.ndim == 3:
        m = m[:, :, 0]
    # Runs of ones in each column: starts where the padded column steps 0 -> 1, ends 1 -> 0.
    padded = np.zeros((m.shape[0] + 2, m.shape[1]), dtype=np.int8)
    padded[1:-1] = m
    steps = np.diff(padded, axis=0)
    ys0, xs0 = np.nonzero(steps == 1)
    ys1, xs1 = np.nonzero(steps == -1)
    order0 = np.lexsort((ys0, xs0))
    order1 = np.lexsort((ys1, xs1))
    if len(order0) == 0:
        return Polygon()
    boxes = shapely.box(xs0[order0], ys0[order0], xs0[order0] + 1, ys1[order1])
    return shapely.union_all(boxes)


def instance_shape(segmentation: Any, bbox: list[float], width: int, height: int) -> BaseGeometry:
    """The instance's region: its polygons, its RLE mask, or its bbox when it has neither."""
    shape: BaseGeometry | None = None
    try:
        if isinstance(segmentation, list) and segmentation:
            parts = []
            for poly in segmentation:
                if isinstance(poly, list) and len(poly) >= 6:
                    ring = list(zip(poly[0::2], poly[1::2], strict=False))
                    # COCO polygons are sometimes self-intersecting; make_valid repairs them.
                    parts.append(shapely.make_valid(Polygon(ring)))
            if parts:
                shape = shapely.union_all(parts)
        elif isinstance(segmentation, dict) and "counts" in segmentation:
            shape = _mask_shape(segmentation, width, height)
    except (ValueError, TypeError, shapely.errors.GEOSException):
        shape = None  # a malformed segmentation: the bbox below still gives a fair layout
    if shape is None or shape.is_empty or shape.area <= 0:
        if len(bbox) == 4:
            x, y, w, h = bbox
            shape = box(x, y, x + max(w, 1e-6), y + max(h, 1e-6))
        else:
            shape = Polygon()
    return shape


def area_from_segmentation(segmentation: Any, bbox: list[float], width: int, height: int) -> float:
    """The pixel area of a segmentation, as COCO computes it (pycocotools), else the bbox area."""
    from pycocotools import mask as mask_utils

    if isinstance(segmentation, list) and segmentation:
        polys = [p for p in segmentation if isinstance(p, list) and len(p) >= 6]
        if polys:
            rles = mask_utils.frPyObjects(polys, height, width)
            return float(mask_utils.area(mask_utils.merge(rles)))
    if isinstance(segmentation, dict) and "counts" in segmentation:
        rle = segmentation
        if isinstance(rle["counts"], list):
            rle = mask_utils.frPyObjects(rle, *rle.get("size", [height, width]))
        return float(mask_utils.area(rle))
    if len(bbox) == 4:
        return float(bbox[2] * bbox[3])
    return 0.0


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


def _instance_features(ann_id: int, shape: BaseGeometry, width: int, height: int) -> dict[str, Any]:
    c = shape.centroid if not shape.is_empty else Polygon()
    minx, miny, maxx, maxy = shape.bounds if not shape.is_empty else (0, 0, 0, 0)
    return {
        "ann_id": ann_id,
        "centroid": [_r(c.x / width), _r(c.y / height)] if not c.is_empty else None,
        "bbox": [_r(minx / width), _r(miny / height), _r(maxx / width), _r(maxy / height)],
        "area_frac": _r(shape.area / (width * height), 5),
    }


def layout(
    a_id: int,
    a_shape: BaseGeometry,
    b_id: int,
    b_shape: BaseGeometry,
    width: int,
    height: int,
) -> dict[str, Any]:
    """Spatial features of instance A and instance B in one image (all scale-free).

    Positions are normalised by the image size, distances by its diagonal; the direction is
    the angle of the vector from A's centroid to B's, in degrees, 0 = B to the right of A,
    90 = B above A (image y points down, so it is flipped).
    """
    diag = math.hypot(width, height)
    ca, cb = a_shape.centroid, b_shape.centroid
    dx, dy = cb.x - ca.x, cb.y - ca.y
    inter = a_shape.intersection(b_shape).area
    union = a_shape.union(b_shape).area
    area_a, area_b = a_shape.area, b_shape.area
    a_box, b_box = a_shape.bounds, b_shape.bounds
    return {
        "a": _instance_features(a_id, a_shape, width, height),
        "b": _instance_features(b_id, b_shape, width, height),
        "offset": [_r(dx / width), _r(dy / height)],
        "direction_deg": _r(math.degrees(math.atan2(-dy, dx)), 2),
        "distance": _r(math.hypot(dx, dy) / diag),
        "gap": _r(a_shape.distance(b_shape) / diag),
        "iou": _r(inter / union) if union > 0 else 0.0,
        "a_in_b": _r(inter / area_a) if area_a > 0 else 0.0,
        "b_in_a": _r(inter / area_b) if area_b > 0 else 0.0,
        "touching": bool(a_shape.intersects(b_shape)),
        "a_left_of_b": bool(ca.x < cb.x),
        "a_above_b": bool(ca.y < cb.y),
        # strictly separated boxes: no overlap at all along that axis
        "a_box_left_of_b_box": bool(a_box[2] <= b_box[0]),
        "b_box_left_of_a_box": bool(b_box[2] <= a_box[0]),
        "a_box_above_b_box": bool(a_box[3] <= b_box[1]),
        "b_box_above_a_box": bool(b_box[3] <= a_box[1]),
        "area_ratio": _r(area_a / area_b, 4) if area_b > 0 else None,
    }


def contrast(l1: dict[str, Any], l2: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """How much the layout of A and B differs between two images, in 0..1, with its parts."""
    d1, d2 = l1["direction_deg"], l2["direction_deg"]
    if l1["distance"] > 0 and l2["distance"] > 0:
        diff = abs(d1 - d2) % 360
        direction = min(diff, 360 - diff) / 180
    else:  # coinciding centroids have no direction
        direction = 0.0
    parts = {
        "direction": direction,
        "containment": max(abs(l1["a_in_b"] - l2["a_in_b"]), abs(l1["b_in_a"] - l2["b_in_a"])),
        "overlap": abs(l1["iou"] - l2["iou"]),
        # normalised centroid distances rarely exceed 0.5 of the diagonal
        "distance": min(1.0, abs(l1["distance"] - l2["distance"]) / 0.5),
        "size": _size_change(l1.get("area_ratio"), l2.get("area_ratio")),
    }
    total = sum(CONTRAST_WEIGHTS[k] * v for k, v in parts.items())
    return _r(min(1.0, max(0.0, total))), {k: _r(v) for k, v in parts.items()}


def _size_change(r1: float | None, r2: float | None) -> float:
    # A tenfold change of the A/B area ratio (e.g. one object much nearer the camera) is 1.
    if not r1 or not r2:
        return 0.0
    return min(1.0, abs(math.log(r1) - math.log(r2)) / math.log(10))
