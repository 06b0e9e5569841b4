"""What a first-time annotator or validator meets (docs/annotation-site.md), through the HTTP
routes on SQLite and PostgreSQL: the batch header's real size, "Finish now", the done page
when the work runs out, the reference-frame question's place, the picker, the favicon, the
worked examples' photos and the study's own consent text. The layout at phone and desktop
width is checked in a real browser in tests/webapp/crowd/test_browser_pages.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.admins import create_owner
from tests.support.webapp_coco import (
    answer,
    begin,
    client_for,
    enter,
    form_field,
    set_study,
    start_prolific,
    task,
)
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from tests.webapp.validate.test_routes import seed_examples
from vsr_core.models import Batch, Example, InviteToken, PlatformStudy
from vsr_core.studies.settings import DEFAULT_CONSENT, load_study_config


@pytest.fixture
def site(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> Any:
    with Session(engine) as s:
        seed_examples(s, coco_dir, 2)  # 2 pairs to caption, 4 Examples to judge
        create_owner(s, "alice", PASSWORD)
    set_study(db_url, gold_rate=0.0, completion_code="FIRST-USE")
    return make_admin_app(db_url, engine, tmp_path, image_root=coco_dir / "images")


def start_validate(client: Any, pid: str) -> str:
    csrf = enter(client, f"PROLIFIC_PID={pid}&STUDY_ID=st&SESSION_ID=se", kind="validate")
    r = client.post("/begin/validate", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303, r.text
    return csrf


def vote(client: Any, value: str = "true") -> Any:
    page = client.get("/validate", follow_redirects=False)
    assert page.status_code == 200, page.headers.get("location")
    data = {
        "csrf": form_field(page.text, "csrf"),
        "answer": value,
        "assignment_id": form_field(page.text, "assignment_id"),
    }
    return client.post("/validate", data=data, follow_redirects=False)


def test_batch_header_shows_the_items_available(site: Any, engine: Engine) -> None:
    """200 and 500 are the study's sizes; 2 pairs and 4 Examples (2 captions) are what
    exists, and one batch holds one half of each caption: 2 items, not 4."""
    annotator = client_for(site)
    start_prolific(annotator, "ann1")
    page = annotator.get("/generate")
    assert "Pair <strong>1</strong> of 2" in page.text
    validator = client_for(site)
    start_validate(validator, "val1")
    page = validator.get("/validate")
    assert re.search(r'Item <strong id="item-number">1</strong> of 2', page.text)
    with Session(engine) as s:
        sizes = sorted((b.kind, b.size) for b in s.exec(select(Batch)))
    assert sizes == [("generate", 2), ("validate", 2)]


def test_finish_now_with_work_done_gives_the_code(site: Any, engine: Engine) -> None:
    client = client_for(site)
    csrf = start_prolific(client, "early1")
    r = client.post("/generate", data=answer(task(client)), follow_redirects=False)
    assert r.status_code == 303
    confirm = client.get("/finish/generate")
    assert confirm.status_code == 200 and "You have finished <strong>1</strong> of the 2" in (
        confirm.text
    )
    assert client.post("/finish/generate", data={"csrf": "wrong"}).status_code == 403
    r = client.post("/finish/generate", data={"csrf": csrf}, follow_redirects=False)
    assert r.headers["location"] == "/done/generate"
    done = client.get("/done/generate")
    assert "FIRST-USE" in done.text and "You finished early" in done.text
    assert 'id="copy-code"' in done.text
    with Session(engine) as s:
        (batch,) = s.exec(select(Batch)).all()
        assert (batch.status, batch.completion_code, batch.done_count) == (
            "completed",
            "FIRST-USE",
            1,
        )
        assert batch.entry["finished_early"] is True and batch.entry["source"] == "prolific"
        worker_id = batch.worker_id
    # The admin sees it on the worker's page.
    admin = TestClient(site)
    login(admin)
    assert "completed · finished early" in admin.get(f"/admin/workers/{worker_id}").text


def test_the_work_needed_for_approval_is_shown_before_finish_now(site: Any, engine: Engine) -> None:
    """The task page says how many items are done and how many the submission needs to be
    approved (the batch's own size, or the platform study's minimum), and the "Finish now"
    page warns while fewer are done. Invited workers, paid by no platform, see none of it."""
    # An invited worker first, while the pool is fresh.
    with Session(engine) as s:
        s.add(InviteToken(token="inv-min", roles=["generate"]))
        s.commit()
    invited = client_for(site)
    csrf = enter(invited, "token=inv-min")
    begin(invited, csrf)
    page = invited.get("/generate")
    assert page.status_code == 200 and "Pair <strong>" in page.text
    assert 'id="need"' not in page.text
    invited.post("/finish/generate", data={"csrf": csrf})  # hands its lease back
    client = client_for(site)
    start_prolific(client, "min1")  # names Prolific study "study1", none of ours: the size
    page = client.get("/generate").text
    assert "0 done; 2 needed to be approved and paid" in page
    client.post("/generate", data=answer(task(client)), follow_redirects=False)
    assert "1 done; 2 needed to be approved and paid" in client.get("/generate").text
    confirm = client.get("/finish/generate").text
    assert "At least <strong>2</strong> items are needed for your submission to be approved" in (
        confirm
    )
    assert "you have done 1. If you finish now, it will not be approved." in confirm
    # The platform study's own minimum, as its plan will apply it.
    with Session(engine) as s:
        s.add(
            PlatformStudy(
                platform="prolific", external_id="st", settings={"rules": {"min_items": 1}}
            )
        )
        s.commit()
    validator = client_for(site)
    start_validate(validator, "min2")  # STUDY_ID=st
    assert "0 done; 1 needed to be approved and paid" in validator.get("/validate").text
    vote(validator)
    assert "1 done; 1 needed to be approved and paid" in validator.get("/validate").text
    confirm = validator.get("/finish/validate").text
    assert "You have finished <strong>1</strong>" in confirm and 'id="need"' not in confirm


def test_finish_now_with_nothing_done_has_no_code(site: Any, engine: Engine) -> None:
    client = client_for(site)
    csrf = start_validate(client, "early2")
    client.get("/validate")  # an item is leased ...
    confirm = client.get("/finish/validate")
    assert "no completion code" in confirm.text
    client.post("/finish/validate", data={"csrf": csrf})
    done = client.get("/done/validate")
    assert "You ended the batch" in done.text and "FIRST-USE" not in done.text
    with Session(engine) as s:
        (batch,) = s.exec(select(Batch)).all()
        assert batch.status == "returned" and batch.completion_code is None
        # ... and handed back: the next validator can have it.
        assert all(e.queue_leases == 0 for e in s.exec(select(Example)))
    assert client.get("/finish/validate", follow_redirects=False).headers["location"] == (
        "/done/validate"
    )


def test_a_validator_who_judged_everything_is_told_so(site: Any) -> None:
    client = client_for(site)
    csrf = start_validate(client, "all4")
    # The two halves of a caption never come in one batch, so the 4 Examples of 2 captions
    # take two batches; the validator reopens the link once, when told all is judged.
    served: list[int] = []
    while not served or served[-1] and len(served) < 6:
        in_batch = 0
        while client.get("/validate", follow_redirects=False).status_code == 200:
            assert vote(client).status_code == 303
            in_batch += 1
        served.append(in_batch)
        done = client.get("/done/validate")
        assert "FIRST-USE" in done.text
        more = client.post("/begin/validate", data={"csrf": csrf})
    # The other half of the item just judged never comes first in the next batch (back to
    # back) but later in it: 2, 2 and then none.
    assert served == [2, 2, 0], served
    # Back for more: nothing is left for them, and no batch was made for it.
    assert client.get("/validate", follow_redirects=False).headers["location"] == "/done/validate"
    done = more
    assert "You have judged every item available right now" in done.text
    assert "come back later" in done.text and "FIRST-USE" in done.text
    assert "No work available" not in done.text


def test_an_annotator_who_captioned_every_pair_is_told_so(site: Any, db_url: str) -> None:
    set_study(db_url, generate_batches_per_day=0)
    client = client_for(site)
    csrf = start_prolific(client, "cap2")
    for _ in range(2):
        assert client.post("/generate", data=answer(task(client))).status_code == 200
    done = client.post("/begin/generate", data={"csrf": csrf})
    assert "You have captioned every pair available right now" in done.text
    # With no earlier work and nothing free, the message says so, not "you judged all".
    newcomer = client_for(site)
    done = begin(newcomer, enter(newcomer, "PROLIFIC_PID=late1&STUDY_ID=study1&SESSION_ID=s1"))
    assert "No work available right now" in done.text and "captioned every" not in done.text


def test_the_reference_frame_question_comes_before_the_answer(site: Any, engine: Engine) -> None:
    client = client_for(site)
    start_validate(client, "frame1")
    page = client.get("/validate").text
    with Session(engine) as s:
        first = s.exec(select(Example).order_by(col(Example.id))).first()
    assert first is not None and first.relation == "left of"  # a frame question
    assert page.index('name="reference_frame"') < page.index('id="btn-true"')


def test_instructions_consent_picker_and_favicon(site: Any) -> None:
    client = client_for(site)
    csrf = enter(client, "PROLIFIC_PID=pick1&STUDY_ID=st&SESSION_ID=se")
    validator = client_for(site)
    enter(validator, "PROLIFIC_PID=pick2&STUDY_ID=st&SESSION_ID=se", kind="validate")
    for kind, who in (("generate", client), ("validate", validator)):
        instructions = who.get(f"/instructions/{kind}").text
        assert "autofocus" not in instructions  # it scrolled the page to the button
        assert '<img src="/examples/cat-before-laptop.jpg"' in instructions
    photo = client.get("/examples/cat-before-laptop.jpg")
    assert photo.status_code == 200 and photo.content[:3] == b"\xff\xd8\xff"
    assert client.get("/examples/..%2f..%2fpyproject.toml.jpg").status_code == 404
    client.post("/begin/generate", data={"csrf": csrf})
    page = client.get("/generate").text
    assert page.count('value="among"') == 1
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"


def test_worked_examples_never_show_a_photo_of_the_work(site: Any, engine: Engine) -> None:
    """Once the example photos are images of the study (the demo samples its pairs from the
    same slice), the instructions describe the examples in words instead: a photo would show
    a task's answer."""
    from vsr_core.models import Image

    with Session(engine) as s:
        for coco_id, name in ((119828, "000000119828.jpg"), (174231, "000000174231.jpg")):
            s.add(
                Image(coco_id=coco_id, file_name=name, coco_split="val2017", width=500, height=375)
            )
        s.commit()
    client = client_for(site)
    enter(client, "PROLIFIC_PID=pool1&STUDY_ID=st&SESSION_ID=se", kind="validate")
    instructions = client.get("/instructions/validate").text
    assert "/examples/cat-" not in instructions
    assert "a black cat sitting in front of a laptop." in instructions
    writer = client_for(site)
    enter(writer, "PROLIFIC_PID=pool2&STUDY_ID=st&SESSION_ID=se")
    assert "/examples/cat-" not in writer.get("/instructions/generate").text


