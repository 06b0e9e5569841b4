# mypy: disable-error-code="union-attr"
"""Checking an export's files against the data dictionary (vsr_dataset/dictionary.py): every
key of every record has an entry, every value its entry's type, every field the dictionary
promises in every record is there."""

from __future__ import annotations

import csv
import json
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from vsr_dataset.dictionary import COMPAT_VOTES, NOT_DATA, FieldDoc, FileDoc, doc_of


def _matches(value: Any, kind: Any) -> bool:
    """Whether a JSON value has the dictionary's type (nulls inside structs and lists are
    the Hub's missing values)."""
    if kind == "json":
        return True
    if kind == "object":
        return isinstance(value, dict)
    if kind == "string":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int64":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float64", "number"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(kind, tuple):
        return isinstance(value, list) and all(v is None or _matches(v, kind[1]) for v in value)
    if isinstance(kind, dict):
        return (
            isinstance(value, dict)
            and set(value) == set(kind)
            and all(v is None or _matches(v, kind[k]) for k, v in value.items())
        )
    raise AssertionError(f"unknown kind {kind!r}")


def _kind(f: FieldDoc, rel: str, vsr_compatible: bool) -> Any:
    if vsr_compatible and f.compat is not None:
        if f.compat == COMPAT_VOTES and rel == "all_raw.jsonl":
            return f.kind  # the release's raw file has arrays
        return f.compat
    return f.kind


def _cell(text: str, kind: Any) -> Any:
    """A CSV cell as the value its column's type says (None: empty)."""
    if text == "":
        return None
    if kind == "int64":
        return int(text) if text.lstrip("-").isdigit() else text
    if kind == "number":
        try:
            return float(text)
        except ValueError:
            return text
    return text


def _records(path: Path, rel: str, doc: FileDoc) -> list[dict[str, Any]]:
    if rel.endswith(".jsonl"):
        return [json.loads(line) for line in path.read_text().splitlines()]
    if rel.endswith(".json"):
        return [json.loads(path.read_text())]
    with path.open(newline="") as fh:
        return [
            {k: _cell(v, doc.field(k).kind if doc.field(k) else "string") for k, v in row.items()}
            for row in csv.DictReader(fh)
        ]


def check_export(out: Path, *, vsr_compatible: bool = False) -> list[str]:
    """Every data file of ``out`` against the dictionary; returns the files checked."""
    checked = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = str(path.relative_to(out))
        if any(fnmatch(rel, pattern) for pattern in NOT_DATA):
            continue
        doc = doc_of(rel)
        assert doc is not None, f"{rel} has no entry in the data dictionary"
        records = _records(path, rel, doc)
        for i, rec in enumerate(records):
            for key, value in rec.items():
                f = doc.field(key)
                assert f is not None, f"{rel}:{i + 1}: field {key!r} is not in the dictionary"
                kind = _kind(f, rel, vsr_compatible)
                assert (value is None and f.nullable) or _matches(value, kind), (
                    f"{rel}:{i + 1}: {key} = {value!r} is not {kind}"
                    + ("" if f.nullable else " (not nullable)")
                )
            missing = [f.name for f in doc.all_fields if f.only is None and f.name not in rec]
            assert not missing, f"{rel}:{i + 1}: no {missing} (the dictionary says every record)"
        checked.append(rel)
    return checked
