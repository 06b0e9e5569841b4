# mypy: disable-error-code="arg-type,call-overload"
# (SQLModel ids are Optional until flushed; the seeding code flushes before use.)
"""`vsr import-vsr` on the real VSR release and on malformed input, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from tests.support.vsr_record import GOOD
from vsr_core.models import Example, Image, Vote, Worker
from vsr_dataset.import_vsr import import_meta_csv, import_vsr_file, release_files
from vsr_dataset.vsr_format import VsrFormatError, parse_record

RAW = "data/data_files/all_vsr_raw_data.jsonl"
VALIDATED = "data/data_files/all_vsr_validated_data.jsonl"
META = "data/data_files/meta_data.csv"


def counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as c:
        return {
            m.__name__: c.execute(select(func.count()).select_from(m)).scalar_one()
            for m in (Example, Vote, Worker, Image)
        }


def test_import_real_release_is_complete_and_idempotent(engine: Engine, vsr_dir: Path) -> None:
    raw = import_vsr_file(engine, vsr_dir / RAW)
    assert (raw.records, raw.examples_added, raw.votes_added) == (12_809, 12_809, 39_057)
    after_raw = counts(engine)
    assert after_raw["Example"] == 12_809 and after_raw["Vote"] == 39_057

    with engine.connect() as c:
        workers = c.execute(select(Worker.external_id, Worker.roles)).all()
        people = {ext.split("#")[0] for ext, _ in workers}
        annotators = {ext for ext, roles in workers if "annotator" in roles}
        validators = {ext.split("#")[0] for ext, roles in workers if "validator" in roles}
        # VSR section 3.3: 24 caption writers, 45 validators, 4 people did both.
        assert (len(annotators), len(validators), len(annotators & validators)) == (24, 45, 4)
        assert len(people) == 65
        # Images: COCO id from the file name, split from the link, size unknown (0).
        img = c.execute(select(Image).where(Image.coco_id == 419052)).one()
        assert (img.file_name, img.coco_split, img.width) == ("000000419052.jpg", "train2017", 0)
        # Multi-word concepts parsed from the caption with the relation known.
        ex = c.execute(
            select(Example.subj, Example.relation, Example.obj, Example.origin).where(
                Example.caption == "The teddy bear is on the couch."
            )
        ).first()
        assert ex is not None and tuple(ex) == ("teddy bear", "on", "couch", "imported")

    again = import_vsr_file(engine, vsr_dir / RAW)
    assert (again.examples_added, again.votes_added, again.workers_added) == (0, 0, 0)
    assert counts(engine) == after_raw

    # The validated file repeats 10,972 raw records (votes as strings) and adds reference_frame.
    val = import_vsr_file(engine, vsr_dir / VALIDATED)
    assert (val.records, val.examples_added, val.votes_added) == (10_972, 0, 0)
    assert val.examples_updated == 616  # records with a non-null reference_frame
    assert counts(engine) == after_raw
    assert import_vsr_file(engine, vsr_dir / VALIDATED).examples_updated == 0

    meta = import_meta_csv(engine, vsr_dir / META)
    assert meta.records == 67
    with engine.connect() as c:
        demo = c.execute(select(Worker.demographics).where(Worker.external_id == "2")).scalar_one()
    assert demo["Country of Birth"] == "China" and demo["age"] == "52"
    assert import_meta_csv(engine, vsr_dir / META).workers_updated == 0


def test_zeroshot_split_file_subj_corruption_is_not_trusted(engine: Engine, vsr_dir: Path) -> None:
    result = import_vsr_file(engine, vsr_dir / "data/splits/zeroshot/dev.jsonl")
    with engine.connect() as c:
        concepts = {s for (s,) in c.execute(select(Example.subj))} | {
            o for (o,) in c.execute(select(Example.obj))
        }
    assert "horse" in concepts or "handbag" in concepts
    assert not concepts & {"orse", "lephant", "ot dog", "andbag"}
    assert result.records == 340


def _write(path: Path, records: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps([1, 2]), "JSON object"),
        (json.dumps({**GOOD, "relation": "levitating over"}), "unknown relation"),
        (json.dumps({**GOOD, "caption": "A hot dog on a table."}), "does not fit"),
        (json.dumps({**GOOD, "label": 2}), "label must be 0 or 1"),
        (json.dumps({**GOOD, "vote_true_validator_id": "[1, x]"}), "not a list of ids"),
        (json.dumps({**GOOD, "vote_true_validator_id": [1, True]}), "integer id"),
        (json.dumps({**GOOD, "image": "cat.png"}), "COCO file name"),
        (json.dumps({**GOOD, "image_link": "http://x/val2017/000000000001.jpg"}), "image_link"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "annotator_id"}), "missing field"),
    ],
)
def test_malformed_line_names_the_line_and_imports_nothing(
    engine: Engine, tmp_path: Path, bad: str, message: str
) -> None:
    second = {
        **GOOD,
        "image": "000000406026.jpg",
        "image_link": "http://images.cocodataset.org/val2017/000000406026.jpg",
        "label": 0,
    }
    path = _write(tmp_path / "bad.jsonl", [GOOD, second, bad])
    with pytest.raises(VsrFormatError) as err:
        import_vsr_file(engine, path)
    assert "bad.jsonl:3: " in str(err.value) and message in str(err.value)
    assert counts(engine) == {"Example": 0, "Vote": 0, "Worker": 0, "Image": 0}


def test_conflicting_vote_rolls_the_file_back(engine: Engine, tmp_path: Path) -> None:
    import_vsr_file(engine, _write(tmp_path / "a.jsonl", [GOOD]))
    before = counts(engine)
    other = {**GOOD, "caption": "The hot dog is under the dining table.", "relation": "under"}
    flipped = {**GOOD, "vote_true_validator_id": [1], "vote_false_validator_id": [2, 5]}
    with pytest.raises(VsrFormatError, match=r"b.jsonl:2: validator 2 voted True"):
        import_vsr_file(engine, _write(tmp_path / "b.jsonl", [other, flipped]))
    assert counts(engine) == before  # the new record on line 1 was rolled back too


def test_repeated_validator_ids_are_kept(engine: Engine, tmp_path: Path) -> None:
    # The release has records like [1, 2, 22, 1] and [1] vs [1, 2]: every vote is kept.
    rec = {**GOOD, "vote_true_validator_id": [1, 2, 1], "vote_false_validator_id": [1]}
    result = import_vsr_file(engine, _write(tmp_path / "r.jsonl", [rec]))
    assert (result.votes_added, result.repeated_votes) == (4, 2)
    with engine.connect() as c:
        exts = sorted(e for (e,) in c.execute(select(Worker.external_id)))
    assert exts == ["1", "1#2", "1#3", "2", "3"]


def test_parse_record_accepts_both_vote_list_forms() -> None:
    assert parse_record(json.dumps({**GOOD, "annotator_id": None}), 1).annotator_id is None
    a = parse_record(json.dumps(GOOD), 1)
    assert (a.true_ids, a.false_ids, a.subj, a.obj) == ((1, 2), (5,), "hot dog", "dining table")
    b = parse_record(json.dumps({**GOOD, "reference_frame": 1.0, "subj": "ot dog"}), 1)
    assert b.reference_frame == "1" and b.subj == "hot dog" and b.subj_obj_mismatch


def test_meta_csv_errors(engine: Engine, tmp_path: Path) -> None:
    p = tmp_path / "meta.csv"
    p.write_text("id,age\n1,30\nx,40\n")
    with pytest.raises(VsrFormatError, match=r"meta.csv:3: id must be an integer"):
        import_meta_csv(engine, p)
    p.write_text("id,age\n1,30\n2,40,extra\n")
    with pytest.raises(VsrFormatError, match=r"meta.csv:3: wrong number of columns"):
        import_meta_csv(engine, p)
    assert counts(engine)["Worker"] == 0


def test_release_directory_order(vsr_dir: Path) -> None:
    files = [p.name for p in release_files(vsr_dir)]
    assert files[0] == "all_vsr_raw_data.jsonl"
    assert files[1] == "all_vsr_validated_data.jsonl"
    assert files[-1] == "meta_data.csv"
    assert len(files) == 9


def test_cli_reports_malformed_line_in_one_line(sqlite_url: str, tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [GOOD, "{oops"])
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from vsr_cli.main import main; main()",
            "import-vsr",
            str(path),
            "--database-url",
            sqlite_url,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(err) == 1, proc.stderr
    assert "bad.jsonl:2: not valid JSON" in err[0] and "nothing from this file" in err[0]
    ok = subprocess.run(
        [
            sys.executable,
            "-c",
            "from vsr_cli.main import main; main()",
            "import-vsr",
            str(_write(tmp_path / "ok.jsonl", [GOOD])),
            "--database-url",
            sqlite_url,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert "1 records, +1 examples, +3 votes" in ok.stdout
