"""build-dataset's two passes: compact rows for splits and statistics, then every file's full
records read again from the database while written (one pass for all files)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.vsr_dataset.test_export import read_jsonl, seed_native
from vsr_dataset.export import build_dataset
from vsr_dataset.export_rows import read_export

STREAMED = [
    "all_validated.jsonl",
    *(f"{s}/{p}.jsonl" for s in ("random", "zeroshot") for p in ("train", "dev", "test")),
]


def _without_votes(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != "votes"}


def test_every_file_holds_the_raw_records_of_its_ids(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    seed_native(session)
    session.close()
    out = tmp_path / "out"
    build_dataset(engine, out)
    raw = read_jsonl(out / "all_raw.jsonl")
    by_id = {int(str(r["example_id"])): r for r in raw}
    assert [r["example_id"] for r in raw] == sorted(by_id)
    kept = [r for r in raw if r["verdict"] == "kept"]
    assert read_jsonl(out / "all_validated.jsonl") == [_without_votes(r) for r in kept]
    for rel in STREAMED:
        recs = read_jsonl(out / rel)
        ids = [int(str(r["example_id"])) for r in recs]
        assert ids == sorted(ids), rel
        assert recs == [_without_votes(by_id[i]) for i in ids], rel


def test_one_pass_for_many_files_equals_one_pass_each(engine: Engine, session: Session) -> None:
    seed_native(session, n_annotations=40)
    session.close()
    with engine.connect() as conn, conn.begin():
        every, source = read_export(conn, threshold=Fraction(2, 3))
        ids = [r.id for r in every]
        raw = list(source.records(every, raw=True))
        assert [r["example_id"] for r in raw] == ids
        # The compact rows and the records agree on what both hold.
        for row, rec in zip(every, raw, strict=True):
            assert rec["pair_id"] == row.pair_id
            assert rec["vote_true_validator_id"] == list(row.true_ids)
            assert rec["label"] == int(row.label)
            assert rec["verdict"] == row.verdict
        some, odd = ids[::3], [i for i in ids if i % 2] + [max(ids) + 1]  # one of no row
        got: dict[int, list[dict[str, Any]]] = {0: [], 1: [], 2: []}
        for i, rec in source.fan_out(every, [(some, False), (None, True), (odd, False)]):
            got[i].append(json.loads(orjson.dumps(rec)))
        assert got[1] == json.loads(orjson.dumps(raw))
        for i, keys in ((0, some), (2, odd)):
            wanted = set(keys)
            reference = [_without_votes(r) for r in raw if r["example_id"] in wanted]
            assert got[i] == json.loads(orjson.dumps(reference))
            assert got[i] == json.loads(orjson.dumps(list(source.records(every, keys))))
