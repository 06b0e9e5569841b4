"""A VSR release's own splits: read from its split files on import, written back on export.

The release ships ``splits/random/{train,dev,test}.jsonl`` and
``splits/zeroshot/{train,dev,test}.jsonl`` beside its raw and validated files. Importing
such a file records, per Example, which part of which scheme the release put it in (table
``releasesplit``); ``build-dataset --vsr-compatible`` then writes those parts instead of
drawing its own, so scores on the export compare with published VSR numbers. A scheme with
no imported split file is drawn as usual (seed, unit), and the card says which (see
docs/dataset.md, "The release's own splits").

The release's zero-shot split is written as it is, also where it breaks its own promise
(concepts in two parts, from its ``.lstrip("The ")`` corruption of ``subj``): the check
that our own zero-shot split runs would refuse it, so the shared concepts are counted and
the card names them instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from vsr_core.models import ReleaseScheme, SplitPart
from vsr_core.tables import EXAMPLE, RELEASE_SPLIT
from vsr_dataset.splits import PARTS, SplitItem, ZeroShotSplit
from vsr_dataset.vsr_format import VsrFormatError

CHUNK = 500  # ids per IN (...) list: far below SQLite's parameter limit


def split_of_path(path: Path) -> tuple[ReleaseScheme, SplitPart] | None:
    """(scheme, part) of a release split file (``.../random/dev.jsonl``), else None."""
    try:
        return ReleaseScheme(path.parent.name), SplitPart(path.stem)
    except ValueError:
        return None


def record_split(
    conn: Connection,
    example_ids: Sequence[int],
    lines: Sequence[int],
    scheme: ReleaseScheme,
    part: SplitPart,
    path: str,
) -> int:
    """Put these Examples (one per record, ``lines`` their line numbers) in ``part`` of
    ``scheme``; returns how many were new. An Example an earlier import put in another part
    of the same scheme fails the file (two releases disagree: neither is kept silently)."""
    have: dict[int, str] = {}
    unique = sorted(set(example_ids))
    for i in range(0, len(unique), CHUNK):
        for eid, got in conn.execute(
            select(RELEASE_SPLIT.c.example_id, RELEASE_SPLIT.c.part).where(
                RELEASE_SPLIT.c.scheme == scheme.value,
                RELEASE_SPLIT.c.example_id.in_(unique[i : i + CHUNK]),
            )
        ):
            have[int(eid)] = str(got)
    new: dict[int, None] = {}
    for eid, line in zip(example_ids, lines, strict=True):
        got = have.get(eid)
        if got is not None and got != part.value:
            raise VsrFormatError(
                f"{path}:{line}: this record is already in {scheme.value}/{got} (imported "
                f"before), not {scheme.value}/{part.value}"
            )
        if got is None:
            new[eid] = None
    if new:
        conn.execute(
            insert(RELEASE_SPLIT),
            [{"example_id": e, "scheme": scheme.value, "part": part.value} for e in new],
        )
    return len(new)


@dataclass(frozen=True)
class ReleaseSplits:
    """The release's parts of the Examples an export splits (kept, written by people)."""

    random: dict[str, list[int]] | None = None  # None: no random split file was imported
    zeroshot: ZeroShotSplit | None = None
    # Per scheme: kept Examples the release's files put in no part (written in no split file).
    unassigned: dict[str, int] = field(default_factory=dict)
    # Per scheme: Examples the release put in a part that this export does not keep.
    not_kept: dict[str, int] = field(default_factory=dict)
    # Concepts the release's zero-shot parts share: concept -> the parts it is in.
    shared_concepts: dict[str, list[str]] = field(default_factory=dict)

    def facts(self) -> dict[str, Any]:
        """stats.json's ``release_splits``: which schemes are the release's, and their gaps."""
        return {
            "schemes": [s.value for s in ReleaseScheme if self.parts(s) is not None],
            "unassigned": dict(sorted(self.unassigned.items())),
            "not_kept": dict(sorted(self.not_kept.items())),
            "zeroshot_shared_concepts": dict(sorted(self.shared_concepts.items())),
        }

    def parts(self, scheme: ReleaseScheme) -> dict[str, list[int]] | None:
        if scheme is ReleaseScheme.random:
            return self.random
        return self.zeroshot.parts if self.zeroshot is not None else None


