"""Several studies on one site: entry links under /s/<slug>/, and nothing leaks across them.

Two studies with real data on both backends: the default VSR study and the Chinese one made
from studies/vsr-zh.toml. A validator who enters one study's link is served that study's
Examples only, however long they go on; an annotator only its pairs; the same person may
take part in both; the old unprefixed links are the default study's; an unknown slug is a
clear 404 page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.webapp_coco import client_for, form_field, make_app
from tests.webapp.validate.test_routes import seed_examples
from vsr_core.models import Annotation, Assignment, Batch, Example, ImagePair
from vsr_core.studies.settings import load_study_config, save_study_config
from vsr_core.studies.store import create_study

ZH_FILE = Path(__file__).resolve().parents[3] / "studies" / "vsr-zh.toml"


def make_two_studies(engine: Engine, coco_dir: Path) -> int:
    """Eight real pairs with two Examples each: four pairs in the default study, four in
    vsr-zh (made from its file). Returns the vsr-zh study's id."""
    with Session(engine) as s:
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        s.commit()
        assert zh.id is not None
        seed_examples(s, coco_dir, 8)
        pairs = list(s.exec(select(ImagePair).order_by(col(ImagePair.id))))
        for pair in pairs[4:]:
            pair.study_id = zh.id
            s.add(pair)
        moved = {p.id for p in pairs[4:]}
        for ex in s.exec(select(Example)):
            annotation = s.get(Annotation, ex.annotation_id)
            assert annotation is not None
            if annotation.pair_id in moved:
                ex.study_id = zh.id
                s.add(ex)
        s.commit()
        for study_id in (1, zh.id):
            save_study_config(s, {"gold_rate": 0.0}, study_id)
        return zh.id


