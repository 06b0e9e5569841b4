"""Crowd entry, identity, consent, batches and completion on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import Session, select

from tests.support.webapp_coco import (
    answer,
    begin,
    client_for,
    enter,
    form_field,
    make_app,
    set_study,
    start_prolific,
    task,
)
from vsr_core.models import Assignment, Batch, ImagePair, InviteToken, Worker
from vsr_core.studies.settings import load_study_config


def _workers(engine) -> list[Worker]:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        return list(s.exec(select(Worker)))


def test_prolific_entry_consent_instructions_and_batch(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    r = client.get(
        "/start/generate?PROLIFIC_PID=pp1&STUDY_ID=st&SESSION_ID=se", follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == "/consent/generate"
    assert "vsr_session" in client.cookies
    (worker,) = _workers(engine)
    assert (worker.source, worker.external_id) == ("prolific", "pp1")
    consent = client.get("/consent/generate")
    assert "I agree" in consent.text
    # instructions before consent send the worker back to the consent form
    assert client.get("/instructions/generate", follow_redirects=False).status_code == 303
    csrf = form_field(consent.text, "csrf")
    client.post("/consent/generate", data={"decision": "agree", "csrf": csrf})
    page = client.get("/instructions/generate")
    assert page.status_code == 200
    for phrase in ("either frame", "80 minutes", "Worked examples"):
        assert phrase in page.text
    r = begin(client, csrf)
    assert r.headers["location"] == "/generate"
    with Session(engine) as s:
        (batch,) = s.exec(select(Batch)).all()
        # The study says 200; the 6 free pairs are all there is.
        assert batch.size == 6 and batch.kind == "generate"
        assert batch.entry["session_id"] == "se" and batch.entry["source"] == "prolific"
        consented = datetime.fromisoformat(batch.entry["consented_at"])
        assert consented.tzinfo is not None and consented <= batch.created_at
        minutes = (batch.deadline - batch.created_at).total_seconds() / 60
        assert minutes == pytest.approx(80)
    page = client.get("/generate")
    assert page.status_code == 200 and 'id="countdown"' in page.text


def test_declining_consent_records_nothing_and_asks_to_return(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    client.get("/start/generate?PROLIFIC_PID=pp2&SESSION_ID=s")
    csrf = form_field(client.get("/consent/generate").text, "csrf")
    r = client.post("/consent/generate", data={"decision": "decline", "csrf": csrf})
    assert "return" in r.text
    assert begin(client, csrf).headers["location"] == "/consent/generate"
    with Session(engine) as s:
        assert s.exec(select(Batch)).all() == []


def test_returning_worker_resumes_the_same_batch_and_pair(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    start_prolific(client, "pp3", "sessA")
    first = task(client)
    # reload and a fresh browser with the same study link both resume the same lease
    assert task(client)["assignment_id"] == first["assignment_id"]
    other_browser = client_for(site)
    r = other_browser.get(
        "/start/generate?PROLIFIC_PID=pp3&STUDY_ID=study1&SESSION_ID=sessA", follow_redirects=False
    )
    assert r.headers["location"] == "/generate"
    assert task(other_browser)["assignment_id"] == first["assignment_id"]
    with Session(engine) as s:
        assert len(s.exec(select(Batch)).all()) == 1
        assert len(s.exec(select(Assignment)).all()) == 1


def test_ids_in_url_are_not_enough_to_act_as_someone_else(site, engine) -> None:  # type: ignore[no-untyped-def]
    victim = client_for(site)
    start_prolific(victim, "victim", "secret-session")
    fields = task(victim)
    attacker = client_for(site)
    # no cookie: the task and the API refuse
    assert attacker.get("/generate", follow_redirects=False).status_code == 401
    assert attacker.get("/api/generate/task").status_code == 401
    r = attacker.post(
        "/api/generate/annotations",
        json={
            "assignment_id": fields["assignment_id"],
            "client_token": "attackertoken1",
            "relation": "on",
            "ent1": "a",
            "true_image": 1,
        },
    )
    assert r.status_code == 401
    # knowing the PID but not the Prolific session id of the open batch is refused
    r = attacker.get("/start/generate?PROLIFIC_PID=victim&STUDY_ID=study1&SESSION_ID=guess")
    assert r.status_code == 409 and "another study session" in r.text
    assert "vsr_session" not in attacker.cookies
    # another worker's own session cannot answer the victim's lease
    start_prolific(attacker, "attacker", "s2")
    own_csrf = task(attacker)["csrf"]
    r = attacker.post("/generate", data=answer(fields, csrf=own_csrf, client_token="attack12345"))
    assert r.status_code == 403 and "not assigned to you" in r.text
    with Session(engine) as s:
        from vsr_core.models import Annotation

        assert s.exec(select(Annotation)).all() == []


def test_forms_need_the_sessions_csrf_token(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    csrf = enter(client, "PROLIFIC_PID=pp4&SESSION_ID=s")
    for wrong in ("not-the-token", "é-non-ascii"):  # non-ASCII once crashed compare_digest
        r = begin(client, wrong)
        assert r.status_code == 403 and "did not come from this site" in r.text
    assert begin(client, csrf).status_code == 303


def test_mturk_preview_is_read_only(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    r = client.get("/start/generate?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    assert r.status_code == 200
    assert "Accept the HIT" in r.text and "What a task looks like" in r.text
    assert 'name="relation" value="on top of" required disabled' in r.text
    assert 'id="task-form"' not in r.text  # nothing can be submitted
    assert _workers(engine) == []
    with Session(engine) as s:
        assert s.exec(select(Assignment)).all() == []


def test_mturk_entry_and_completion_form(site, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    set_study(db_url, generate_batch_size=1, completion_code="MTK-OK")
    client = client_for(site)
    csrf = enter(
        client,
        "workerId=W1&assignmentId=A1&hitId=H1&turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com",
    )
    assert begin(client, csrf).status_code == 303
    client.post("/generate", data=answer(task(client)))
    done = client.get("/generate")
    assert done.url.path == "/done/generate"
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in done.text
    assert 'name="assignmentId" value="A1"' in done.text and "MTK-OK" in done.text
    (worker,) = _workers(engine)
    assert (worker.source, worker.external_id) == ("mturk", "W1")


@pytest.mark.parametrize(
    "query, message",
    [
        ("workerId=W1", "no assignmentId"),
        ("workerId=W1&assignmentId=A&turkSubmitTo=https%3A%2F%2Fevil.example", "turkSubmitTo"),
        ("PROLIFIC_PID=%3Cscript%3E", "invalid PROLIFIC_PID"),
        ("", "no participant id"),
    ],
)
def test_bad_entry_links_get_a_clear_400(site, engine, query: str, message: str) -> None:  # type: ignore[no-untyped-def]
    r = client_for(site).get(f"/start/generate?{query}")
    assert r.status_code == 400 and message in r.text
    assert "<script>" not in r.text
    assert _workers(engine) == []


def test_invite_tokens(site, engine) -> None:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        s.add(InviteToken(token="invite-abc-123", label="lab", roles=["generate"]))
        s.commit()
    assert client_for(site).get("/start/generate?token=wrong-token").status_code == 403
    client = client_for(site)
    csrf = enter(client, "token=invite-abc-123")
    assert begin(client, csrf).status_code == 303
    # the same link later is the same worker; the role list keeps them out of validation
    again = client_for(site)
    again.get("/start/generate?token=invite-abc-123")
    (worker,) = _workers(engine)
    assert worker.source == "invite" and worker.roles == ["generate"]
    with Session(engine) as s:
        token = s.exec(select(InviteToken)).one()
        assert token.worker_id == worker.id
    assert client_for(site).get("/start/validate?token=invite-abc-123").status_code in (403, 404)


def test_blocked_worker_sees_the_screenout_page(site, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    set_study(db_url, screenout_code="SCR-1")
    with Session(engine) as s:
        s.add(Worker(source="prolific", external_id="bad", blocked=True))
        s.commit()
    r = client_for(site).get("/start/generate?PROLIFIC_PID=bad&SESSION_ID=x")
    assert r.status_code == 403 and "SCR-1" in r.text and "cc=SCR-1" in r.text
    page = client_for(site).get("/screenout")
    assert page.status_code == 200 and "SCR-1" in page.text


def test_one_generation_batch_per_day(site, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    set_study(db_url, generate_batch_size=1, completion_code="DONE-1")
    client = client_for(site)
    csrf = start_prolific(client, "daily")
    client.post("/generate", data=answer(task(client)))
    done = client.get("/done/generate")
    assert "DONE-1" in done.text and "cc=DONE-1" in done.text
    r = begin(client, csrf)
    with Session(engine) as s:
        (batch,) = s.exec(select(Batch)).all()
    reset = f"{batch.created_at + timedelta(hours=24):%Y-%m-%d %H:%M} UTC"
    assert r.status_code == 409 and "caption-writing batches" in r.text and reset in r.text
    assert "batch(es)" not in r.text and " generate " not in r.text
    # The same person on a new platform session is told at the link, before any consent.
    again = client_for(site)
    r = again.get("/start/generate?PROLIFIC_PID=daily&STUDY_ID=study1&SESSION_ID=s2")
    assert r.status_code == 409 and reset in r.text and "consent" not in r.url.path
    # the limit is configurable
    set_study(db_url, generate_batches_per_day=2)
    assert begin(client, csrf).status_code == 303


def test_batch_time_limit_ends_the_batch(site, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from vsr_core.types import utcnow

    client = client_for(site)
    start_prolific(client, "slow")
    client.post("/generate", data=answer(task(client)))
    task(client)  # a second pair is leased
    with Session(engine) as s:
        batch = s.exec(select(Batch)).one()
        batch.deadline = utcnow() - timedelta(seconds=1)
        s.add(batch)
        s.commit()
    r = client.get("/generate", follow_redirects=False)
    assert r.headers["location"] == "/done/generate"
    with Session(engine) as s:
        code = load_study_config(s, 1).completion_code  # the study's own random code
    assert re.fullmatch(r"[A-Z0-9]{12}", code) and code in client.get("/done/generate").text
    with Session(engine) as s:
        batch = s.exec(select(Batch)).one()
        assert batch.status == "completed" and batch.completion_code == code
        statuses = sorted(p.status for p in s.exec(select(ImagePair)))
        # the finished pair stays annotated; the unfinished lease went back to the pool
        assert statuses.count("annotated") == 1 and "leased" not in statuses


def test_empty_pool_asks_the_worker_to_return(db_url: str, tmp_path: Path) -> None:
    app = make_app(db_url, tmp_path)
    client = client_for(app)
    csrf = enter(client, "PROLIFIC_PID=nobody-home&STUDY_ID=study1&SESSION_ID=s1")
    page = begin(client, csrf)
    assert page.status_code == 200 and "No work available" in page.text
    assert "return" in page.text and "completion-code" not in page.text
    with Session(app.state.engine) as s:
        assert s.exec(select(Batch)).all() == []  # nothing made that reads as returned


def test_unknown_kind_and_error_pages(site) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    r = client.get("/start/nonsense?PROLIFIC_PID=x")
    assert r.status_code == 404 and "no such task" in r.text and "Traceback" not in r.text
    r = client.get("/api/generate/task")
    assert r.status_code == 401 and r.json()["detail"].startswith("We do not know who you are")


def test_time_running_out_with_nothing_done_gives_no_code(site, engine) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from vsr_core.types import utcnow

    client = client_for(site)
    start_prolific(client, "idle")
    task(client)
    with Session(engine) as s:
        batch = s.exec(select(Batch)).one()
        batch.deadline = utcnow() - timedelta(seconds=1)
        s.add(batch)
        s.commit()
    page = client.get("/generate")
    assert page.url.path == "/done/generate"
    assert "time for this batch ran out" in page.text and "completion-code" not in page.text
    with Session(engine) as s:
        assert s.exec(select(Batch)).one().status == "expired"
        assert {p.status for p in s.exec(select(ImagePair))} == {"available"}


def test_a_worker_blocked_mid_batch_is_stopped(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    start_prolific(client, "tobeblocked")
    fields = task(client)
    with Session(engine) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "tobeblocked")).one()
        worker.blocked = True
        s.add(worker)
        s.commit()
        screenout = load_study_config(s, 1).screenout_code  # the study's own random code
    r = client.post("/generate", data=answer(fields))
    assert r.status_code == 403 and screenout in r.text
    assert client.get("/api/generate/task").status_code == 403
    with Session(engine) as s:
        from vsr_core.models import Annotation

        assert s.exec(select(Annotation)).all() == []


def test_abandoned_batches_are_closed_lazily(site, engine) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from vsr_core.types import utcnow

    gone = client_for(site)
    start_prolific(gone, "left-the-study")
    gone_fields = task(gone)
    gone.post("/generate", data=answer(gone_fields))
    task(gone)  # holds a second lease, then never comes back
    with Session(engine) as s:
        batch = s.exec(select(Batch)).one()
        batch.deadline = utcnow() - timedelta(seconds=1)
        s.add(batch)
        s.commit()
    other = client_for(site)
    start_prolific(other, "still-here")
    task(other)
    with Session(engine) as s:
        rows = {b.worker_id: b for b in s.exec(select(Batch))}
        statuses = sorted(b.status for b in rows.values())
        assert statuses == ["completed", "open"]  # the one with work done earns its code
        assert sum(1 for a in s.exec(select(Assignment)) if a.status == "active") == 1


def test_the_same_link_after_finishing_shows_the_code_again(site, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    set_study(db_url, generate_batch_size=1, generate_batches_per_day=0, completion_code="AGAIN")
    client = client_for(site)
    start_prolific(client, "forgetful", "sess-1")
    client.post("/generate", data=answer(task(client)))
    fresh = client_for(site)  # another browser, same Prolific submission link
    r = fresh.get(
        "/start/generate?PROLIFIC_PID=forgetful&STUDY_ID=study1&SESSION_ID=sess-1",
        follow_redirects=False,
    )
    assert r.headers["location"] == "/done/generate"
    assert "AGAIN" in fresh.get("/done/generate").text
    # a new Prolific submission (new SESSION_ID) starts over at the consent form
    r = fresh.get(
        "/start/generate?PROLIFIC_PID=forgetful&STUDY_ID=study1&SESSION_ID=sess-2",
        follow_redirects=False,
    )
    assert r.headers["location"] == "/consent/generate"


def test_limit_is_checked_before_consent_and_named_on_done_page(site, engine, db_url) -> None:  # type: ignore[no-untyped-def]
    """An invited annotator who used the day's writing batch: the done page says when the
    next one can start instead of offering "Check for more work", and the link refuses at
    once (the consent and instructions would lead nowhere)."""
    set_study(db_url, generate_batch_size=1)
    with Session(engine) as s:
        s.add(InviteToken(token="invite-limit-1", label="lab", roles=["generate"]))
        s.commit()
    client = client_for(site)
    csrf = enter(client, "token=invite-limit-1")
    assert begin(client, csrf).status_code == 303
    client.post("/generate", data=answer(task(client)))
    done = client.get("/done/generate")
    assert "You can start the next one at" in done.text and 'id="more-work"' not in done.text
    r = client_for(site).get("/start/generate?token=invite-limit-1", follow_redirects=False)
    assert r.status_code == 409 and "caption-writing" in r.text
    set_study(db_url, generate_batches_per_day=0)
    done = client.get("/done/generate")
    assert 'id="more-work"' in done.text and "You can start the next one" not in done.text
    r = client_for(site).get("/start/generate?token=invite-limit-1", follow_redirects=False)
    assert r.status_code == 303


def test_checking_for_more_work_with_none_left_creates_no_batch(site, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    set_study(db_url, generate_batches_per_day=0)
    with Session(engine) as s:
        s.add(InviteToken(token="invite-more-1", label="lab", roles=["generate"]))
        s.commit()
    client = client_for(site)
    csrf = enter(client, "token=invite-more-1")
    assert begin(client, csrf).status_code == 303
    while client.get("/generate", follow_redirects=False).status_code == 200:
        client.post("/generate", data=answer(task(client)))
    with Session(engine) as s:
        batches_before = [(b.id, b.status) for b in s.exec(select(Batch))]
    assert [status for _, status in batches_before] == ["completed"]
    for _ in range(3):
        r = begin(client, csrf)
        assert r.status_code == 200 and "every pair available right now" in r.text
        assert 'id="completion-code"' in r.text and 'id="more-work"' in r.text
    with Session(engine) as s:
        assert [(b.id, b.status) for b in s.exec(select(Batch))] == batches_before