def load_release_splits(
    conn: Connection, study_id: int, items: Sequence[SplitItem]
) -> ReleaseSplits:
    """The release's parts of ``items`` (the export's binary Examples), per scheme that has
    any imported split file in this study."""
    rows = conn.execute(
        select(RELEASE_SPLIT.c.example_id, RELEASE_SPLIT.c.scheme, RELEASE_SPLIT.c.part)
        .join(EXAMPLE, EXAMPLE.c.id == RELEASE_SPLIT.c.example_id)
        .where(EXAMPLE.c.study_id == study_id)
    ).all()
    assigned: dict[str, dict[int, str]] = {}
    for eid, scheme, part in rows:
        assigned.setdefault(str(scheme), {})[int(eid)] = str(part)
    keys = {it.key for it in items}
    parts_of: dict[str, dict[str, list[int]]] = {}
    unassigned: dict[str, int] = {}
    not_kept: dict[str, int] = {}
    for scheme, where in assigned.items():
        parts: dict[str, list[int]] = {p: [] for p in PARTS}
        for eid, part in where.items():
            if eid in keys:
                parts[part].append(eid)
        for keys_of in parts.values():
            keys_of.sort()
        parts_of[scheme] = parts
        unassigned[scheme] = sum(1 for k in keys if k not in where)
        not_kept[scheme] = sum(1 for eid in where if eid not in keys)
    zeroshot: ZeroShotSplit | None = None
    shared: dict[str, list[str]] = {}
    if ReleaseScheme.zeroshot.value in parts_of:
        zeroshot, shared = _zeroshot(items, parts_of[ReleaseScheme.zeroshot.value])
    return ReleaseSplits(
        random=parts_of.get(ReleaseScheme.random.value),
        zeroshot=zeroshot,
        unassigned=unassigned,
        not_kept=not_kept,
        shared_concepts=shared,
    )


def _zeroshot(
    items: Iterable[SplitItem], parts: Mapping[str, list[int]]
) -> tuple[ZeroShotSplit, dict[str, list[str]]]:
    """The release's zero-shot parts with each part's concepts, and the concepts in more
    than one part (the release's own leaks)."""
    by_key = {it.key: it for it in items}
    concepts: dict[str, set[str]] = {p: set() for p in PARTS}
    for part, keys in parts.items():
        for k in keys:
            concepts[part].update((by_key[k].subj, by_key[k].obj))
    where: dict[str, list[str]] = {}
    for part in PARTS:
        for c in concepts[part]:
            where.setdefault(c, []).append(part)
    shared = {c: ps for c, ps in sorted(where.items()) if len(ps) > 1}
    excluded = len(by_key) - sum(len(keys) for keys in parts.values())
    split = ZeroShotSplit(
        {p: list(parts[p]) for p in PARTS},
        {p: sorted(concepts[p]) for p in PARTS},
        excluded,
    )
    return split, shared


def split_source(
    release: ReleaseSplits,
    *,
    vsr_compatible: bool,
    seed: int,
    unit: str,
    random_ratios: Sequence[Fraction],
    zeroshot_ratios: Sequence[Fraction],
) -> dict[str, Any]:
    """stats.json's ``split_source``: per scheme, the release's parts or drawn (and how)."""

    def ratios(rs: Sequence[Fraction]) -> str:
        return "/".join(str(round(100 * r)) for r in rs)

    out: dict[str, Any] = {"vsr_compatible": vsr_compatible}
    for scheme in ReleaseScheme:
        if release.parts(scheme) is not None:
            out[scheme.value] = {"source": "release"}
        elif scheme is ReleaseScheme.random:
            out[scheme.value] = {
                "source": "drawn",
                "seed": seed,
                "unit": unit,
                "ratios": ratios(random_ratios),
            }
        else:
            out[scheme.value] = {
                "source": "drawn",
                "seed": seed,
                "unit": "concept",
                "ratios": ratios(zeroshot_ratios),
            }
    out["release"] = release.facts()
    return out


def known_frames(conn: Connection, study_id: int, keys: Iterable[int]) -> int:
    """How many of these Examples have a ``reference_frame`` (the release gives one only
    on some left/right records of its validated file)."""
    known = {
        int(eid)
        for (eid,) in conn.execute(
            select(EXAMPLE.c.id).where(
                EXAMPLE.c.study_id == study_id, EXAMPLE.c.reference_frame.is_not(None)
            )
        )
    }
    return sum(1 for k in keys if k in known)


