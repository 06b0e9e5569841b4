"""The qualification check over HTTP on SQLite and PostgreSQL (docs/studies.md,
"Qualification"; docs/platforms.md, "Screen-out after a failed check"): pass -> the first
batch; fail once then pass; fail every try -> the clear page and the platform's screen-out
(Prolific's no-pay code, MTurk's qualification through botocore's Stubber); a failed worker
never gets a batch, whichever route asks; hostile tries are refused in plain words."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.qualification import (
    PREFIX,
    answers_form,
    item_answers,
    item_captions,
    item_ids,
    known_answers,
    make_study,
    page_items,
    try_check,
)
from tests.support.webapp_coco import client_for, form_field, make_app
from vsr_core.models import (
    Batch,
    Example,
    PlatformCall,
    PlatformStudy,
    QualificationAttempt,
    Study,
    Worker,
)
from vsr_core.studies.settings import StudyConfig
from vsr_core.types import utcnow
from webapp.crowd import batches
from webapp.crowd.leases import PairStrategy
from webapp.platforms.mturk import SANDBOX

OPAQUE = re.compile(r"[A-Za-z0-9_-]{22}")
PROLIFIC_STUDY = "plst1"
HIT = "HITQUAL1"
QUAL_TYPE = "3QUALFAILED0000000000000000000"


@pytest.fixture
def lab(engine: Engine, coco_dir: Path) -> Study:
    with Session(engine) as s:
        study = make_study(s, coco_dir)
        s.add(
            PlatformStudy(
                study_id=study.id or 0,
                platform="prolific",
                external_id=PROLIFIC_STUDY,
                settings={"completion_code": "DONE12345678", "qualification_code": "QFAIL1234567"},
            )
        )
        s.add(
            PlatformStudy(
                study_id=study.id or 0,
                platform="mturk",
                external_id=HIT,
                settings={"qualification_type_id": QUAL_TYPE},
            )
        )
        s.commit()
        s.refresh(study)
        s.expunge(study)
        return study


@pytest.fixture
def site(db_url: str, lab: Study, coco_dir: Path, tmp_path: Path) -> Any:
    return make_app(db_url, tmp_path, image_root=coco_dir / "images")


@pytest.fixture
def known(engine: Engine, lab: Study) -> dict[str, bool]:
    with Session(engine) as s:
        return known_answers(s, lab)


def enter(client: Any, query: str, kind: str = "generate") -> str:
    """Through the study link and the consent; the instructions' button asks for a batch
    and is sent to the check. Returns the CSRF token."""
    r = client.get(f"{PREFIX}/start/{kind}?{query}", follow_redirects=False)
    assert r.status_code == 303, r.text
    csrf = form_field(client.get(f"{PREFIX}/consent/{kind}").text, "csrf")
    client.post(f"{PREFIX}/consent/{kind}", data={"decision": "agree", "csrf": csrf})
    r = client.post(f"{PREFIX}/begin/{kind}", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"{PREFIX}/qualify/{kind}", r.text
    return csrf


def prolific(pid: str) -> str:
    return f"PROLIFIC_PID={pid}&STUDY_ID={PROLIFIC_STUDY}&SESSION_ID=se{pid}"


def _tries(engine: Engine, kind: str = "generate") -> list[QualificationAttempt]:
    with Session(engine) as s:
        rows = s.exec(
            select(QualificationAttempt)
            .where(QualificationAttempt.kind == kind)
            .order_by(QualificationAttempt.attempt)  # type: ignore[arg-type]
        ).all()
        for row in rows:
            s.expunge(row)
        return list(rows)


def _batches(engine: Engine) -> list[Batch]:
    with Session(engine) as s:
        return list(s.exec(select(Batch)).all())


def test_a_pass_leads_to_the_first_batch(site: Any, engine: Engine, known: dict[str, bool]) -> None:
    client = client_for(site)
    csrf = enter(client, prolific("p1"))
    page = client.get(f"{PREFIX}/qualify/generate")
    # Three worked examples, drawn in some order; nothing on the page gives the answer away.
    with Session(engine) as s:
        study = s.exec(select(Study).where(Study.slug == "lab")).one()
        captions, answers = item_captions(s, study), item_answers(s, study)
    assert sorted(page_items(page.text).values()) == sorted(captions[f"e{i}"] for i in range(3))
    assert "Try 1 of 2." in page.text and "You need 3 right" in page.text
    for phrase in ("Photo: a cat lying under", "Not useful: true for both"):  # the "why"s
        assert phrase not in page.text
    after = try_check(client, "generate", known, right=True)
    assert "You passed the check" in after.text and "You had 3 of 3 right." in after.text
    (row,) = _tries(engine)
    assert (row.attempt, row.score, row.shown, row.passed) == (1, 3, 3, True)
    assert row.answers == {k: answers[k] for k in ("e0", "e1", "e2")}  # stored by the item
    r = client.post(f"{PREFIX}/begin/generate", data={"csrf": csrf}, follow_redirects=False)
    assert r.headers["location"] == f"{PREFIX}/generate"
    (batch,) = _batches(engine)
    assert batch.kind == "generate" and batch.status == "open"
    assert client.get(f"{PREFIX}/generate").status_code == 200
    # Passed is passed: the check is not shown again, the instructions lead to the batch.
    r = client.get(f"{PREFIX}/qualify/generate")
    assert "You passed the check" in r.text


def test_fail_once_then_pass(site: Any, engine: Engine, known: dict[str, bool]) -> None:
    client = client_for(site)
    csrf = enter(client, prolific("p2"))
    after = try_check(client, "generate", known, right=False)
    assert after.status_code == 200
    assert "Your last try had 0 of 3 right" in after.text and "Try 2 of 2." in after.text
    # Still no batch: the button goes back to the check.
    r = client.post(f"{PREFIX}/begin/generate", data={"csrf": csrf}, follow_redirects=False)
    assert r.headers["location"] == f"{PREFIX}/qualify/generate" and _batches(engine) == []
    after = try_check(client, "generate", known, right=True)
    assert "You passed the check" in after.text
    assert [(t.attempt, t.passed) for t in _tries(engine)] == [(1, False), (2, True)]
    r = client.post(f"{PREFIX}/begin/generate", data={"csrf": csrf}, follow_redirects=False)
    assert r.headers["location"] == f"{PREFIX}/generate" and len(_batches(engine)) == 1


def _refused_everywhere(client: Any, engine: Engine, csrf: str, kind: str = "generate") -> None:
    """A failed worker asks for a batch every way there is, and gets none."""
    r = client.post(f"{PREFIX}/begin/{kind}", data={"csrf": csrf}, follow_redirects=False)
    assert r.headers["location"] == f"{PREFIX}/qualify/{kind}"
    r = client.get(f"{PREFIX}/instructions/{kind}", follow_redirects=False)
    assert r.headers["location"] == f"{PREFIX}/qualify/{kind}"
    assert client.get(f"{PREFIX}/{kind}", follow_redirects=False).status_code in (303, 409)
    # The batch code itself refuses, whatever route or script calls it.
    with Session(engine) as s:
        worker = s.exec(select(Worker)).one()
        study = s.exec(select(Study).where(Study.slug == "lab")).one()
        with pytest.raises(batches.BatchError) as refused:
            batches.open_or_resume(
                s, worker, kind, StudyConfig(), PairStrategy(), study_id=study.id or 0
            )
        assert refused.value.reason == "qualification"
    assert _batches(engine) == []


def test_two_failed_tries_screen_out_on_prolific(
    site: Any, engine: Engine, known: dict[str, bool]
) -> None:
    client = client_for(site)
    csrf = enter(client, prolific("p3"))
    try_check(client, "generate", known, right=False)
    page = try_check(client, "generate", known, right=False)
    assert "Thank you for your interest" in page.text and "0 of 3 right" in page.text
    # The Prolific study's own no-pay return code, and the link that hands it to Prolific.
    assert form_code(page.text) == "QFAIL1234567"
    assert 'href="https://app.prolific.com/submissions/complete?cc=QFAIL1234567"' in page.text
    assert [(t.attempt, t.passed) for t in _tries(engine)] == [(1, False), (2, False)]
    _refused_everywhere(client, engine, csrf)
    # No third try: the page, a post of try 3 and a replay of try 2 change nothing.
    r = client.post(
        f"{PREFIX}/qualify/generate",
        data={"csrf": csrf, "attempt": "3", "a_e0": "true", "a_e1": "false", "a_e2": "true"},
        follow_redirects=False,
    )
    assert r.status_code == 409
    assert len(_tries(engine)) == 2
    # The same person entering again from the study link lands on the same page.
    client.get(f"{PREFIX}/start/generate?{prolific('p3')}")
    r = client.get(f"{PREFIX}/instructions/generate")
    assert "Thank you for your interest" in r.text


def form_code(html: str) -> str:
    m = re.search(r'id="screenout-code">([^<]+)<', html)
    assert m, "no screen-out code on the page"
    return m.group(1)


@pytest.fixture
def mturk_stub(site: Any) -> Iterator[Stubber]:
    client = boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=SANDBOX,
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    with Stubber(client) as stub:
        site.state.mturk_client = client
        yield stub
        stub.assert_no_pending_responses()


def test_two_failed_tries_give_the_mturk_failed_qualification(
    site: Any, engine: Engine, known: dict[str, bool], mturk_stub: Stubber
) -> None:
    client = client_for(site)
    mturk_stub.add_response(
        "associate_qualification_with_worker",
        {},
        {
            "QualificationTypeId": QUAL_TYPE,
            "WorkerId": "WQUAL1",
            "IntegerValue": 0,
            "SendNotification": False,
        },
    )
    csrf = enter(
        client,
        f"workerId=WQUAL1&assignmentId=AQUAL1&hitId={HIT}"
        "&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com",
    )
    try_check(client, "generate", known, right=False)
    page_before = client.get(f"{PREFIX}/qualify/generate").text
    page = try_check(client, "generate", known, right=False)
    assert "Please return the HIT on MTurk" in page.text and "screenout-code" not in page.text
    # The last try sent again (a reload): scored once, MTurk called once (the Stubber has
    # no second answer queued; the call log would show a refused one).
    r = client.post(
        f"{PREFIX}/qualify/generate",
        data=answers_form(page_before, known, right=True),
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert [t.passed for t in _tries(engine)] == [False, False]
    with Session(engine) as s:
        (call,) = s.exec(select(PlatformCall)).all()
        assert call.method == "associate_qualification_with_worker" and call.status == 200
    _refused_everywhere(client, engine, csrf)


def test_invite_worker_gets_the_clear_page_only(
    site: Any, engine: Engine, known: dict[str, bool]
) -> None:
    from vsr_core.models import InviteToken

    with Session(engine) as s:
        study = s.exec(select(Study).where(Study.slug == "lab")).one()
        s.add(InviteToken(token="inv-qual-1", study_id=study.id or 0))
        s.commit()
    client = client_for(site)
    enter(client, "token=inv-qual-1")
    try_check(client, "generate", known, right=False)
    page = try_check(client, "generate", known, right=False)
    assert "You can close this page" in page.text
    assert "screenout-code" not in page.text and "Prolific" not in page.text
    with Session(engine) as s:
        assert s.exec(select(PlatformCall)).all() == []


def test_gold_items_for_validation(site: Any, engine: Engine, known: dict[str, bool]) -> None:
    """The validation check draws the study's gold Examples: each shown with its photo
    (addressed by its place in the try), never with its gold answer."""
    client = client_for(site)
    csrf = enter(client, prolific("p5"), kind="validate")
    page = client.get(f"{PREFIX}/qualify/validate")
    ids = item_ids(page.text)
    assert len(ids) == 2 and all(OPAQUE.fullmatch(i) for i in ids)
    assert "/images/qualify/validate/0.jpg" in page.text
    img = client.get(f"{PREFIX}/images/qualify/validate/0.jpg")
    assert img.status_code == 200 and img.headers["content-type"] == "image/jpeg"
    for bad in ("2", "49", "-1", "x"):
        assert client.get(f"{PREFIX}/images/qualify/validate/{bad}.jpg").status_code in (404, 422)
    after = try_check(client, "validate", known, right=True)
    assert "You passed the check" in after.text
    # Once passed, the try's photos are gone with it.
    assert client.get(f"{PREFIX}/images/qualify/validate/0.jpg").status_code == 404
    # Past the check, no second check: the pool holds only the two gold Examples the check
    # showed, never this worker's controls, so there is no work and no empty batch.
    r = client.post(f"{PREFIX}/begin/validate", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 200 and "No work available right now" in r.text, r.status_code
    # A check of one task says nothing about the other: caption writing still asks for its own.
    r = client.post(f"{PREFIX}/begin/generate", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303


ATTRIBUTE_RE = re.compile(r'\s([a-z][a-z-]*)="([^"]*)"')


def test_the_check_names_no_gold_example(
    site: Any, engine: Engine, known: dict[str, bool], lab: Study
) -> None:
    """A candidate's page of gold items carries no Example's or image's id (fields, image
    addresses, alt text, attributes), so nothing joins it to the validation page; each
    worker's try has ids of its own, another worker's are refused and store nothing, and
    the real answers are scored by the item."""
    from vsr_core.models import Image

    with Session(engine) as s:
        golds = s.exec(select(Example).where(Example.study_id == lab.id, col(Example.is_gold)))
        gold = {e.id: s.get(Image, e.image_id) for e in golds}
        answers = item_answers(s, lab)
    pages = []
    for pid in ("p-opaque1", "p-opaque2"):
        client = client_for(site)
        enter(client, prolific(pid), kind="validate")
        pages.append((client, client.get(f"{PREFIX}/qualify/validate").text))
    (client, html), (other, other_html) = pages
    # Both tries show the study's two gold Examples, under ids that differ per worker.
    assert sorted(page_items(html).values()) == sorted(page_items(other_html).values())
    assert set(item_ids(html)).isdisjoint(item_ids(other_html))
    form = html[html.index('id="q-form"') : html.index("</form>")]
    for name, value in ATTRIBUTE_RE.findall(form):
        assert not name.startswith("data-"), name
        if name == "name":
            assert value in ("csrf", "attempt") or (
                value.startswith("a_") and OPAQUE.fullmatch(value[2:])
            ), value
        if name in ("src", "href") and "/images/" in value:
            assert re.fullmatch(rf"{PREFIX}/images/qualify/validate/[01]\.jpg", value), value
        if name in ("alt", "aria-label"):
            assert not re.search(r"[0-9]", value), value
    for example_id, image in gold.items():
        assert image is not None
        for leak in (f"g{example_id}", str(image.coco_id), image.file_name, image.coco_url):
            assert leak and leak not in html, leak
    # The other worker's ids, sent by this worker: refused in plain words, nothing stored.
    data = answers_form(other_html, known, right=True)
    data["csrf"] = form_field(html, "csrf")
    r = client.post(f"{PREFIX}/qualify/validate", data=data, follow_redirects=False)
    assert r.status_code == 422 and "not in this check" in r.text
    assert _tries(engine, "validate") == []
    # The real answers pass, stored under the server's own item ids.
    assert "You passed the check" in try_check(client, "validate", known, right=True).text
    (row,) = _tries(engine, "validate")
    assert row.passed and row.answers == {f"g{i}": answers[f"g{i}"] for i in gold}


def test_hostile_tries_are_refused_in_plain_words(
    site: Any, engine: Engine, known: dict[str, bool]
) -> None:
    client = client_for(site)
    csrf = enter(client, prolific("p6"))
    page = client.get(f"{PREFIX}/qualify/generate").text
    good = answers_form(page, known, right=True)
    first, second, third = (f"a_{i}" for i in item_ids(page))
    url = f"{PREFIX}/qualify/generate"

    def post(data: Any, **kw: Any) -> Any:
        return client.post(url, data=data, follow_redirects=False, **kw)

    cases: list[tuple[dict[str, str], int, str]] = [
        (good | {"a_e99": "true"}, 422, "not in this check"),  # an item never drawn
        (good | {"a_g1": "true"}, 422, "not in this check"),
        (good | {"a_e0": "true"}, 422, "not in this check"),  # the item's own id: not on pages
        (good | {"a_e0x": "true"}, 422, "not in this check"),  # not an item id at all
        (good | {first + "x": "true"}, 422, "not in this check"),
        (good | {first: "maybe"}, 422, "True or False"),
        ({k: v for k, v in good.items() if k != second}, 422, "answer every item"),
        (good | {"attempt": "0"}, 400, "check your answer"),
        (good | {"attempt": "1 "}, 400, "check your answer"),
        (good | {"attempt": "2"}, 409, "not open"),  # a try that is not the next one
        (good | {"csrf": "forged"}, 403, "did not come from this site"),
        (good | {third: "t" * 200}, 400, "check your answer"),
    ]
    for data, status, words in cases:
        r = post(data)
        assert r.status_code == status, (data, r.status_code, r.text[:300])
        assert words in r.text, (data, r.text[:300])
        assert "Traceback" not in r.text
    # A field sent twice is one answer too many.
    r = client.post(
        url,
        content="&".join(f"{k}={v}" for k, v in good.items()) + f"&{first}=false",
        headers={"content-type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert r.status_code == 400 and "one answer" in r.text
    # An oversized body is refused before it is read.
    r = post(good | {"padding": "x" * 20_000})
    assert r.status_code == 413
    assert _tries(engine) == []  # none of that was a try
    # The real try, then its replay with other answers: scored once, as first sent.
    assert post(good).status_code == 303
    wrong = answers_form(page, known, right=False)
    assert post(wrong).status_code == 303
    (row,) = _tries(engine)
    assert row.passed and row.score == 3
    r = client.post(f"{PREFIX}/begin/generate", data={"csrf": csrf}, follow_redirects=False)
    assert r.headers["location"] == f"{PREFIX}/generate"


def test_a_worker_from_before_the_check_is_not_asked(site: Any, engine: Engine, lab: Study) -> None:
    """The check is for new workers: one who had a batch of the task in the study before it
    asked for a check goes on working."""
    with Session(engine) as s:
        worker = Worker(source="prolific", external_id="old1")
        s.add(worker)
        s.commit()
        from datetime import timedelta

        from vsr_core.types import utcnow

        earlier = utcnow() - timedelta(days=3)  # outside the one-batch-a-day limit
        s.add(
            Batch(
                study_id=lab.id or 0,
                worker_id=worker.id or 0,
                kind="generate",
                status="completed",
                size=1,
                created_at=earlier,
                deadline=earlier,
                completion_code="X",
            )
        )
        s.commit()
    client = client_for(site)
    r = client.get(f"{PREFIX}/start/generate?{prolific('old1')}", follow_redirects=False)
    csrf = form_field(client.get(f"{PREFIX}/consent/generate").text, "csrf")
    client.post(f"{PREFIX}/consent/generate", data={"decision": "agree", "csrf": csrf})
    r = client.post(f"{PREFIX}/begin/generate", data={"csrf": csrf}, follow_redirects=False)
    assert r.headers["location"] == f"{PREFIX}/generate"
    assert client.get(f"{PREFIX}/qualify/generate", follow_redirects=False).headers["location"] == (
        f"{PREFIX}/instructions/generate"
    )


def test_two_tabs_sending_the_last_try_at_once_make_one_try(
    site: Any, engine: Engine, known: dict[str, bool]
) -> None:
    """Two tabs of one worker send the second (last) try at the same moment: one try is
    stored, the other tab sees that outcome, and no third try exists."""
    import threading

    first = client_for(site)
    csrf = enter(first, prolific("p7"))
    try_check(first, "generate", known, right=False)
    second = client_for(site)
    second.cookies.update(first.cookies)
    pages = [c.get(f"{PREFIX}/qualify/generate").text for c in (first, second)]
    assert all('name="attempt" value="2"' in p for p in pages)
    barrier = threading.Barrier(2)
    answers: list[int] = []

    def send(client: Any, page: str, right: bool) -> None:
        data = answers_form(page, known, right)
        barrier.wait()
        r = client.post(f"{PREFIX}/qualify/generate", data=data, follow_redirects=False)
        answers.append(r.status_code)

    tabs = [
        threading.Thread(target=send, args=(first, pages[0], False)),
        threading.Thread(target=send, args=(second, pages[1], True)),
    ]
    for t in tabs:
        t.start()
    for t in tabs:
        t.join()
    assert answers == [303, 303]
    tries = _tries(engine)
    assert [t.attempt for t in tries] == [1, 2]
    outcome = tries[1].passed
    for client in (first, second):
        page = client.get(f"{PREFIX}/qualify/generate").text
        assert ("You passed the check" in page) == outcome
        assert ("Thank you for your interest" in page) == (not outcome)
    r = first.post(
        f"{PREFIX}/qualify/generate",
        data={"csrf": csrf, "attempt": "3", "a_e0": "true", "a_e1": "false", "a_e2": "true"},
        follow_redirects=False,
    )
    assert r.status_code in (303, 409) and len(_tries(engine)) == 2


def test_gold_shown_in_the_check_is_no_control_for_that_worker(
    site: Any, engine: Engine, known: dict[str, bool], lab: Study
) -> None:
    """A worker knows the answers of the gold items their check showed: validation never
    serves those to them as controls, only gold the check did not show; another worker's
    controls are not changed by it."""
    from webapp.validate.strategy import unseen_gold

    with Session(engine) as s:  # a third gold Example: the check of two shows two of three
        first = s.exec(
            select(Example).where(Example.study_id == lab.id, col(Example.is_gold))
        ).first()
        assert first is not None
        extra = Example(
            **first.model_dump(exclude={"id", "caption"}), caption="The cat is near the dog."
        )
        s.add(extra)
        s.commit()
        golds = s.exec(select(Example).where(Example.study_id == lab.id, col(Example.is_gold)))
        every_gold = {e.id for e in golds}
        assert extra.gold_label is not None
        known = {**known, extra.caption: extra.gold_label}
    client = client_for(site)
    enter(client, prolific("p-controls"), kind="validate")
    page = client.get(f"{PREFIX}/qualify/validate")
    with Session(engine) as s:
        by_caption = {c: int(i[1:]) for i, c in item_captions(s, lab).items() if i[0] == "g"}
    shown = {by_caption[c] for c in page_items(page.text).values()}
    assert len(shown) == 2 and shown < every_gold
    with Session(engine) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "p-controls")).one()
        assert worker.id is not None and lab.id is not None
        # Seen on the open try's page already: not a control for them.
        assert set(unseen_gold(s, worker.id, 10, lab.id)) == every_gold - shown
    assert "You passed the check" in try_check(client, "validate", known, right=True).text
    with Session(engine) as s:
        assert set(unseen_gold(s, worker.id, 10, lab.id)) == every_gold - shown
        # A worker who took no check (one from before it) keeps every gold item as control.
        other = Worker(source="prolific", external_id="p-before", roles=["validate"])
        s.add(other)
        s.commit()
        assert other.id is not None
        s.add(
            Batch(
                study_id=lab.id,
                worker_id=other.id,
                kind="validate",
                size=5,
                deadline=utcnow(),
                status="returned",
            )
        )
        s.commit()
        assert set(unseen_gold(s, other.id, 10, lab.id)) == every_gold
