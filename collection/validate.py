"""Checks on the COCO records the sampler stores: geometry the site can draw, file names that
stay inside the image root, and values the database can hold.

A record that fails is refused with one line naming the file and the annotation, image or
category id, and nothing is stored (the whole run stops, as for any other malformed COCO
file): a COCO file with such a record is corrupt or hostile, and a half-sampled run from it
would be worse than none. Only the records the sampler keeps are checked (candidates and
their images), so a large file costs no extra pass.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from collection.errors import CocoFileError
from vsr_core.limits import INT32_MAX, LimitError, check_value

# A relative path of plain names (COCO's are "000000000139.jpg"): letters, digits, "._-",
# no segment starting with "." (so no ".."), no absolute path, no backslash, no NUL.
_FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*")
FILE_NAME_MAX = 64  # Image.file_name's column
# The largest photo side accepted (COCO's are at most 640 px): geometry is checked against the
# declared size, and pycocotools crashes on coordinates near 4.2e8.
MAX_SIDE = 20_000
OUTSIDE_SHARE = 0.01  # plus 2 px: see margin()
# A compressed RLE string (pycocotools' encoding: characters "0" to "o").
_RLE_COUNTS = re.compile(r"[0-o]*")


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_id(value: int, what: str, path: Path) -> int:
    """An id the database's integer columns hold (COCO's are small positive numbers)."""
    if not 0 < value <= INT32_MAX:
        raise CocoFileError(f"{path}: {what} {value} is outside 1 to {INT32_MAX}")
    return value


def check_file_name(name: Any, image_id: int, path: Path) -> str:
    where = f"{path}: image {image_id}"
    if not isinstance(name, str):
        raise CocoFileError(f"{where} has file_name {name!r}, not a text")
    if len(name) > FILE_NAME_MAX:
        raise CocoFileError(
            f"{where} has a file_name of {len(name)} characters; at most {FILE_NAME_MAX} fit"
        )
    if not _FILE_NAME.fullmatch(name):
        raise CocoFileError(
            f"{where} has file_name {name[:80]!r}: it must be a relative path of letters, "
            "digits and ._- (no '..', no leading '/', no NUL)"
        )
    return name


def check_web_url(value: Any, field: str, image_id: int, path: Path) -> None:
    """An image's ``coco_url`` / ``flickr_url``: an http(s) address and nothing else. The
    dashboard links to it and the site may show it: ``javascript:`` or ``data:`` from a file
    would run in the admin's browser."""
    where = f"{path}: image {image_id} has {field} {str(value)[:80]!r}"
    if not isinstance(value, str):
        raise CocoFileError(f"{where}, not a text")
    parts = urlsplit(value)
    if (
        parts.scheme.lower() not in ("http", "https")
        or not parts.netloc
        or any(ord(c) <= 32 or ord(c) == 127 for c in value)
    ):
        raise CocoFileError(
            f"{where}: only http:// and https:// addresses (without spaces) are accepted"
        )


def check_text(value: Any, field: str, what: str, column: Any, path: Path) -> None:
    """A text value against its column (NUL, length), as one line naming the record."""
    try:
        check_value(what, field, value, column.type)
    except LimitError as exc:
        raise CocoFileError(f"{path}: {exc}") from None


def check_size(width: int, height: int, image_id: int, path: Path) -> None:
    """A photo's declared size: the bounds every geometry on it is checked against."""
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        raise CocoFileError(
            f"{path}: image {image_id} is {width}x{height} px; each side must be 1 to {MAX_SIDE}"
        )


def margin(side: int) -> float:
    """How far outside the image a coordinate may lie: annotation tools round and overshoot
    a little (real COCO stays inside; LVIS-style files by a pixel or so)."""
    return 2.0 + OUTSIDE_SHARE * side


def _inside(xs: list[float], ys: list[float], width: int, height: int) -> bool:
    mx, my = margin(width), margin(height)
    return min(xs) >= -mx and max(xs) <= width + mx and min(ys) >= -my and max(ys) <= height + my


