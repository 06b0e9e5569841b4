"""Read VSR-format JSONL records (the released raw, validated and split files) into one shape.

The release's files differ: the raw file stores vote lists as JSON lists, the validated and
split files as strings (``"[2, 10, 1]"``); the validated file adds ``reference_frame``; the
zero-shot split adds ``subj``/``obj`` (corrupted for four concepts, e.g. ``"orse"``, by a
``.lstrip("The ")``). Here subj and obj always come from the caption, parsed with the known
relation (``vsr_core.captions``); a disagreeing ``subj``/``obj`` field is counted, not trusted.

Any problem raises ``VsrFormatError`` naming the file and line, so an import can refuse the
whole file before it writes anything.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from vsr_core.captions import CaptionParseError, parse_caption
from vsr_core.relations import UnknownRelationError, get_relation

IMAGE_RE = re.compile(r"^(\d{1,12})\.jpg$")
LINK_RE = re.compile(r"/(train2017|val2017)/([^/]+)$")
REQUIRED = (
    "image",
    "image_link",
    "caption",
    "label",
    "relation",
    "annotator_id",
    "vote_true_validator_id",
    "vote_false_validator_id",
)


class VsrFormatError(ValueError):
    """A malformed record; the message names the file and line number."""


@dataclass(frozen=True)
class VsrRecord:
    line: int
    image: str  # COCO file name
    coco_id: int
    coco_split: str  # train2017 | val2017
    image_link: str
    caption: str
    label: bool
    relation: str
    subj: str
    obj: str
    annotator_id: int | None  # None: no caption writer (our adversarial negatives)
    true_ids: tuple[int, ...]
    false_ids: tuple[int, ...]
    reference_frame: str | None = None
    subj_obj_mismatch: bool = False

    @property
    def source_key(self) -> str:
        """Stable identity of the record across the release's files (and re-imports)."""
        raw = f"{self.image}\t{self.caption}\t{int(self.label)}\t{self.annotator_id}"
        return "vsr:" + hashlib.sha256(raw.encode()).hexdigest()[:40]

    def votes(self) -> list[tuple[str, bool]]:
        """(worker external id, value) per vote, True list first, in file order.

        The release repeats a validator id on one record 370 times (e.g. ``[1, 2, 22, 1]``;
        25 times on both sides). A Vote is unique per (Example, Worker), so the second
        occurrence of id 1 is stored as worker ``"1#2"`` (the third ``"1#3"``): every vote of
        the release is kept, the keep rule counts them as the release did, and the exporter
        writes ``1`` back. See docs/dataset.md.
        """
        seen: dict[int, int] = {}
        out = []
        for ids, value in ((self.true_ids, True), (self.false_ids, False)):
            for vid in ids:
                seen[vid] = seen.get(vid, 0) + 1
                out.append((repeat_worker_id(vid, seen[vid]), value))
        return out


def repeat_worker_id(vsr_id: int, occurrence: int) -> str:
    return str(vsr_id) if occurrence == 1 else f"{vsr_id}#{occurrence}"


def export_id_of(external_id: str) -> int | None:
    """The VSR integer id of an imported worker's external id ("17" or "17#2" -> 17)."""
    base = external_id.split("#", 1)[0]
    return int(base) if base.isdigit() else None


@dataclass
class FileSummary:
    path: str
    records: int = 0
    subj_obj_mismatches: int = 0
    extra: dict[str, int] = field(default_factory=dict)


def read_vsr_file(
    path: Path, progress: Callable[[int], None] | None = None
) -> tuple[list[VsrRecord], FileSummary]:
    """Parse every line of a VSR JSONL file; the first malformed line raises VsrFormatError."""
    records: list[VsrRecord] = []
    summary = FileSummary(str(path))
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise VsrFormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            rec = parse_record(raw, lineno, path)
            records.append(rec)
            summary.subj_obj_mismatches += rec.subj_obj_mismatch
            if progress and lineno % 1000 == 0:
                progress(1000)
    if progress:
        progress(len(records) % 1000)
    if not records:
        raise VsrFormatError(f"{path}: no records (an empty file is not a VSR release)")
    summary.records = len(records)
    return records, summary


