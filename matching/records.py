"""Plain in-memory records that matching works on, loaders for them, and the split rule.

Matching is a library over these records so it runs the same on rows from the database
(``matching.store``) and on the released VSR file (``load_vsr_jsonl``: votes are strings there).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vsr_core.agreement import DEFAULT_THRESHOLD, Threshold, is_kept
from vsr_core.captions import parse_caption

Triple = tuple[str, str, str]
SPLITS: tuple[str, ...] = ("train", "dev", "test")
DEFAULT_RATIOS: tuple[float, float, float] = (0.7, 0.1, 0.2)


@dataclass(frozen=True)
class Record:
    """One Example with what matching needs: who it is, where, what it says, how it was judged."""

    id: int
    image: str  # the image's key (COCO file name); Examples of one image share it
    subj: str
    relation: str
    obj: str
    caption: str
    label: bool
    votes: tuple[bool, ...] = ()
    image_id: int | None = None  # database id of the Image row, when loaded from the DB
    origin: str = "human"  # adversarial negatives are never queries (see kept_true)
    # Decided apart from its votes (vsr_core.kept): True kept / False not, by an adjudication
    # or the study's label-model keep rule; None: by the votes and the threshold.
    settled: bool | None = None

    @property
    def triple(self) -> Triple:
        return (self.subj, self.relation, self.obj)

    def kept(self, threshold: Threshold = DEFAULT_THRESHOLD) -> bool:
        """The study's keep rule (vsr_core.kept): an adjudication or a label model when one
        decided it, else VSR's: enough validators agree with the label."""
        if self.settled is not None:
            return self.settled
        return is_kept(self.label, list(self.votes), threshold)


def kept_true(records: Iterable[Record], threshold: Threshold = DEFAULT_THRESHOLD) -> list[Record]:
    """The queries of matching: kept Examples whose caption is True for their image
    (adversarial negatives excluded: their captions were distractors, not annotations)."""
    return [r for r in records if r.label and r.kept(threshold) and r.origin != "adversarial"]


def confirmed_true(
    records: Iterable[Record], threshold: Threshold = DEFAULT_THRESHOLD
) -> list[Record]:
    """Captions validators confirmed as true for their image: whatever its writer's label
    (or origin: human, imported, adversarial negative), a caption that validators voted True
    by the keep rule is true for that image. The release holds 1,142 captions labelled False
    that validators voted True (docs/matching.md); such a caption is no distractor for its image."""
    return [
        r
        for r in records
        if (r.label and r.kept(threshold)) or is_kept(True, list(r.votes), threshold)
    ]


def split_of(group_key: str, seed: int = 0, ratios: Sequence[float] = DEFAULT_RATIOS) -> str:
    """The split ("train" / "dev" / "test") of a group, as a pure function of key and seed.

    Keyed by the image by default (``assign_splits``), so all Examples of one image land in
    the same split and nothing about an image leaks from train into test. A stable hash
    (sha256, not Python's salted ``hash``) makes it the same in every process, so the
    exporter and matching agree without sharing state.
    """
    if len(ratios) != 3 or any(r < 0 for r in ratios) or sum(ratios) <= 0:
        raise ValueError(f"split ratios must be three non-negative numbers, got {ratios!r}")
    digest = hashlib.sha256(f"{seed}:{group_key}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    total = sum(ratios)
    edge = 0.0
    for name, ratio in zip(SPLITS, ratios, strict=True):
        edge += ratio / total
        if u < edge:
            return name
    return SPLITS[-1]


def assign_splits(
    records: Iterable[Record], seed: int = 0, ratios: Sequence[float] = DEFAULT_RATIOS
) -> dict[int, str]:
    """Record id -> split, grouping by image (see ``split_of``)."""
    return {r.id: split_of(r.image, seed, ratios) for r in records}


def _votes(value: object) -> list[int]:
    # The validated VSR file stores the vote lists as strings such as "[2, 10, 1]".
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, list):
        raise ValueError(f"vote list expected, got {value!r}")
    return [int(v) for v in value]


def load_vsr_jsonl(path: str | Path) -> list[Record]:
    """Records from a released VSR JSONL file (raw or validated); ids are line numbers."""
    out: list[Record] = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            parsed = parse_caption(row["caption"], row["relation"])
            n_true = len(_votes(row["vote_true_validator_id"]))
            n_false = len(_votes(row["vote_false_validator_id"]))
            out.append(
                Record(
                    id=lineno,
                    image=row["image"],
                    subj=parsed.subj,
                    relation=parsed.relation,
                    obj=parsed.obj,
                    caption=row["caption"],
                    label=bool(row["label"]),
                    votes=(True,) * n_true + (False,) * n_false,
                )
            )
    return out


def stratified_sample(records: Sequence[Record], per_relation: int, seed: int = 0) -> list[Record]:
    """At most ``per_relation`` records of each relation (whole images at a time are not
    kept together: callers split afterwards). Deterministic for a seed."""
    by_rel: dict[str, list[Record]] = {}
    for r in records:
        by_rel.setdefault(r.relation, []).append(r)
    out: list[Record] = []
    for rel in sorted(by_rel):
        group = sorted(
            by_rel[rel], key=lambda r: hashlib.sha256(f"{seed}:{r.id}".encode()).digest()
        )
        out += group[:per_relation]
    return sorted(out, key=lambda r: r.id)


def split_mapping(
    records: Iterable[Record], splits: Mapping[int, str] | None, seed: int
) -> dict[int, str]:
    """The given split mapping, or the default image-keyed one; unknown split names fail."""
    mapping = dict(splits) if splits is not None else assign_splits(records, seed)
    bad = {s for s in mapping.values() if s not in SPLITS}
    if bad:
        raise ValueError(f"unknown split name(s) {sorted(bad)}: use {', '.join(SPLITS)}")
    return mapping
