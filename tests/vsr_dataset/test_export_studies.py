"""`build-dataset --study`: one study's rows only, each tagged with the study and language,
and the definition (slug, name, sha256) named in stats.json and the card. Two studies with
real data on both backends (tests/webapp/http/test_studies.py), through the console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.webapp.http.test_studies import make_two_studies
from vsr_core.models import Example, Study, Vote, Worker

BUILD = Path(sys.executable).parent / "build-dataset"


def build(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BUILD), *args], capture_output=True, text=True, timeout=300)


def _vote_on_everything(engine: Engine) -> None:
    with Session(engine) as s:
        voters = [
            Worker(source="invite", external_id=f"judge{k}", roles=["validate"]) for k in range(3)
        ]
        s.add_all(voters)
        s.flush()
        for ex in s.exec(select(Example)):
            for w in voters:
                assert w.id is not None and ex.id is not None
                s.add(Vote(example_id=ex.id, worker_id=w.id, value=ex.label))
        s.commit()


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_export_of_one_study_has_only_its_rows(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    zh_id = make_two_studies(engine, coco_dir)
    _vote_on_everything(engine)
    with Session(engine) as s:
        zh_ids = set(s.exec(select(Example.id).where(Example.study_id == zh_id)))
        vsr_ids = set(s.exec(select(Example.id).where(Example.study_id == 1)))
        zh = s.get(Study, zh_id)
        assert zh is not None
    assert zh_ids and vsr_ids and not zh_ids & vsr_ids

    out = tmp_path / "zh"
    r = build("--study", "vsr-zh", "--out", str(out), "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    raw = _records(out / "all_raw.jsonl")
    assert {rec["example_id"] for rec in raw} == zh_ids
    assert {(rec["study"], rec["language"]) for rec in raw} == {("vsr-zh", "zh-Hans")}
    for part in ("all_validated.jsonl", "random/train.jsonl"):
        assert {rec["study"] for rec in _records(out / part)} <= {"vsr-zh"}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["study"] == {
        "slug": "vsr-zh",
        "name": zh.name,
        "sha256": zh.definition_hash,
        "language": "zh-Hans",
        "template": "ENT1RELATIONENT2。",
    }
    card = (out / "README.md").read_text()
    assert zh.definition_hash in card and "`vsr-zh`" in card
    assert 'caption "ENT1RELATIONENT2。"' in card and "The ENT1" not in card

    default = tmp_path / "vsr"
    r = build("--out", str(default), "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    raw = _records(default / "all_raw.jsonl")
    assert {rec["example_id"] for rec in raw} == vsr_ids
    assert {(rec["study"], rec["language"]) for rec in raw} == {("vsr", "en")}

    r = build("--study", "nope", "--out", str(tmp_path / "x"), "--database-url", db_url)
    assert r.returncode == 2 and r.stderr.startswith("error: no study 'nope'")
    assert not (tmp_path / "x").exists()
