"""The Hub-native layout: one ``configs`` entry per part of the export, with its files and
features, for the card's YAML front matter (what ``datasets.load_dataset(DIR, name)`` and
the Hugging Face Hub read), and optional Parquet copies of the JSONL files.

Without a ``configs`` block, ``load_dataset(DIR)`` merges every ``train``/``dev``/``test``
file it finds (random and zero-shot together) and ignores the rest. Features are inferred
from the records written (one type per field; null-only fields are ``null``), so the block
always describes the files as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vsr_dataset.dictionary import declared_types

Feature = dict[str, Any]  # one entry of a datasets YAML feature list


@dataclass(frozen=True)
class Config:
    name: str
    files: dict[str, str]  # split -> path relative to the export
    description: str


def _kind(value: Any) -> Any:
    """A JSON value's type as a datasets YAML dtype, a ("list", inner) or a struct dict."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        inner = None
        for v in value:
            inner = _merge(inner, _kind(v))
        return ("list", inner)
    if isinstance(value, dict):
        return {k: _kind(v) for k, v in value.items()}
    raise TypeError(f"no feature type for {type(value).__name__}")


def _merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None or a == b:
        return a
    if isinstance(a, str) and isinstance(b, str) and {a, b} == {"int64", "float64"}:
        return "float64"
    if isinstance(a, tuple) and isinstance(b, tuple):
        return ("list", _merge(a[1], b[1]))
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a.get(k), b.get(k)) for k in {**a, **b}}
    raise ValueError(f"a field has two types in one part: {a!r} and {b!r}")


# The types of the fields the export writes (the data dictionary's), for when every value
# of one is null or empty (an imported release has no image sizes, boxes or vote times): a
# part's features must not change type with the data it happens to hold.
KNOWN: dict[str, Any] = declared_types()


def _incomplete(kind: Any) -> bool:
    if kind is None:
        return True
    if isinstance(kind, tuple):
        return _incomplete(kind[1])
    if isinstance(kind, dict):
        return any(_incomplete(v) for v in kind.values())
    return False


def infer_features(records: Iterable[Mapping[str, Any]]) -> list[Feature]:
    """datasets' YAML feature list of these records (fields in the first record's order).

    Fields the export defines have their declared type (``KNOWN``); the others (the mc
    records') take the type of their first non-null value: the export writes one type per
    field, so records are read only until every such field has one (or to the end, for
    fields null or empty everywhere).
    """
    kinds: dict[str, Any] = {}
    todo: set[str] = set()
    first = True
    for rec in records:
        if first:
            kinds = {k: KNOWN.get(k) or _kind(v) for k, v in rec.items()}
            todo = {k for k, v in kinds.items() if _incomplete(v)}
            first = False
        for key in list(todo):
            kinds[key] = _merge(kinds[key], _kind(rec.get(key)))
            if not _incomplete(kinds[key]):
                todo.discard(key)
        if not todo:
            break
    return [_feature(name, kind) for name, kind in kinds.items()]


def _feature(name: str, kind: Any) -> Feature:
    return {"name": name, **_body(kind)}


def _body(kind: Any) -> dict[str, Any]:
    if kind is None:
        return {"dtype": "null"}
    if isinstance(kind, str):
        return {"dtype": kind}
    if isinstance(kind, tuple):
        inner = kind[1]
        if isinstance(inner, dict):
            return {"list": [_feature(k, v) for k, v in inner.items()]}
        return {
            "list": _body(inner).get("dtype", "null")
            if not isinstance(inner, tuple)
            else _body(inner)
        }
    return {"struct": [_feature(k, v) for k, v in kind.items()]}


def front_matter_configs(
    configs: Sequence[Config], features: Mapping[str, list[Feature]], default: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``configs`` and ``dataset_info`` of the card's YAML front matter."""
    out_configs: list[dict[str, Any]] = []
    info: list[dict[str, Any]] = []
    for c in configs:
        entry: dict[str, Any] = {"config_name": c.name}
        if c.name == default:
            entry["default"] = True
        entry["data_files"] = [{"split": s, "path": p} for s, p in c.files.items()]
        out_configs.append(entry)
        if c.name in features:
            info.append({"config_name": c.name, "features": features[c.name]})
    return out_configs, info


PARQUET_ROWS = 50_000  # rows per row group, held as Arrow columns until written
ARROW_BATCH = 5_000  # records converted from Python dicts at a time


def write_parquet(
    records: Iterable[Mapping[str, Any]],
    features: list[Feature],
    path: Path,
    rows_per_group: int = PARQUET_ROWS,
) -> None:
    """A Parquet copy of one JSONL file, with the schema of its features, written one row
    group at a time from the records as they come. A record as a Python dict costs a few KB
    (all_raw's votes are dicts too) and as Arrow columns a few hundred bytes, so records are
    converted ARROW_BATCH at a time and only the group's Arrow batches wait for the write."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([(f["name"], _arrow(f)) for f in features])
    path.parent.mkdir(parents=True, exist_ok=True)
    step = min(ARROW_BATCH, rows_per_group)
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        rows: list[dict[str, Any]] = []
        group: list[pa.RecordBatch] = []
        held = 0

        def convert() -> None:
            nonlocal held
            group.append(pa.RecordBatch.from_pylist(rows, schema=schema))
            held += len(rows)
            rows.clear()

        for rec in records:
            rows.append(rec if isinstance(rec, dict) else dict(rec))
            if len(rows) >= step:
                convert()
                if held >= rows_per_group:
                    writer.write_table(pa.Table.from_batches(group), row_group_size=held)
                    group.clear()
                    held = 0
        if rows:
            convert()
        if group:  # with no rows at all the file still has its schema
            writer.write_table(pa.Table.from_batches(group), row_group_size=held)


def _arrow(feature: Mapping[str, Any]) -> Any:
    import pyarrow as pa

    scalar = {
        "string": pa.string(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "null": pa.null(),
    }
    if "dtype" in feature:
        return scalar[feature["dtype"]]
    if "list" in feature:
        inner = feature["list"]
        if isinstance(inner, str):
            return pa.list_(scalar[inner])
        if isinstance(inner, list):
            return pa.list_(pa.struct([(f["name"], _arrow(f)) for f in inner]))
        return pa.list_(_arrow(inner))
    return pa.struct([(f["name"], _arrow(f)) for f in feature["struct"]])