def test_consent_text_is_the_studys_own_and_safe(site: Any, engine: Engine) -> None:
    client = client_for(site)
    client.get("/start/validate?PROLIFIC_PID=cons1&STUDY_ID=st&SESSION_ID=se")
    page = client.get("/consent/validate").text
    # The default names what a real study must fill in, with the batch's real time.
    for placeholder in (
        "Ethics approval",
        "Questions or concerns",
        "Pay:",
        "[researcher name, email address]",
        "at most 90 minutes",
    ):
        assert placeholder in page
    admin = TestClient(site)
    token = login(admin)
    assert "Questions or concerns" in admin.get("/admin/settings").text  # in a textarea
    text = (
        "Run by **Dr Example**, [contact](mailto:a@b.org). Approval ABC-1.\r\n\r\n"
        "<script>alert(1)</script> [x](javascript:alert(1)) {minutes} min"
    )
    r = admin.post(
        "/admin/settings", data={"csrf_token": token, "consent_text": text}, follow_redirects=False
    )
    assert r.status_code == 303
    with Session(engine) as s:
        assert load_study_config(s).consent_text == text.replace("\r\n", "\n")
    page = client.get("/consent/validate").text
    assert "<strong>Dr Example</strong>" in page and '<a href="mailto:a@b.org">' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert 'href="javascript' not in page and "90 min" in page
    assert DEFAULT_CONSENT.splitlines()[0] not in page
    # Empty is refused (a study must show something), and the text stays.
    r = admin.post("/admin/settings", data={"csrf_token": token, "consent_text": "  "})
    assert r.status_code == 422
    with Session(engine) as s:
        assert load_study_config(s).consent_text == text.replace("\r\n", "\n")
