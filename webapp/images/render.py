"""Marked images: the pair's two instances drawn over the COCO photo (Pillow), cached on disk.

Masks come from pycocotools (polygons and crowd RLE alike), so the drawn region is exactly
COCO's segmentation. Without a local image root the page overlays the polygons on the COCO
URL instead (see :func:`svg_shapes`).
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image as PILImage
from PIL import ImageFilter
from pycocotools import mask as mask_utils

from vsr_core.models import Image, Instance

log = logging.getLogger("webapp")

# Concept A / concept B. Red and blue stay distinguishable for the common colour blindnesses
# when paired with the legend's text; the CSS variables --ent-a/--ent-b use the same values.
COLOUR_A = (230, 25, 75)
COLOUR_B = (30, 136, 229)
MAX_SIDE = 900
RENDER_VERSION = 4  # bump when the drawing changes, so cached files are not reused


def find_source(image_root: Path, image: Image) -> Path | None:
    """The image's file under ``image_root``, or None; never a path outside it, whatever the
    row says (``/etc/hostname`` or ``../../x`` in file_name: ``vsr sample`` refuses those
    now, rows stored before may still hold them).

    Containment is checked on the normalised path, not the symlink-resolved one: a split
    folder the admin linked into the image root is theirs to place; names from the
    database are what is not trusted.
    """
    root = os.path.normpath(os.path.abspath(image_root))
    for parts in ((image.coco_split, image.file_name), (image.file_name,)):
        if any("\x00" in part for part in parts):
            continue
        candidate = os.path.normpath(os.path.join(root, *parts))
        if os.path.commonpath([root, candidate]) != root or candidate == root:
            continue
        if os.path.isfile(candidate):
            return Path(candidate)
    return None


def instance_mask(instance: Instance, height: int, width: int) -> np.ndarray:
    """A boolean HxW mask of an instance's segmentation (polygons or RLE)."""
    seg: Any = instance.segmentation
    if not seg:
        x, y, w, h = (int(round(v)) for v in instance.bbox)
        out = np.zeros((height, width), dtype=bool)
        out[max(y, 0) : y + h, max(x, 0) : x + w] = True
        return out
    if isinstance(seg, list):
        rles = mask_utils.frPyObjects(seg, height, width)
        rle = mask_utils.merge(rles)
    elif isinstance(seg.get("counts"), list):
        rle = mask_utils.frPyObjects(seg, height, width)
    else:
        rle = dict(seg)
        if isinstance(rle["counts"], str):
            rle["counts"] = rle["counts"].encode("ascii")
    with warnings.catch_warnings():
        # pycocotools' decode trips a NumPy 2 DeprecationWarning (copy keyword); harmless.
        warnings.simplefilter("ignore", DeprecationWarning)
        return np.asarray(mask_utils.decode(rle), dtype=bool)


def _overlay(base: PILImage.Image, mask: np.ndarray, colour: tuple[int, int, int]) -> None:
    alpha = PILImage.fromarray((mask * 255).astype(np.uint8), "L")
    tint = PILImage.new("RGB", base.size, colour)
    base.paste(tint, (0, 0), alpha.point(lambda v: v * 22 // 100))
    # Outline = the band of the mask within ``width`` px of its edge (thick enough to show on
    # a downscaled photo), drawn inset: the photo's frame counts as outside the instance, so
    # one that fills the photo is outlined all round inside it, not along the frame's edge
    # where half the line would fall off the picture.
    width = max(3, round(max(base.size) / 250))
    framed = PILImage.fromarray(np.pad(mask, 1).astype(np.uint8) * 255, "L")
    inner = framed.filter(ImageFilter.MinFilter(2 * width + 1))
    band = (np.asarray(framed) & ~np.asarray(inner))[1:-1, 1:-1]
    base.paste(tint, (0, 0), PILImage.fromarray(band, "L"))


def render_marked(
    image_root: Path, cache_dir: Path, image: Image, inst_a: Instance, inst_b: Instance
) -> Path | None:
    """Path of a JPEG with A and B marked; rendered once and cached. None if no source file."""
    key = f"{image.coco_id}_{inst_a.coco_ann_id}_{inst_b.coco_ann_id}_v{RENDER_VERSION}.jpg"
    target = cache_dir / key
    if target.is_file():
        return target
    source = find_source(image_root, image)
    if source is None:
        return None
    with PILImage.open(source) as src:
        base = src.convert("RGB")
    h, w = base.height, base.width
    try:
        masks = instance_mask(inst_a, h, w), instance_mask(inst_b, h, w)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        # A geometry stored before `vsr sample` checked it: no image rather than a 500.
        log.warning("cannot draw instances %s/%s: %s", inst_a.id, inst_b.id, exc)
        return None
    _overlay(base, masks[0], COLOUR_A)
    _overlay(base, masks[1], COLOUR_B)
    base.thumbnail((MAX_SIDE, MAX_SIDE))
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Write then rename: several server processes may render the same file at once. mkstemp
    # creates the file 0600 (the server's user alone), which the rename keeps.
    fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".part")
    with os.fdopen(fd, "wb") as fh:
        base.save(fh, "JPEG", quality=88)
    os.replace(tmp, target)
    return target


def svg_shapes(instance: Instance) -> list[str]:
    """SVG polygon point lists for an instance (a crowd RLE falls back to its box); [] for a
    geometry stored before ``vsr sample`` checked it, rather than a 500."""
    seg: Any = instance.segmentation
    try:
        if isinstance(seg, list) and seg:
            return [
                " ".join(f"{float(seg_poly[i]):.1f},{float(seg_poly[i + 1]):.1f}"
                         for i in range(0, len(seg_poly) - 1, 2))
                for seg_poly in seg
            ]
        x, y, w, h = (float(v) for v in instance.bbox)
    except (TypeError, ValueError):
        return []
    return [f"{x:.1f},{y:.1f} {x + w:.1f},{y:.1f} {x + w:.1f},{y + h:.1f} {x:.1f},{y + h:.1f}"]
