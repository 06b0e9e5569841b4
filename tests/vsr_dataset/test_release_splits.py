"""The VSR release's own splits: `vsr import-vsr` of the release folder keeps them and
`build-dataset --vsr-compatible` writes them back; with the raw file only, the card says
the splits are re-drawn. On the real release, through the CLI, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from tests.support.vsr_record import GOOD
from vsr_dataset.import_vsr import import_vsr_file
from vsr_dataset.vsr_format import VsrFormatError

RAW = "data/data_files/all_vsr_raw_data.jsonl"
SCHEMES = ("random", "zeroshot")
PARTS = ("train", "dev", "test")
# What "record for record" compares: per file, the set of these fields of every record
# (the release's zero-shot files carry no reference_frame; their subj/obj are corrupted).
COMPARED = (
    "image",
    "caption",
    "label",
    "relation",
    "annotator_id",
    "vote_true_validator_id",
    "vote_false_validator_id",
)


def _cli(*args: str, db_url: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", "from vsr_cli.main import main; main()", *args]
        + ["--database-url", db_url, "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def _build(db_url: str, out: Path) -> None:
    subprocess_args = [
        sys.executable,
        "-c",
        "from vsr_cli.main import main; main()",
        "build",
        "--vsr-compatible",
        "--out",
        str(out),
        "--database-url",
        db_url,
        "-q",
    ]
    proc = subprocess.run(subprocess_args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _key(rec: dict[str, Any], scheme: str) -> tuple[Any, ...]:
    fields = COMPARED + (("reference_frame",) if scheme == "random" else ())
    return tuple(rec[f] for f in fields)


def test_release_folder_round_trips_its_own_splits(
    db_url: str, vsr_dir: Path, tmp_path: Path
) -> None:
    imported = _cli("import-vsr", str(vsr_dir), db_url=db_url).stdout
    assert "+7,680 in the release's random/train" in imported
    out = tmp_path / "out"
    _build(db_url, out)
    for scheme in SCHEMES:
        for part in PARTS:
            release = _records(vsr_dir / "data" / "splits" / scheme / f"{part}.jsonl")
            ours = _records(out / scheme / f"{part}.jsonl")
            assert len(ours) == len(release), f"{scheme}/{part}"
            assert {_key(r, scheme) for r in ours} == {_key(r, scheme) for r in release}, (
                f"{scheme}/{part} holds other records than the release's"
            )
    stats = json.loads((out / "stats.json").read_text())
    source = stats["split_source"]
    assert source["random"]["source"] == source["zeroshot"]["source"] == "release"
    # The release's own zero-shot leak (its corrupted subj), named, not repaired.
    assert set(source["release"]["zeroshot_shared_concepts"]) == {"horse", "handbag"}
    assert stats["reference_frame_known"] == {"known": 616, "validated": 10_972}
    card = (out / "README.md").read_text()
    assert "the VSR release's own random split" in card
    assert "`horse` (train and dev)" in card
    assert "Re-drawn" not in card
    assert "`reference_frame` is known for 616 of the 10,972 validated Examples" in card


def test_raw_file_only_redraws_and_says_so(db_url: str, vsr_dir: Path, tmp_path: Path) -> None:
    _cli("import-vsr", str(vsr_dir / RAW), db_url=db_url)
    out = tmp_path / "out"
    _build(db_url, out)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["split_source"]["random"] == {
        "source": "drawn",
        "seed": 0,
        "unit": "annotation",
        "ratios": "70/10/20",
    }
    assert stats["reference_frame_known"]["known"] == 0
    card = (out / "README.md").read_text()
    assert "Re-drawn, not the release's splits" in card
    assert "not comparable with published VSR numbers" in card
    assert "seed 0, per annotation" in card
    # Not the release's parts: its test file is not reproduced.
    release = {_key(r, "random") for r in _records(vsr_dir / "data/splits/random/test.jsonl")}
    ours = {_key(r, "random") for r in _records(out / "random" / "test.jsonl")}
    assert ours != release


def _split_file(root: Path, scheme: str, part: str) -> Path:
    path = root / scheme / f"{part}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(GOOD) + "\n")
    return path


def test_a_record_in_two_parts_of_one_scheme_fails_the_file(engine: Engine, tmp_path: Path) -> None:
    first = import_vsr_file(engine, _split_file(tmp_path / "a", "random", "train"))
    assert (first.release_split, first.split_rows_added) == ("random/train", 1)
    again = import_vsr_file(engine, _split_file(tmp_path / "b", "random", "train"))
    assert again.split_rows_added == 0  # the same assignment again changes nothing
    with pytest.raises(VsrFormatError, match=r"test\.jsonl:1: .*already in random/train"):
        import_vsr_file(engine, _split_file(tmp_path / "c", "random", "test"))
    # Another scheme is another assignment.
    assert (
        import_vsr_file(engine, _split_file(tmp_path / "d", "zeroshot", "dev")).split_rows_added
        == 1
    )
