"""Load COCO instance files (train2017 + val2017 together) into a lean index for sampling.

Why not ``pycocotools.coco.COCO`` for loading: it keeps the whole parsed JSON plus its
indexes alive, several times the file size for train2017 (448 MB on disk), which breaks our
memory target (peak <= 3x the file size, see bench/sample.py). The VSR rule only needs, per
(image, category), how many instances there are and, when there is exactly one, that one
instance. So we parse with the standard ``json`` module and an ``object_hook`` that counts
every annotation as it is parsed and keeps only the possible candidates (not crowd, area >=
min_area); every other annotation, with its polygon lists, is freed at once. pycocotools is
still used where it is the right tool: decoding RLE masks and computing missing areas (see
``collection.geometry``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collection.errors import CocoFileError
from collection.validate import (
    check_area,
    check_bbox,
    check_file_name,
    check_id,
    check_segmentation,
    check_size,
    check_text,
    check_web_url,
)
from vsr_core.defaults import MIN_AREA_PX
from vsr_core.tables import IMAGE, INSTANCE

# (stage, done, total or None): how the CLI (tqdm) and the dashboard (Job.progress) follow us.
ProgressFn = Callable[[str, int, int | None], None]

_SPLIT_RE = re.compile(r"(train|val|test)20\d\d")
_PROGRESS_EVERY = 50_000  # annotations between progress callbacks: cheap enough, smooth enough


@dataclass(frozen=True, slots=True)
class CocoImage:
    id: int
    file_name: str
    split: str
    width: int
    height: int
    coco_url: str | None
    flickr_url: str | None
    license_id: int | None


@dataclass(frozen=True, slots=True)
class CocoInstance:
    """The single instance of one category in one image (a candidate for a pair)."""

    id: int
    image_id: int
    category_id: int
    area: float
    bbox: list[float]
    segmentation: Any
    iscrowd: bool = False


@dataclass
class CocoIndex:
    """What the sampler needs from one or more COCO files, for one ``min_area``.

    ``eligible[image_id][category_id]`` is the instance when the image holds exactly one
    instance of that category (a crowd region counts as more than one) and its area is at
    least ``min_area``. Only images with an eligible instance are kept in ``images``.
    """

    min_area: float
    files: list[Path] = field(default_factory=list)
    categories: dict[int, str] = field(default_factory=dict)
    supercategories: dict[int, str] = field(default_factory=dict)
    min_area_share: float = 0.0  # of the image's width x height, on top of min_area
    licenses: dict[int, str] = field(default_factory=dict)
    images: dict[int, CocoImage] = field(default_factory=dict)
    eligible: dict[int, dict[int, CocoInstance]] = field(default_factory=dict)
    n_images: int = 0
    n_annotations: int = 0
    # LVIS is federated: an image that holds exactly one annotated instance of a category
    # whose annotation is marked not exhaustive for it may hold more; such images are set
    # aside for that category (counted once per image).
    lvis_set_aside: int = 0
    # every image id seen so far, to refuse files whose images overlap (double counting)
    seen_image_ids: set[int] = field(default_factory=set, repr=False)

    @property
    def category_ids(self) -> dict[str, int]:
        return {name: cid for cid, name in self.categories.items()}


class _FileState:
    """Per-file accumulators filled by the json object_hook while the file is parsed."""

    def __init__(self, min_area: float, progress: ProgressFn | None, done_before: int) -> None:
        self.min_area = min_area
        self.counts: dict[tuple[Any, Any], int] = {}
        self.candidates: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.n_annotations = 0
        self.progress = progress
        self.done_before = done_before

    def hook(self, d: dict[str, Any]) -> Any:
        # Called by the C parser for every JSON object, innermost first. Annotations are
        # consumed here (we return None so the parser drops them); everything else is kept.
        if "category_id" not in d or "image_id" not in d:
            return d
        self.n_annotations += 1
        if self.progress is not None and self.n_annotations % _PROGRESS_EVERY == 0:
            self.progress("load", self.done_before + self.n_annotations, None)
        key = (d["image_id"], d["category_id"])
        counts = self.counts
        seen = counts.get(key, 0)
        if d.get("iscrowd"):
            counts[key] = seen + 2  # a crowd region stands for several instances
            self.candidates.pop(key, None)
            return None
        counts[key] = seen + 1
        if seen:
            self.candidates.pop(key, None)
            return None
        area = d.get("area")
        if area is None or area >= self.min_area:  # a missing area is computed later
            self.candidates[key] = d
        return None


def _split_of(image: dict[str, Any], path: Path) -> str:
    for text in (image.get("coco_url") or "", path.name):
        m = _SPLIT_RE.search(str(text))
        if m:
            return m.group(0)
    return "unknown"


def _read_json(path: Path, state: _FileState) -> Any:
    if not path.exists():
        raise CocoFileError(f"COCO file not found: {path}")
    if not path.is_file():
        raise CocoFileError(f"not a file: {path}")
    try:
        with path.open("r", encoding="utf-8") as fh:
            return json.load(fh, object_hook=state.hook)
    except json.JSONDecodeError as exc:
        raise CocoFileError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except UnicodeDecodeError:
        raise CocoFileError(f"{path} is not a UTF-8 JSON file") from None
    except (TypeError, KeyError, ValueError) as exc:
        raise CocoFileError(
            f"{path} is not a COCO instances file (bad annotation: {exc})"
        ) from None
    except OSError as exc:
        raise CocoFileError(f"cannot read {path}: {exc.strerror or exc}") from None


def _int(value: Any, what: str, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CocoFileError(f"{path} is not a COCO instances file ({what} is {value!r})")
    return value


def _load_one(path: Path, index: CocoIndex, progress: ProgressFn | None) -> None:
    state = _FileState(index.min_area, progress, index.n_annotations)
    data = _read_json(path, state)
    _check_shape(data, path)
    _add_categories(data["categories"], index, path)
    for lic in data.get("licenses") or []:
        if isinstance(lic, dict) and isinstance(lic.get("id"), int):
            index.licenses[lic["id"]] = str(lic.get("name") or "")
    raw_images = _image_rows(data["images"], index, path)
    index.seen_image_ids.update(raw_images)
    index.n_images += len(raw_images)
    index.n_annotations += state.n_annotations
    del data

    set_aside: set[int] = set()
    for key, ann in state.candidates.items():
        if state.counts[key] != 1:
            continue
        image_id, category_id = key
        if category_id in _not_exhaustive(raw_images.get(image_id), path):
            set_aside.add(image_id)
            continue
        _add_candidate(ann, image_id, category_id, raw_images, index, path)
    index.lvis_set_aside += len(set_aside)


def _check_shape(data: Any, path: Path) -> None:
    """The three lists of a COCO instances file, every annotation consumed by the hook."""
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), list) for k in ("images", "annotations", "categories")
    ):
        raise CocoFileError(
            f"{path} is not a COCO instances file (needs 'images', 'annotations' and "
            "'categories' lists)"
        )
    if any(a is not None for a in data["annotations"]):
        raise CocoFileError(
            f"{path} is not a COCO instances file (an annotation lacks image_id or category_id)"
        )


def _add_categories(categories: list[Any], index: CocoIndex, path: Path) -> None:
    """Category ids and names (the same id must name the same category in every file)."""
    for cat in categories:
        if not isinstance(cat, dict) or not isinstance(cat.get("name"), str):
            raise CocoFileError(f"{path} is not a COCO instances file (bad category {cat!r})")
        cid = check_id(_int(cat.get("id"), "a category id", path), "category id", path)
        check_text(cat["name"], "name", f"category {cid}", INSTANCE.c.category, path)
        known = index.categories.get(cid)
        if known is not None and known != cat["name"]:
            raise CocoFileError(
                f"{path}: category {cid} is '{cat['name']}' here but '{known}' in another file"
            )
        index.categories[cid] = cat["name"]
        if isinstance(cat.get("supercategory"), str):
            index.supercategories[cid] = cat["supercategory"]


def _image_rows(images: list[Any], index: CocoIndex, path: Path) -> dict[int, dict[str, Any]]:
    """The file's images by id; an id twice, or in another file given, is refused."""
    raw_images: dict[int, dict[str, Any]] = {}
    for img in images:
        if not isinstance(img, dict):
            raise CocoFileError(f"{path} is not a COCO instances file (bad image {img!r})")
        iid = _int(img.get("id"), "an image id", path)
        if iid in raw_images:
            raise CocoFileError(f"{path}: image id {iid} appears twice")
        if iid in index.seen_image_ids:
            raise CocoFileError(f"{path}: image id {iid} is also in another file given")
        raw_images[iid] = img
    return raw_images


