"""Marked images: the pair's two instances drawn over the COCO photo, cached on disk.

The drawing itself (webapp.images.draw: Pillow and pycocotools) runs in a small pool of
child processes: pycocotools is C code, and a geometry stored before `vsr sample` checked it
(a polygon at 4.2e8 px) segfaults it. A crash then ends a pool child, not the server process
with every request in flight on it: that image answers 500, the pool is started again, and
other requests never notice. Without a local image root the page overlays the polygons on
the COCO URL instead (see :func:`svg_shapes`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from vsr_core.models import Image, Instance
from webapp.http.errors import PageError
from webapp.images.draw import (
    COLOUR_A,
    COLOUR_B,
    MAX_SIDE,
    draw_marked,
    end_with_parent,
    mask_of,
)

__all__ = [
    "COLOUR_A",
    "COLOUR_B",
    "MAX_SIDE",
    "find_source",
    "instance_mask",
    "render_marked",
    "svg_shapes",
]

log = logging.getLogger("webapp")

RENDER_VERSION = 4  # bump when the drawing changes, so cached files are not reused
POOL_WORKERS = 2  # renders are rare (each file once per cache), a crash costs one restart
RENDER_TIMEOUT = 60.0  # seconds; a photo of a few MB takes well under one


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
    """A boolean HxW mask of an instance's segmentation (polygons or RLE), in this process:
    for geometry ``vsr sample`` has checked (tests, benches), never for a request."""
    return mask_of(instance.segmentation, instance.bbox, height, width)


def cache_name(image: Image, inst_a: Instance, inst_b: Instance) -> str:
    """The cached file's name: the ids for people, and a digest of everything drawn (the
    photo's name, both geometries), so servers sharing a cache folder over different
    databases never serve each other's drawings of the same ids."""
    drawn = [
        image.coco_split,
        image.file_name,
        [inst_a.segmentation, inst_a.bbox],
        [inst_b.segmentation, inst_b.bbox],
    ]
    digest = hashlib.sha256(json.dumps(drawn, sort_keys=True, default=str).encode()).hexdigest()
    return (
        f"{image.coco_id}_{inst_a.coco_ann_id}_{inst_b.coco_ann_id}_{digest[:20]}"
        f"_v{RENDER_VERSION}.jpg"
    )


class _Pool:
    """The render pool of this process, made on first use and made again after a crash.
    Children are spawned, never forked: a fork of a threaded server copies locks held by
    other threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None

    def get(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    max_workers=POOL_WORKERS,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=end_with_parent,
                )
            return self._executor

    def discard(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is broken:
                self._executor = None
        broken.shutdown(wait=False, cancel_futures=True)


_POOL = _Pool()


def _draw_in_pool(source: Path, target: Path, inst_a: Instance, inst_b: Instance) -> None:
    geoms = ((inst_a.segmentation, inst_a.bbox), (inst_b.segmentation, inst_b.bbox))
    # Twice at most: a crash breaks every render in flight in the pool, so an innocent one
    # gets a second try in the new pool; the image that crashes it crashes that one too.
    for attempt in (1, 2):
        executor = _POOL.get()
        try:
            executor.submit(draw_marked, str(source), str(target), *geoms).result(
                timeout=RENDER_TIMEOUT
            )
            return
        except BrokenProcessPool:
            _POOL.discard(executor)
            log.error(
                "the image renderer crashed on instances %s/%s (attempt %d)",
                inst_a.id,
                inst_b.id,
                attempt,
            )
        except FutureTimeout:
            log.error(
                "the image renderer took over %.0f s on instances %s/%s",
                RENDER_TIMEOUT,
                inst_a.id,
                inst_b.id,
            )
            break
    raise PageError(
        500,
        "This image could not be drawn. Everything else works; please "
        "report the image to the study's researchers.",
    )


def render_marked(
    image_root: Path, cache_dir: Path, image: Image, inst_a: Instance, inst_b: Instance
) -> Path | None:
    """Path of a JPEG with A and B marked; rendered once and cached. None if no source file
    or the geometry is unusable; a PageError(500) if drawing it crashed the renderer."""
    target = cache_dir / cache_name(image, inst_a, inst_b)
    if target.is_file():
        return target
    source = find_source(image_root, image)
    if source is None:
        return None
    try:
        _draw_in_pool(source, target, inst_a, inst_b)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        # A geometry stored before `vsr sample` checked it: no image rather than a 500.
        log.warning("cannot draw instances %s/%s: %s", inst_a.id, inst_b.id, exc)
        return None
    return target


def svg_shapes(instance: Instance) -> list[str]:
    """SVG polygon point lists for an instance (a crowd RLE falls back to its box); [] for a
    geometry stored before ``vsr sample`` checked it, rather than a 500."""
    seg: Any = instance.segmentation
    try:
        if isinstance(seg, list) and seg:
            return [
                " ".join(
                    f"{float(seg_poly[i]):.1f},{float(seg_poly[i + 1]):.1f}"
                    for i in range(0, len(seg_poly) - 1, 2)
                )
                for seg_poly in seg
            ]
        x, y, w, h = (float(v) for v in instance.bbox)
    except (TypeError, ValueError):
        return []
    return [f"{x:.1f},{y:.1f} {x + w:.1f},{y:.1f} {x + w:.1f},{y + h:.1f} {x:.1f},{y + h:.1f}"]
