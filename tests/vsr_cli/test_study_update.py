"""`vsr study update` and `vsr study archive` through the real console script, both backends:
a new version keeps the data and records its hash; a change that would make stored captions
unreadable is refused with the reason; an archived study takes no new pairs, invites,
workers or batches, and the dashboard marks it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.admins import create_owner
from tests.support.webapp_coco import client_for, make_app
from tests.vsr_cli.test_study import ROOT, vsr
from tests.webapp.admin.test_admin import PASSWORD, login
from vsr_core.caption_language import render_concepts
from vsr_core.models import Annotation, Example, ImagePair, Study, StudyVersion, Worker

ZH = ROOT / "studies" / "vsr-zh.toml"


def _zh_with_captions(db_url: str, engine: Engine) -> int:
    """The shipped zh study, sampled, with two stored captions (relation 'on')."""
    assert vsr("study", "create", "--file", str(ZH), "--database-url", db_url).returncode == 0
    r = vsr("sample", "--study", "vsr-zh", "--pairs", "2", "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    with Session(engine) as s:
        zh = s.exec(select(Study).where(Study.slug == "vsr-zh")).one()
        assert zh.id is not None
        from vsr_core.studies.context import StudyContext

        lang = StudyContext.of(zh).language
        writer = Worker(source="invite", external_id="w", roles=["generate"])
        s.add(writer)
        s.flush()
        for pair in s.exec(select(ImagePair).where(ImagePair.study_id == zh.id)):
            ann = Annotation(
                pair_id=pair.id,  # type: ignore[arg-type]
                worker_id=writer.id,  # type: ignore[arg-type]
                relation="on",
                subj=pair.concept_a,
                obj=pair.concept_b,
                true_image_id=pair.image1_id,
            )
            s.add(ann)
            s.flush()
            s.add(
                Example(
                    image_id=pair.image1_id,
                    relation="on",
                    subj=pair.concept_a,
                    obj=pair.concept_b,
                    label=True,
                    annotation_id=ann.id,
                    author_id=writer.id,
                    study_id=zh.id,
                    caption=render_concepts(lang, pair.concept_a, "on", pair.concept_b),
                )
            )
        s.commit()
        return zh.id


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = ZH.read_text(encoding="utf-8")
    assert old in text, old
    path = tmp_path / "vsr-zh.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _stored(engine: Engine, zh_id: int) -> tuple[str, list[tuple[int, str]], int]:
    with Session(engine) as s:
        study = s.get(Study, zh_id)
        assert study is not None
        versions = [
            (v.version, v.definition_hash)
            for v in s.exec(
                select(StudyVersion)
                .where(StudyVersion.study_id == zh_id)
                .order_by(col(StudyVersion.version))
            )
        ]
        examples = len(s.exec(select(Example).where(Example.study_id == zh_id)).all())
        return study.definition_hash, versions, examples


def test_update_keeps_data_records_the_hash_and_refuses_breaking_changes(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    zh_id = _zh_with_captions(db_url, engine)
    first, versions, examples = _stored(engine, zh_id)
    assert versions == [(1, first)] and examples == 2

    same = vsr("study", "update", "--file", str(ZH), "--database-url", db_url)
    assert same.returncode == 0 and same.stdout.startswith("study vsr-zh unchanged: ")

    refused = {
        "relation 'on' is written '在…上' in 2 stored Examples and cannot be renamed '在…之上'": (
            'id = "on"\nname = "在…上"',
            'id = "on"\nname = "在…之上"',
        ),
        "the first language's template changes from 'ENT1RELATIONENT2。' to "
        "'ENT1RELATIONENT2．', but 2 stored Examples are written with it": (
            'template = "ENT1RELATIONENT2。"',
            'template = "ENT1RELATIONENT2．"',
        ),
    }
    for reason, (old, new) in refused.items():
        r = vsr(
            "study", "update", "--file", str(_variant(tmp_path, old, new)), "--database-url", db_url
        )
        assert r.returncode == 1 and r.stdout == "", r.stdout
        assert r.stderr == f"error: {reason}; nothing was stored\n", r.stderr
        assert _stored(engine, zh_id) == (first, versions, examples)

    consent = _variant(tmp_path, "这是一项研究", "这是一项关于")  # texts may change
    r = vsr("study", "update", "--file", str(consent), "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    digest, versions, examples = _stored(engine, zh_id)
    assert r.stdout == (
        f"updated study vsr-zh to version 2 (sha256 {first[:12]} -> "
        f"{digest[:12]}); its data is kept\n"
    )
    assert versions == [(1, first), (2, digest)] and digest != first and examples == 2
    shown = vsr("study", "show", "vsr-zh", "--database-url", db_url).stdout
    assert f"  definition sha256 {digest} (version 2), first stored " in shown

    lab = _variant(tmp_path, 'slug = "vsr-zh"', 'slug = "lab"')
    r = vsr("study", "update", "--file", str(lab), "--database-url", db_url)
    assert r.returncode == 1 and r.stderr.startswith("error: no study 'lab' to update: create")


def test_an_archived_study_takes_no_new_work(db_url: str, engine: Engine, tmp_path: Path) -> None:
    zh_id = _zh_with_captions(db_url, engine)
    r = vsr("study", "archive", "vsr", "--database-url", db_url)
    assert r.returncode == 1 and "is the default study" in r.stderr
    r = vsr("study", "archive", "vsr-zh", "--database-url", db_url)
    assert r.returncode == 0 and r.stdout.startswith("archived study vsr-zh"), r.stderr
    listed = vsr("study", "list", "--database-url", db_url).stdout.splitlines()
    assert listed[1].startswith("  vsr-zh ") and listed[1].endswith("(archived)")
    shown = vsr("study", "show", "vsr-zh", "--database-url", db_url).stdout
    assert shown.splitlines()[0].startswith("vsr-zh: 视觉空间推理（VSR，简体中文） (archived 20")
    for args in (
        ("sample", "--study", "vsr-zh", "--pairs", "1"),
        ("invite", "create", "--study", "vsr-zh"),
    ):
        r = vsr(*args, "--database-url", db_url)
        assert r.returncode == 1 and r.stderr.startswith("error: study vsr-zh is archived: ")
    assert _stored(engine, zh_id)[2] == 2  # its data stays

    app = make_app(db_url, tmp_path, image_root=ROOT / "demo" / "coco" / "images")
    worker: Any = client_for(app)
    r = worker.get(
        "/s/vsr-zh/start/generate?PROLIFIC_PID=p1&STUDY_ID=s&SESSION_ID=x", follow_redirects=False
    )
    assert r.status_code == 403 and "本研究已结束" in r.text  # at the link, before consent
    with Session(engine) as s:  # and no new worker
        assert s.exec(select(Worker).where(Worker.external_id == "p1")).first() is None
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    admin = TestClient(app)
    login(admin)
    page = admin.get("/admin?study=vsr-zh").text
    assert "(archived)</option>" in page


def test_an_archived_study_can_be_reopened(db_url: str, engine: Engine) -> None:
    _zh_with_captions(db_url, engine)
    assert vsr("study", "archive", "vsr-zh", "--database-url", db_url).returncode == 0
    r = vsr("study", "unarchive", "vsr-zh", "--database-url", db_url)
    assert r.returncode == 0 and r.stdout.startswith("study vsr-zh reopened"), r.stderr
    listed = vsr("study", "list", "--database-url", db_url).stdout
    assert "(archived)" not in listed
    r = vsr("invite", "create", "--study", "vsr-zh", "--database-url", db_url)
    assert r.returncode == 0, r.stderr
    r = vsr("study", "unarchive", "nope", "--database-url", db_url)
    assert r.returncode == 2 and r.stderr.startswith("error: no study 'nope'"), r.stderr