def _add_candidate(
    ann: dict[str, Any],
    image_id: Any,
    category_id: Any,
    raw_images: dict[int, dict[str, Any]],
    index: CocoIndex,
    path: Path,
) -> None:
    """Index the single instance of its category in its image if it is large enough; what
    the site later draws and serves is refused here, with the id, if unusable."""
    from collection.geometry import area_from_segmentation

    ann_id = check_id(_int(ann.get("id"), "an annotation id", path), "annotation id", path)
    img = raw_images.get(image_id)
    if img is None:
        raise CocoFileError(
            f"{path}: annotation {ann_id} refers to image {image_id}, which is not in the file"
        )
    if category_id not in index.categories:
        raise CocoFileError(
            f"{path}: annotation {ann_id} has category_id {category_id}, which is not in "
            "the categories"
        )
    width = _int(img.get("width"), f"the width of image {image_id}", path)
    height = _int(img.get("height"), f"the height of image {image_id}", path)
    check_size(width, height, image_id, path)
    bbox = check_bbox(ann.get("bbox"), ann_id, width, height, path)
    seg = check_segmentation(ann.get("segmentation"), ann_id, width, height, path)
    area_raw = ann.get("area")
    if area_raw is None:
        area = area_from_segmentation(seg, bbox, width, height)
    else:
        area = check_area(area_raw, ann_id, width, height, path)
    if area < index.min_area or area < index.min_area_share * width * height:
        return
    if image_id not in index.images:
        index.images[image_id] = _coco_image(img, image_id, width, height, path)
    index.eligible.setdefault(image_id, {})[category_id] = CocoInstance(
        id=ann_id,
        image_id=image_id,
        category_id=category_id,
        area=area,
        bbox=bbox,
        segmentation=seg,
    )