@pytest.fixture
def two(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> tuple[Any, int]:
    zh_id = make_two_studies(engine, coco_dir)
    return make_app(db_url, tmp_path, image_root=coco_dir / "images"), zh_id


def enter(client: Any, prefix: str, query: str, kind: str) -> str:
    """Follow a study's entry link through consent and open a batch; returns the CSRF token."""
    r = client.get(f"{prefix}/start/{kind}?{query}", follow_redirects=False)
    assert r.status_code == 303, r.text
    assert r.headers["location"] == f"{prefix}/consent/{kind}"
    page = client.get(r.headers["location"])
    assert page.status_code == 200, page.text
    assert f'action="{prefix}/consent/{kind}"' in page.text
    csrf = form_field(page.text, "csrf")
    r = client.post(
        f"{prefix}/consent/{kind}", data={"decision": "agree", "csrf": csrf}, follow_redirects=False
    )
    assert r.headers["location"] == f"{prefix}/instructions/{kind}"
    page = client.get(r.headers["location"])
    assert f'action="{prefix}/begin/{kind}"' in page.text
    r = client.post(f"{prefix}/begin/{kind}", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"{prefix}/{kind}", r.text
    return csrf


def validate_all(client: Any, prefix: str) -> int:
    """Vote on every item served until the batch ends; returns how many were served."""
    served = 0
    while True:
        page = client.get(f"{prefix}/validate", follow_redirects=False)
        if page.status_code == 303:
            assert page.headers["location"] == f"{prefix}/done/validate"
            return served
        assert page.status_code == 200, page.text
        assert f'action="{prefix}/validate"' in page.text
        fields = {k: form_field(page.text, k) for k in ("csrf", "assignment_id")}
        r = client.post(
            f"{prefix}/validate", data=fields | {"answer": "true"}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"].startswith(f"{prefix}/validate")
        served += 1
        assert served <= 20


def _served_studies(engine: Engine, batch_study: int) -> set[int]:
    with Session(engine) as s:
        rows = s.exec(
            select(Example.study_id)
            .join(Assignment, col(Assignment.example_id) == col(Example.id))
            .join(Batch, col(Batch.id) == col(Assignment.batch_id))
            .where(Batch.study_id == batch_study)
        )
        return set(rows)


def test_a_validator_in_one_study_never_gets_the_others_items(
    two: tuple[Any, int], engine: Engine
) -> None:
    app, zh_id = two
    client = client_for(app)
    enter(client, "/s/vsr-zh", "PROLIFIC_PID=both1&STUDY_ID=st&SESSION_ID=se", "validate")
    # One Example of each of the study's four captions (never both halves in one batch).
    assert validate_all(client, "/s/vsr-zh") == 4
    assert _served_studies(engine, zh_id) == {zh_id}
    done = client.get("/s/vsr-zh/done/validate")
    with Session(engine) as s:
        zh_code = load_study_config(s, zh_id).completion_code  # its own, not the default's
        assert zh_code != load_study_config(s, 1).completion_code
    assert done.status_code == 200 and zh_code in done.text

    # The same person in the default study, through the old unprefixed link: its own
    # consent, its own batch, its own items.
    enter(client, "", "PROLIFIC_PID=both1&STUDY_ID=st2&SESSION_ID=se2", "validate")
    assert validate_all(client, "") == 4
    assert _served_studies(engine, 1) == {1}
    with Session(engine) as s:
        batches = list(s.exec(select(Batch).order_by(col(Batch.id))))
        assert [(b.study_id, b.worker_id) for b in batches] == [
            (zh_id, batches[0].worker_id),
            (1, batches[0].worker_id),  # one worker, two studies
        ]


def test_an_annotator_gets_the_studys_pairs_and_its_examples_stay_there(
    two: tuple[Any, int], engine: Engine
) -> None:
    app, zh_id = two
    with Session(engine) as s:
        for pair in s.exec(select(ImagePair)):
            pair.status = "available"  # seed_examples left them annotated in spirit only
            s.add(pair)
        zh_pairs = {p.id for p in s.exec(select(ImagePair).where(ImagePair.study_id == zh_id))}
        s.commit()
    client = client_for(app)
    enter(client, "/s/vsr-zh", "PROLIFIC_PID=gen1&STUDY_ID=st&SESSION_ID=se", "generate")
    for _ in range(2):
        page = client.get("/s/vsr-zh/generate", follow_redirects=False)
        assert page.status_code == 200, page.text
        assert 'action="/s/vsr-zh/generate"' in page.text
        fields = {k: form_field(page.text, k) for k in ("assignment_id", "client_token", "csrf")}
        r = client.post(
            "/s/vsr-zh/generate",
            data=fields
            | {
                "action": "submit",
                "relation": "near",
                "ent1": "a",
                "true_image": "1",
            },
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
    with Session(engine) as s:
        leased = set(s.exec(select(Assignment.pair_id).where(col(Assignment.pair_id).is_not(None))))
        assert leased and leased <= zh_pairs
        new = list(
            s.exec(
                select(Example)
                .where(
                    Example.origin == "human",
                    col(Example.author_id).is_not(None),
                    col(Example.created_at).is_not(None),
                )
                .order_by(col(Example.id).desc())
                .limit(4)
            )
        )
        assert {e.study_id for e in new} == {zh_id}


def test_unknown_study_is_a_clear_404(two: tuple[Any, int]) -> None:
    app, _ = two
    client = client_for(app)
    for path in ("/s/nope/start/validate?PROLIFIC_PID=x1", "/s/nope/validate", "/s/BAD!/x"):
        r = client.get(path, follow_redirects=False)
        assert r.status_code == 404, path
        assert "There is no study called" in r.text
        assert "Traceback" not in r.text
    assert "called nope on this site" in client.get("/s/nope/start/generate").text
    api = client.get("/s/nope/api/validate/item", headers={"Accept": "application/json"})
    assert api.status_code == 404 and "no study" in api.json()["detail"]


def test_study_home_and_static_files_under_the_prefix(two: tuple[Any, int]) -> None:
    app, _ = two
    client = client_for(app)
    assert client.get("/s/vsr-zh").status_code == 200
    assert client.get("/s/vsr-zh/static/site.css").status_code == 200
    page = client.get("/s/vsr-zh/start/generate", follow_redirects=False)
    assert page.status_code == 400  # no participant id: the study's own error page
    assert "/s/vsr-zh/static/site.css" in page.text


def test_an_invite_opens_only_its_own_study(two: tuple[Any, int], engine: Engine) -> None:
    from vsr_core.models import InviteToken

    app, zh_id = two
    with Session(engine) as s:
        s.add(InviteToken(token="zh-lab-1", roles=["validate"], study_id=zh_id))
        s.commit()
    client = client_for(app)
    wrong = client.get("/start/validate?token=zh-lab-1", follow_redirects=False)
    assert wrong.status_code == 403 and "not valid" in wrong.text
    enter(client, "/s/vsr-zh", "token=zh-lab-1", "validate")
    assert validate_all(client, "/s/vsr-zh") == 4


def _available(engine: Engine) -> None:
    with Session(engine) as s:
        for pair in s.exec(select(ImagePair)):
            pair.status = "available"
            s.add(pair)
        s.commit()


def _counts(engine: Engine) -> tuple[int, int, int]:
    from vsr_core.models import Vote

    with Session(engine) as s:
        return (
            len(s.exec(select(Annotation)).all()),
            len(s.exec(select(Example)).all()),
            len(s.exec(select(Vote)).all()),
        )


def test_a_caption_is_never_stored_through_another_studys_address(
    two: tuple[Any, int], engine: Engine
) -> None:
    """A worker holding a vsr-zh lease who posts to /api/generate/annotations (no prefix, the
    default study's address) is refused in plain words and nothing is stored: not an English
    caption in vsr-zh, not a relation vsr-zh switched off. The form and the pair's image are
    held to the same boundary; the study's own address still works."""
    app, zh_id = two
    _available(engine)
    with Session(engine) as s:  # vsr-zh offers two relations; the default study "around" too
        save_study_config(s, {"relations_enabled": ["near", "left of"]}, zh_id)
    client = client_for(app)
    csrf = enter(client, "/s/vsr-zh", "PROLIFIC_PID=gen2&STUDY_ID=st&SESSION_ID=se", "generate")
    task = client.get("/s/vsr-zh/api/generate/task")
    assert task.status_code == 200, task.text
    client.headers["X-CSRF-Token"] = task.headers["X-CSRF-Token"]
    lease = task.json()["assignment_id"]
    before = _counts(engine)
    for relation in ("near", "around"):  # "around" is switched off in vsr-zh
        body = {
            "assignment_id": lease,
            "client_token": f"cross-{relation[:4]}-0001",
            "action": "submit",
            "relation": relation,
            "ent1": "a",
            "true_image": 1,
        }
        r = client.post("/api/generate/annotations", json=body)
        assert r.status_code == 403, r.text
        assert "belongs to another study" in r.json()["detail"]
        assert "Nothing was saved" in r.json()["detail"]
        form = client.post("/generate", data={**body, "csrf": csrf}, follow_redirects=False)
        assert form.status_code == 403 and "belongs to another study" in form.text
    assert _counts(engine) == before
    # The study switched "around" off: refused at its own address too.
    off = {
        "assignment_id": lease,
        "client_token": "cross-off-0001",
        "action": "submit",
        "relation": "around",
        "ent1": "a",
        "true_image": 1,
    }
    assert client.post("/s/vsr-zh/api/generate/annotations", json=off).status_code == 422
    # The pair's images answer at the study's address only.
    for image in task.json()["images"]:
        assert image["src"].startswith("/s/vsr-zh/images/pair/"), image["src"]
        assert client.get(image["src"]).status_code == 200
        assert client.get(image["src"].removeprefix("/s/vsr-zh")).status_code == 404
    ok = {
        "assignment_id": lease,
        "client_token": "cross-ok-00001",
        "action": "submit",
        "relation": "near",
        "ent1": "a",
        "true_image": 1,
    }
    r = client.post("/s/vsr-zh/api/generate/annotations", json=ok)
    assert r.status_code == 201, r.text
    with Session(engine) as s:
        stored = s.exec(select(Example).order_by(col(Example.id).desc()).limit(2)).all()
        assert {e.study_id for e in stored} == {zh_id}
    # A replay of the stored answer at the other study's address is refused too.
    assert client.post("/api/generate/annotations", json=ok).status_code == 403


def test_a_vote_and_an_image_are_answered_only_in_the_leases_study(
    two: tuple[Any, int], engine: Engine
) -> None:
    from vsr_core.models import Vote

    app, _ = two
    client = client_for(app)
    enter(client, "/s/vsr-zh", "PROLIFIC_PID=val3&STUDY_ID=st&SESSION_ID=se", "validate")
    item = client.get("/s/vsr-zh/api/validate/item")
    assert item.status_code == 200, item.text
    client.headers["X-CSRF-Token"] = item.headers["X-CSRF-Token"]
    shown = item.json()["item"]
    src = shown["image"]["src"]
    assert src.startswith("/s/vsr-zh/images/validate/"), src
    assert client.get(src).status_code == 200
    assert client.get(src.removeprefix("/s/vsr-zh")).status_code == 404
    vote = {"assignment_id": shown["assignment_id"], "value": True}
    r = client.post("/api/validate/votes", json=vote)
    assert r.status_code == 404 and "belongs to another study" in r.json()["detail"]
    with Session(engine) as s:
        assert s.exec(select(Vote)).all() == []
    assert client.post("/s/vsr-zh/api/validate/votes", json=vote).status_code == 201
    # A replay at the other study's address is refused as well.
    assert client.post("/api/validate/votes", json=vote).status_code == 404
