"""build-dataset writes the per-worker authenticity summary under the export's ids, only for
the study whose pages measured answers, and the card says what was recorded."""

from __future__ import annotations

import csv
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.data_dictionary import check_export
from tests.vsr_dataset.test_export_studies import _records, _vote_on_everything, build
from tests.webapp.http.test_studies import make_two_studies
from vsr_core.models import Example, ItemSignal, Vote, Worker


def test_worker_file_and_card_carry_the_summary(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    make_two_studies(engine, coco_dir)
    _vote_on_everything(engine)
    with Session(engine) as s:
        judge = s.exec(select(Worker).where(Worker.external_id == "judge0")).one()
        judge_id = judge.id
        votes = s.exec(
            select(Vote)
            .join(Example, Example.id == Vote.example_id)  # type: ignore[arg-type]
            .where(Vote.worker_id == judge.id, Example.study_id == 1)
        ).all()
        for k, v in enumerate(votes):
            s.add(
                ItemSignal(
                    study_id=1,
                    worker_id=judge.id or 0,
                    vote_id=v.id,
                    shown_ms=1000 + 300 * k,
                    key_events=1,
                    canary=k == 0,
                )
            )
        s.commit()
    out = tmp_path / "vsr"
    r = build("--out", str(out), "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    with (out / "worker_authenticity.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 1
    (row,) = rows
    voters = {
        int(w)
        for rec in _records(out / "all_raw.jsonl")
        for w in [*rec["vote_true_validator_id"], *rec["vote_false_validator_id"]]  # type: ignore[misc]
    }
    assert int(row["worker_id"]) in voters  # the export's id, as in the records
    assert judge_id is not None
    assert "canary" in row["flags"].split() and float(row["score"]) < 1
    assert row["canary_hits"] == "1" and int(row["items_measured"]) == len(votes)
    card = (out / "README.md").read_text()
    assert "`worker_authenticity.csv` is what was recorded" in card
    assert "never typed text or pointer positions" in card
    assert "worker_authenticity.csv" in check_export(out)  # every column described
    other = tmp_path / "zh"
    r = build("--study", "vsr-zh", "--out", str(other), "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    assert not (other / "worker_authenticity.csv").exists()  # another study's signals
    assert "worker_authenticity.csv" not in (other / "README.md").read_text()