def _coco_image(
    img: dict[str, Any], image_id: int, width: int, height: int, path: Path
) -> CocoImage:
    check_id(image_id, "image id", path)
    file_name = img.get("file_name") or f"{image_id:012d}.jpg"
    for url_field in ("coco_url", "flickr_url"):
        if img.get(url_field) is not None:
            check_web_url(img[url_field], url_field, image_id, path)
            check_text(img[url_field], url_field, f"image {image_id}", IMAGE.c[url_field], path)
    return CocoImage(
        id=image_id,
        file_name=check_file_name(file_name, image_id, path),
        split=_split_of(img, path),
        width=width,
        height=height,
        coco_url=img.get("coco_url"),
        flickr_url=img.get("flickr_url"),
        license_id=img.get("license") if isinstance(img.get("license"), int) else None,
    )


def _not_exhaustive(img: dict[str, Any] | None, path: Path) -> frozenset[int]:
    """LVIS's ``not_exhaustive_category_ids`` of an image (empty for plain COCO files).

    Having an annotation puts a category in the image's positive set; only where it is
    also exhaustively annotated does one annotation mean exactly one instance.
    """
    ids = (img or {}).get("not_exhaustive_category_ids")
    if ids is None:
        return frozenset()
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise CocoFileError(
            f"{path}: image {(img or {}).get('id')} has a bad not_exhaustive_category_ids"
        )
    return frozenset(ids)


def load_coco(
    paths: Sequence[str | Path] | Iterable[str | Path],
    min_area: float = MIN_AREA_PX,
    progress: ProgressFn | None = None,
    min_area_share: float = 0.0,
) -> CocoIndex:
    """Load and index one or more COCO instance files (their image ids must not overlap)."""
    files = [Path(p) for p in paths]
    if not files:
        raise CocoFileError("no COCO file given")
    resolved = [f.resolve() for f in files]
    if len(set(resolved)) != len(resolved):
        raise CocoFileError("the same COCO file is given twice")
    index = CocoIndex(min_area=float(min_area), files=files, min_area_share=float(min_area_share))
    for path in files:
        _load_one(path, index, progress)
        if progress is not None:
            progress("load", index.n_annotations, None)
    return index
