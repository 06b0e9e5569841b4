# mypy: disable-error-code="arg-type,union-attr"
"""The card's data dictionary describes every field of every file a real build writes: a
key without an entry, a value of another type, or a field the dictionary promises in every
record but a record lacks fails here (so a new field without a description fails)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.data_dictionary import check_export
from tests.vsr_dataset.test_export_hub import _seed_all_parts
from vsr_core.models import Adjudication, Example, Instance
from vsr_dataset.dictionary import doc_of, render
from vsr_dataset.export import BuildOptions, build_dataset
from vsr_dataset.import_vsr import import_meta_csv, import_vsr_file

RAW = "data/data_files/all_vsr_raw_data.jsonl"
VALIDATED = "data/data_files/all_vsr_validated_data.jsonl"
META = "data/data_files/meta_data.csv"


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
