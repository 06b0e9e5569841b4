# mypy: disable-error-code="arg-type,union-attr"
"""The card's data dictionary describes every field of every file a real build writes: a
key without an entry, a value of another type, or a field the dictionary promises in every
record but a record lacks fails here (so a new field without a description fails)."""

from __future__ import annotations

import csv
import json
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.vsr_dataset.test_export_hub import _seed_all_parts
from vsr_core.models import Adjudication, Example, Instance
from vsr_dataset.dictionary import COMPAT_VOTES, NOT_DATA, FieldDoc, FileDoc, doc_of, render
from vsr_dataset.export import BuildOptions, build_dataset
from vsr_dataset.import_vsr import import_meta_csv, import_vsr_file

RAW = "data/data_files/all_vsr_raw_data.jsonl"
VALIDATED = "data/data_files/all_vsr_validated_data.jsonl"
META = "data/data_files/meta_data.csv"


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
        assert records, rel
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


def test_every_field_of_a_full_build_is_in_the_dictionary(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    _seed_all_parts(engine, session)
    with Session(engine) as s:
        for inst in s.query(Instance):
            inst.segmentation = [[1.0, 2.0, 30.0, 2.0, 30.0, 40.0]]
            s.add(inst)
        first = s.query(Example).filter(Example.origin == "human").order_by(Example.id).first()
        s.add(
            Adjudication(
                example_id=first.id,
                study_id=first.study_id,
                decision="false",
                reason="the cup is behind the plate",
                admin_name="ada",
            )
        )
        s.commit()
    out = tmp_path / "out"
    options = BuildOptions(
        polygons=True, with_provenance=True, unvalidated_mc=True, label_model="majority"
    )
    build_dataset(engine, out, options)
    checked = check_export(out)
    for rel in (
        "all_raw.jsonl",
        "random/test.jsonl",
        "machine_negatives.jsonl",
        "mc/train.jsonl",
        "mc_unvalidated/train.jsonl",
        "provenance/mc_items.jsonl",
        "instances.jsonl",
        "stats.json",
        "meta_data.csv",
    ):
        assert rel in checked, rel
    raw = [json.loads(x) for x in (out / "all_raw.jsonl").read_text().splitlines()]
    assert any(r["adjudication"] is not None for r in raw)
    assert any("aggregate_label" in r for r in raw)
    # The card renders the dictionary of exactly the files written.
    card = (out / "README.md").read_text()
    assert "### Data dictionary" in card
    assert "| `answer_caption` | string |" in card and "| `segmentation` | json |" in card


def test_the_release_in_vsr_types_is_in_the_dictionary(
    engine: Engine, vsr_dir: Path, tmp_path: Path
) -> None:
    import_vsr_file(engine, vsr_dir / RAW)
    import_vsr_file(engine, vsr_dir / VALIDATED)
    import_meta_csv(engine, vsr_dir / META)
    out = tmp_path / "out"
    build_dataset(engine, out, BuildOptions(vsr_compatible=True))
    assert "random/train.jsonl" in check_export(out, vsr_compatible=True)
    stats = json.loads((out / "stats.json").read_text())
    # The release lists one validator twice on 321 of its validated records (370 raw).
    assert stats["repeated_validators"] == {"raw": 370, "validated": 321}
    card = (out / "README.md").read_text()
    assert "Here 321 validated records (370 raw) list a validator more than once." in card


def test_a_field_without_an_entry_fails(tmp_path: Path) -> None:
    (tmp_path / "random").mkdir()
    record = {f.name: None for f in doc_of("random/test.jsonl").all_fields}
    (tmp_path / "random" / "test.jsonl").write_text(json.dumps({"new": 1, **record}) + "\n")
    try:
        check_export(tmp_path)
    except AssertionError as exc:
        assert "field 'new' is not in the dictionary" in str(exc)
    else:
        raise AssertionError("an undescribed field passed")
    assert "| `caption` | string |" in "\n".join(
        render(["random/test.jsonl"], vsr_compatible=False)
    )