def check_bbox(bbox: Any, ann_id: int, width: int, height: int, path: Path) -> list[float]:
    if not (isinstance(bbox, list) and len(bbox) == 4 and all(_finite(v) for v in bbox)):
        raise CocoFileError(
            f"{path}: annotation {ann_id} has bbox {str(bbox)[:80]}; expected 4 numbers "
            "[x, y, width, height]"
        )
    if bbox[2] <= 0 or bbox[3] <= 0:
        raise CocoFileError(
            f"{path}: annotation {ann_id} has a bbox without a positive width and height"
        )
    x, y, w, h = bbox
    if not _inside([x, x + w], [y, y + h], width, height):
        raise CocoFileError(
            f"{path}: annotation {ann_id} has bbox {str(bbox)[:80]}, outside its "
            f"{width}x{height} image"
        )
    return [float(v) for v in bbox]


def check_area(area: Any, ann_id: int, width: int, height: int, path: Path) -> float:
    """A finite number no larger than the image (with the geometry's margin) can hold: a
    declared ``1e300`` is not an area anything on the image has."""
    if not _finite(area) or area < 0:
        raise CocoFileError(
            f"{path}: annotation {ann_id} has area {area!r}; expected a number >= 0"
        )
    most = (width + 2 * margin(width)) * (height + 2 * margin(height))
    if area > most:
        raise CocoFileError(
            f"{path}: annotation {ann_id} has area {area:.6g}, more than its {width}x{height} "
            f"image holds ({most:.0f} px at most)"
        )
    return float(area)


def check_segmentation(seg: Any, ann_id: int, width: int, height: int, path: Path) -> Any:
    """Polygons (lists of >= 3 x,y points) or an RLE dict {"size": [h, w], "counts": ...}
    the site can draw with pycocotools; None when there is none (the bbox is drawn)."""
    where = f"{path}: annotation {ann_id} has a segmentation that is"
    if seg is None or seg == [] or seg == {}:
        return None
    if isinstance(seg, list):
        for poly in seg:
            if not (
                isinstance(poly, list)
                and len(poly) >= 6
                and len(poly) % 2 == 0
                and all(_finite(v) for v in poly)
            ):
                raise CocoFileError(
                    f"{where} not a list of polygons (each an even number, at least 6, of "
                    f"coordinates): {str(poly)[:80]}"
                )
            # pycocotools (C) overflows and crashes the process on far-away points.
            if not _inside(poly[0::2], poly[1::2], width, height):
                raise CocoFileError(f"{where} outside its {width}x{height} image: {str(poly)[:80]}")
        return seg
    if not isinstance(seg, dict):
        raise CocoFileError(f"{where} neither polygons nor an RLE: {str(seg)[:80]}")
    size, counts = seg.get("size"), seg.get("counts")
    if size != [height, width]:
        raise CocoFileError(
            f"{where} an RLE of size {str(size)[:40]}, not the image's [{height}, {width}]"
        )
    if isinstance(counts, list):
        if (
            not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
            or sum(counts) != height * width
        ):
            raise CocoFileError(
                f"{where} an RLE whose counts are not run lengths covering the image"
            )
        return seg
    if isinstance(counts, str) and counts and _RLE_COUNTS.fullmatch(counts):
        _decodes(seg, where)
        return seg
    raise CocoFileError(f"{where} an RLE without valid counts: {str(counts)[:40]}")


def _decodes(rle: dict[str, Any], where: str) -> None:
    """A compressed RLE string is only known good once pycocotools has read it."""
    from pycocotools import mask as mask_utils

    try:
        mask_utils.area({"size": rle["size"], "counts": rle["counts"].encode("ascii")})
    except Exception as exc:  # pycocotools raises plain Exceptions of several kinds
        raise CocoFileError(f"{where} an RLE pycocotools cannot read ({exc})") from None