def parse_record(raw: bytes | str, lineno: int, path: Path | str = "<input>") -> VsrRecord:
    def fail(msg: str) -> VsrFormatError:
        return VsrFormatError(f"{path}:{lineno}: {msg}")

    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise fail(f"not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise fail("expected a JSON object per line")
    missing = [k for k in REQUIRED if k not in obj]
    if missing:
        raise fail(f"missing field(s): {', '.join(missing)}")

    image = _str(obj["image"], "image", fail)
    m = IMAGE_RE.match(image)
    if not m:
        raise fail(f"image {image!r} is not a COCO file name like 000000239417.jpg")
    link = _str(obj["image_link"], "image_link", fail)
    lm = LINK_RE.search(link)
    if not lm or lm.group(2) != image:
        raise fail(f"image_link {link!r} is not a COCO train2017/val2017 link to {image}")

    label = obj["label"]
    if label not in (0, 1) or isinstance(label, float):
        raise fail(f"label must be 0 or 1, got {label!r}")

    relation_in = _str(obj["relation"], "relation", fail)
    try:
        relation = get_relation(relation_in, allow_import_only=True).name
    except UnknownRelationError as exc:
        raise fail(str(exc)) from None
    caption = _str(obj["caption"], "caption", fail)
    try:
        parsed = parse_caption(caption, relation)
    except CaptionParseError as exc:
        raise fail(str(exc)) from None

    mismatch = False
    for key, value in (("subj", parsed.subj), ("obj", parsed.obj)):
        if key in obj and obj[key] != value:
            mismatch = True  # e.g. the zero-shot split's "orse" for "horse": caption wins

    return VsrRecord(
        line=lineno,
        image=image,
        coco_id=int(m.group(1)),
        coco_split=lm.group(1),
        image_link=link,
        caption=caption,
        label=bool(label),
        relation=relation,
        subj=parsed.subj,
        obj=parsed.obj,
        annotator_id=(
            None if obj["annotator_id"] is None else _int(obj["annotator_id"], "annotator_id", fail)
        ),
        true_ids=_ids(obj["vote_true_validator_id"], "vote_true_validator_id", fail),
        false_ids=_ids(obj["vote_false_validator_id"], "vote_false_validator_id", fail),
        reference_frame=_frame(obj.get("reference_frame"), fail),
        subj_obj_mismatch=mismatch,
    )


def _str(value: Any, name: str, fail: Callable[[str], VsrFormatError]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise fail(f"{name} must be a non-empty string, got {value!r}")
    return value


def _int(value: Any, name: str, fail: Callable[[str], VsrFormatError]) -> int:
    if isinstance(value, bool):
        raise fail(f"{name} must be an integer id, got {value!r}")
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise fail(f"{name} must be an integer id, got {value!r}")


def _ids(value: Any, name: str, fail: Callable[[str], VsrFormatError]) -> tuple[int, ...]:
    if isinstance(value, str):  # the validated and split files store the list as a string
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise fail(f"{name} is not a list of ids: {value!r}") from None
    if not isinstance(value, list):
        raise fail(f"{name} must be a list of validator ids, got {value!r}")
    return tuple(_int(v, name, fail) for v in value)


def _frame(value: Any, fail: Callable[[str], VsrFormatError]) -> str | None:
    """VSR's reference_frame is null or 0.0/1.0/2.0 (meaning undocumented); kept as text."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise fail(f"reference_frame must be a number, a string or null, got {value!r}")
    if isinstance(value, int | float):
        return str(int(value)) if float(value).is_integer() else str(value)
    if isinstance(value, str) and 0 < len(value) <= 16:
        return value
    raise fail(f"reference_frame must be a number, a short string or null, got {value!r}")
