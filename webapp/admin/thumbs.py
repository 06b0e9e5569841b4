"""Small cached thumbnails for the data browser, so the two Examples of one caption (its True
and its False image) are told apart at a glance."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

THUMB_SIDE = 160


def thumbnail(source: Path, cache_dir: Path) -> Path:
    """A JPEG of at most THUMB_SIDE px a side from ``source``, rendered once and cached
    (keyed by the source's name, size and mtime, so a re-rendered source is not stale)."""
    from PIL import Image as PILImage  # Pillow only when a thumbnail is actually made

    stat = source.stat()
    target = cache_dir / "thumbs" / f"{source.stem}_{stat.st_size}_{int(stat.st_mtime)}.jpg"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with PILImage.open(source) as src:
        img = src.convert("RGB")
    img.thumbnail((THUMB_SIDE, THUMB_SIDE))
    # Write then rename: several server processes may render the same file at once. mkstemp
    # creates the file 0600 (the server's user alone), which the rename keeps.
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
    with os.fdopen(fd, "wb") as fh:
        img.save(fh, "JPEG", quality=80)
    os.replace(tmp, target)
    return target