def card_lines(s: Mapping[str, Any]) -> dict[str, str]:
    """The card's words on where the splits come from (stats.json's ``split_source``):
    ``random``/``zeroshot`` replace the drawn split's line when the release's parts were
    written; ``note`` says when a --vsr-compatible export's splits are not the release's;
    ``frames`` explains ``reference_frame``'s nulls."""
    src = s.get("split_source") or {}
    splits = s.get("splits") or {}
    release = src.get("release") or {}
    out: dict[str, str] = {}
    sizes = splits.get("random") or {}
    if (src.get("random") or {}).get("source") == "release":
        out["random"] = (
            "- `random/`: **the VSR release's own random split** (its `splits/random/*.jsonl`, "
            f"imported with `vsr import-vsr`): train {sizes.get('train', 0):,} / dev "
            f"{sizes.get('dev', 0):,} / test {sizes.get('test', 0):,}, each file the same "
            "records as the release's file of that name (the same set of (image, caption, "
            "label), with the same relation, annotator, votes and `reference_frame`), in "
            "Example order. It is made per Example, so the True and False halves of one "
            "caption may sit in different parts: the other half's label in train answers many "
            "test items without the image (the pair-opposite rule in the blind baselines"
            + _pair_opposite(s)
            + ")."
            + _gaps(release, "random")
        )
    z = splits.get("zeroshot") or {}
    if (src.get("zeroshot") or {}).get("source") == "release":
        shared = release.get("zeroshot_shared_concepts") or {}
        leak = (
            " The release's parts share "
            + ", ".join(f"`{c}` ({' and '.join(ps)})" for c, ps in shared.items())
            + ': its `subj` field lost its first letters to a `.lstrip("The ")` (`orse`, '
            "`andbag`), so those concepts were not kept apart; the parts are written as the "
            "release has them, not repaired, and `subj`/`obj` here come from the caption."
            if shared
            else ""
        )
        out["zeroshot"] = (
            "- `zeroshot/`: **the VSR release's own zero-shot split** (its "
            f"`splits/zeroshot/*.jsonl`): train {z.get('train', 0):,} / dev {z.get('dev', 0):,}"
            f" / test {z.get('test', 0):,}, the same records as the release's files; "
            f"{splits.get('zeroshot_excluded', 0):,} validated Examples are in none of them."
            + leak
            + _gaps(release, "zeroshot", unassigned=False)
        )
    drawn = [
        scheme
        for scheme in ("random", "zeroshot")
        if (src.get(scheme) or {}).get("source") == "drawn" and scheme in splits
    ]
    if src.get("vsr_compatible") and drawn:
        how = []
        for scheme in drawn:
            d = src[scheme]
            unit = {
                "concept": "concepts partitioned",
                "example": "per Example",
            }.get(d["unit"], "per annotation (both halves together)")
            how.append(f"`{scheme}/` {d['ratios']}, seed {d['seed']}, {unit}")
        out["note"] = (
            "**Re-drawn, not the release's splits.** No split file of the VSR release was "
            f"imported for {' and '.join(f'`{x}/`' for x in drawn)}, so "
            f"{'they are' if len(drawn) > 1 else 'it is'} drawn here ({'; '.join(how)}): "
            "the types are the release's, the parts are not, and results on them are **not "
            "comparable with published VSR numbers**. Import the release folder with its "
            "`splits/` (`vsr import-vsr DIR`) to write the release's own parts."
        )
    frames = s.get("reference_frame_known")
    if frames is not None:
        out["frames"] = (
            f"`reference_frame` is known for {frames['known']:,} of the "
            f"{frames['validated']:,} validated Examples and null for the rest. The VSR "
            "release gives it only in its validated file and only on some left/right records "
            "(0, 1 or 2; the release does not say what the codes mean); importing the raw "
            "file alone leaves it null everywhere. For captions written here it is the frame "
            "the writer chose, when the task asked."
        )
    return out


def _pair_opposite(s: Mapping[str, Any]) -> str:
    """The pair-opposite baseline on random/test, as the leak audit measured it."""
    test = ((s.get("blind_baselines") or {}).get("random") or {}).get("test") or {}
    f = (test.get("baselines") or {}).get("pair_opposite")
    if not f:
        return ""
    lo, hi = f["ci95"]
    return f": {f['accuracy']:.3f}, 95 % CI {lo:.3f}-{hi:.3f}, on `random/test`"


def _gaps(release: Mapping[str, Any], scheme: str, *, unassigned: bool = True) -> str:
    """What the release's parts lack or hold beyond this export's validated set."""
    out = ""
    n_un = (release.get("unassigned") or {}).get(scheme, 0)
    n_not = (release.get("not_kept") or {}).get(scheme, 0)
    if unassigned and n_un:
        out += f" {n_un:,} validated Examples are in none of its files (not written here)."
    if n_not:
        out += f" {n_not:,} Examples the release put in a part are not kept here (left out)."
    return out
