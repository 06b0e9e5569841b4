"""Drawing a marked image: the pair's two instances over the COCO photo (Pillow), masks from
pycocotools (polygons and crowd RLE alike), so the drawn region is exactly COCO's segmentation.

Runs in the render pool's child processes (webapp.images.render): pycocotools is C code that
a hostile geometry can crash (a polygon at 4.2e8 px segfaults it), so nothing here runs in a
server process. Plain values in and out, and only numpy, Pillow and pycocotools imported, so
a child starts fast and pickles little.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image as PILImage
from PIL import ImageFilter
from pycocotools import mask as mask_utils

# Concept A / concept B. Red and blue stay distinguishable for the common colour blindnesses
# when paired with the legend's text; the CSS variables --ent-a/--ent-b use the same values.
COLOUR_A = (230, 25, 75)
COLOUR_B = (30, 136, 229)
MAX_SIDE = 900


def end_with_parent() -> None:
    """Pool initializer: end this child when the server process that started it is gone (a
    SIGKILL leaves nobody to shut the pool down, and the child would wait forever). Polled,
    not PR_SET_PDEATHSIG (webapp.http.parent_watch): that follows the parent *thread*, and
    the request thread that happened to start the pool may end long before the process."""
    parent = os.getppid()

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=poll, name="parent-watch", daemon=True).start()


def mask_of(seg: Any, bbox: Any, height: int, width: int) -> np.ndarray:
    """A boolean HxW mask of a segmentation (polygons or RLE), or of the box without one."""
    if not seg:
        x, y, w, h = (int(round(v)) for v in bbox)
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


def draw_marked(source: str, target: str, geom_a: tuple[Any, Any], geom_b: tuple[Any, Any]) -> None:
    """Write ``target`` (a JPEG): ``source`` with A's and B's (segmentation, bbox) marked.

    Raises TypeError/ValueError/KeyError/IndexError for a geometry pycocotools refuses.
    """
    with PILImage.open(source) as src:
        base = src.convert("RGB")
    h, w = base.height, base.width
    masks = mask_of(*geom_a, h, w), mask_of(*geom_b, h, w)
    _overlay(base, masks[0], COLOUR_A)
    _overlay(base, masks[1], COLOUR_B)
    base.thumbnail((MAX_SIDE, MAX_SIDE))
    folder = Path(target).parent
    folder.mkdir(parents=True, exist_ok=True)
    # Write then rename: several server processes may render the same file at once. mkstemp
    # creates the file 0600 (the server's user alone), which the rename keeps.
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            base.save(fh, "JPEG", quality=88)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
