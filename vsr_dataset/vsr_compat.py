"""``--vsr-compatible``: each file with the VSR release's exact types.

By default the export is Hub-native: one type per field in every file (vote lists are JSON
arrays of ints, ``reference_frame`` is text or null), so ``datasets`` and pandas read every
part alike. The release itself differs from file to file, and code written for it (``json.loads``
of a vote list) breaks on arrays; this mode writes what the release writes:

- ``all_raw.jsonl``: vote lists as arrays;
- ``all_validated.jsonl``, ``random/``, ``zeroshot/``: vote lists as strings (``"[2, 10, 1]"``);
- ``reference_frame``: VSR's numeric codes as numbers (``1.0``), present (null when unknown)
  on every record, also when only the raw file was imported.

Fields the release does not have stay as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

VOTE_FIELDS = ("vote_true_validator_id", "vote_false_validator_id")


def frame_number(frame: Any) -> Any:
    """VSR writes reference_frame as a number (0.0/1.0/2.0); our own values are words."""
    if not isinstance(frame, str):
        return frame
    try:
        return float(frame)
    except ValueError:
        return frame


def compatible(records: Iterable[dict[str, Any]], *, raw: bool) -> Iterator[dict[str, Any]]:
    """The records with the release's types for a raw file (``raw``) or a split file."""
    for rec in records:
        yield compatible_record(rec, raw=raw)


def compatible_record(rec: dict[str, Any], *, raw: bool) -> dict[str, Any]:
    out = dict(rec)
    out["reference_frame"] = frame_number(rec.get("reference_frame"))
    if not raw:
        for name in VOTE_FIELDS:
            out[name] = str(list(rec[name]))
    return out
