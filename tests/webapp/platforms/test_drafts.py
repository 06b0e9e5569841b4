"""From study settings to a draft and a published study: the draft's body on the fake
Prolific and in CreateHIT (Stubber), the entry URL under /s/<slug>/ for a non-default study,
the effective hourly pay from measured batch times and the refusal below the minimum."""

from __future__ import annotations

import re
from datetime import timedelta
from itertools import count
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber
from sqlmodel import Session, select

from tests.support.fake_prolific import TOKEN, State
from vsr_core.audit import Actor
from vsr_core.models import (
    Assignment,
    AuditEvent,
    AuditKind,
    Batch,
    BatchStatus,
    InviteToken,
    LeaseStatus,
    PlatformCall,
    PlatformStudy,
    PlatformSubmission,
    Worker,
)
from vsr_core.studies.settings import save_study_config
from vsr_core.studies.store import create_study, default_study
from vsr_core.types import utcnow
from webapp.platforms import drafts
from webapp.platforms.base import PlatformError
from webapp.platforms.engine import CallLog
from webapp.platforms.mturk import SANDBOX, MTurkPlatform, external_question
from webapp.platforms.prolific import ProlificPlatform
from webapp.platforms.settlement import SESSION_KEY

ZH_FILE = Path(__file__).resolve().parents[3] / "studies" / "vsr-zh.toml"
SITE = "https://vsr.example.org"
SERIAL = count(1)


def _pilot(session: Session, study_id: int, platform: str) -> int:
    """An earlier platform study of this study whose submissions the measured batches are."""
    row = session.exec(
        select(PlatformStudy).where(
            PlatformStudy.study_id == study_id, PlatformStudy.external_id == f"pilot-{platform}"
        )
    ).first()
    if row is None:
        row = PlatformStudy(
            study_id=study_id, platform=platform, external_id=f"pilot-{platform}", state="paused"
        )
        session.add(row)
        session.commit()
    return row.id or 0


def _batches(
    session: Session,
    study_id: int,
    seconds_per_item: list[float],
    source: str,
    size: int,
    done: int | None = None,
    kind: str = "generate",
    flagged: bool = False,
    tied: bool = True,
    done_count: int | None = None,
) -> None:
    """One completed batch per new worker, ``done`` of ``size`` items answered (all by
    default; a lease each) at these seconds per item. ``tied``: the batch's session is a
    synced submission of the worker (an invited worker: made by an invite of the study).
    ``done_count``: the batch's own counter, when it says something else."""
    for s in seconds_per_item:
        w = Worker(source=source, external_id=f"{source}{next(SERIAL)}", flagged=flagged)
        session.add(w)
        session.commit()
        n = size if done is None else done
        start = utcnow() - timedelta(hours=3)
        key = SESSION_KEY.get(source)
        entry = {key: f"S{w.id}"} if key else {}
        if tied and key:
            session.add(
                PlatformSubmission(
                    platform_study_id=_pilot(session, study_id, source),
                    platform=source,
                    external_id=f"S{w.id}",
                    worker_external_id=w.external_id,
                    status="APPROVED",
                    worker_id=w.id,
                )
            )
        elif tied and source == "invite":
            session.add(InviteToken(token=f"t{w.id}", study_id=study_id, worker_id=w.id))
        batch = Batch(
            study_id=study_id,
            worker_id=w.id or 0,
            kind=kind,
            status=BatchStatus.completed,
            size=size,
            done_count=n if done_count is None else done_count,
            created_at=start,
            deadline=start + timedelta(hours=2),
            finished_at=start + timedelta(seconds=s * n),
            entry=entry,
        )
        session.add(batch)
        session.commit()
        for i in range(n):
            session.add(
                Assignment(
                    batch_id=batch.id or 0,
                    worker_id=w.id or 0,
                    kind=kind,
                    status=LeaseStatus.done,
                    leased_at=start,
                    lease_expires_at=start + timedelta(hours=2),
                    finished_at=start + timedelta(seconds=s * (i + 1)),
                )
            )
    session.commit()


def test_entry_urls() -> None:
    class S:
        slug, is_default = "vsr-zh", False

    url = drafts.entry_url(SITE + "/", S(), "generate", "prolific")  # type: ignore[arg-type]
    assert url == (
        f"{SITE}/s/vsr-zh/start/generate?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    S.is_default = True
    assert drafts.entry_url(SITE, S(), "validate", "mturk") == (  # type: ignore[arg-type]
        f"{SITE}/start/validate"
    )


def test_prolific_draft_pay_and_publish(session: Session, fake: tuple[str, State]) -> None:
    url, state = fake
    study = create_study(session, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
    save_study_config(session, {"generate_batch_size": 12}, study.id or 0)
    # Three real workers measured: 6, 8 and 10 s per item on full 12-item batches. Imported
    # and flagged workers, and batches tied to no submission of ours, are no measurement.
    _batches(session, study.id or 0, [6, 8, 10], "prolific", 12)
    _batches(session, study.id or 0, [60], "imported", 12)
    _batches(session, study.id or 0, [0.1], "prolific", 12, flagged=True)
    _batches(session, study.id or 0, [0.1, 0.1], "prolific", 12, tied=False)
    p = ProlificPlatform(base_url=url, token=TOKEN)
    settings = drafts.new_settings(
        session, study, "prolific", "generate", reward_cents=15, places=20, base_url=SITE
    )
    row = drafts.create(session, p, study, settings)
    sent = state.studies[row.external_id]
    assert sent["external_study_url"].startswith(f"{SITE}/s/vsr-zh/start/generate?")
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in sent["external_study_url"]
    assert sent["total_available_places"] == 20 and sent["reward"] == 15
    assert sent["prolific_id_option"] == "url_parameters"
    assert [c["code_type"] for c in sent["completion_codes"]] == [
        "COMPLETED",
        "NO_CONSENT",
        "OTHER",
    ]
    # The third: a failed qualification check, a no-pay return (docs/platforms.md).
    assert sent["completion_codes"][2] == {
        "code": row.settings["qualification_code"],
        "code_type": "OTHER",
        "actions": [{"action": "REQUEST_RETURN"}],
    }
    assert row.settings["marker"] in sent["internal_name"]
    assert row.state == "draft" and sent["status"] == "UNPUBLISHED"

    pay = drafts.effective_pay(session, row)
    assert pay.unknown and pay.measured.n == 3
    with pytest.raises(
        PlatformError,
        match=r"^refused: effective pay unknown .*3 of the 5 "
        r"workers needed measured.*state the expected",
    ):
        drafts.publish(session, p, row)
    _batches(session, study.id or 0, [12, 14], "prolific", 12)  # five workers now
    pay = drafts.effective_pay(session, row)
    assert (pay.per_hour_cents, pay.measured.n, pay.minimum_cents) == (450, 5, 600)
    assert pay.line() == (
        "effective pay £4.50/h (£0.15 for 2.0 min; 10.0 s per item x 12 items, median of 5 "
        "workers on the items they answered, middle half 8.0-12.0 s); platform minimum £6.00/h"
    )
    with pytest.raises(PlatformError, match=r"^refused: effective pay £4.50/h"):
        drafts.publish(session, p, row)
    assert sent["status"] == "UNPUBLISHED" and row.state == "draft"

    row.settings = {**row.settings, "reward_cents": 25}
    session.add(row)
    session.commit()
    assert drafts.publish(session, p, row).per_hour_cents == 750
    assert sent["status"] == "ACTIVE" and row.state == "published"
    with pytest.raises(PlatformError, match=r"^cannot publish a published study \(it can: pause"):
        drafts.publish(session, p, row)
    drafts.pause(session, p, row)
    assert sent["status"] == "PAUSED" and row.state == "paused"
    with pytest.raises(PlatformError, match=r"^cannot pause a paused study \(it can: resume\)$"):
        drafts.pause(session, p, row)
    drafts.resume(session, p, row)  # START on Prolific: PUBLISH would be refused there
    assert sent["status"] == "ACTIVE" and row.state == "published"
    # The fake refuses what Prolific refuses: a paused study is not published again.
    sent["status"] = "PAUSED"
    with pytest.raises(PlatformError, match="Cannot PUBLISH a study that is PAUSED"):
        p.publish(row.external_id)


def test_the_2516_pounds_an_hour_case_is_refused(session: Session, fake: tuple[str, State]) -> None:
    """£1.50 for a 500-item, 90-minute validation batch: 12 batches ended after one item in
    2.15 s each made the old median-of-batches guard show £2516.97/h and publish. Measured
    on the one item each answered: 2.15 s x 500 items, £5.03/h, refused."""
    url, state = fake
    study = default_study(session)
    assert drafts.batch_items(session, study.id or 0, "validate") == 500
    _batches(session, study.id or 0, [2.14544] * 12, "prolific", 500, done=1, kind="validate")
    old_guard = round(150 * 60 / (2.14544 / 60))  # the reward over the median batch time
    assert old_guard == 251697
    p = ProlificPlatform(base_url=url, token=TOKEN)
    settings = drafts.new_settings(
        session, study, "prolific", "validate", reward_cents=150, places=5, base_url=SITE
    )
    row = drafts.create(session, p, study, settings)
    assert drafts.effective_pay(session, row).per_hour_cents == 503
    with pytest.raises(PlatformError, match=r"^refused: effective pay £5.03/h"):
        drafts.publish(session, p, row)
    assert state.studies[row.external_id]["status"] == "UNPUBLISHED"


def test_pay_guard_on_work_actually_done(session: Session, fake: tuple[str, State]) -> None:
    """£1.50 for a 500-item validation study. Six workers on 8-item batches (cut to what the
    pool held) at 0.044 s per item, tied to no submission, made the old guard show £217/h;
    a stated 10 min then beat a measured 90 min. Now: only batches of real submissions or
    invited workers are measured, per item answered; a shorter stated duration needs an
    owner's override, which is audited and shown in the pay line."""
    url, state = fake
    study = default_study(session)
    sid = study.id or 0
    _batches(session, sid, [0.044] * 6, "prolific", 8, kind="validate", tied=False)
    _batches(session, sid, [0.01], "invite", 8, kind="validate", tied=False)
    p = ProlificPlatform(base_url=url, token=TOKEN)
    settings = drafts.new_settings(
        session, study, "prolific", "validate", reward_cents=150, places=5, base_url=SITE
    )
    row = drafts.create(session, p, study, settings)
    pay = drafts.effective_pay(session, row)
    assert pay.unknown and pay.measured.n == 0
    with pytest.raises(PlatformError, match="effective pay unknown"):
        drafts.publish(session, p, row)
    # Five real workers: three Prolific submissions, two invited; cut 6-item batches, and
    # one whose counter says 6 done while it answered 3 (measured on the 3).
    _batches(session, sid, [10.8] * 3, "prolific", 6, kind="validate")
    _batches(session, sid, [10.8], "invite", 6, kind="validate")
    _batches(session, sid, [10.8], "invite", 6, done=3, done_count=6, kind="validate")
    pay = drafts.effective_pay(session, row)
    assert (pay.measured.n, round(pay.minutes or 0), pay.per_hour_cents) == (5, 90, 100)
    with pytest.raises(PlatformError, match=r"^refused: effective pay £1.00/h"):
        drafts.publish(session, p, row)
    # A stated duration shorter than the measured one is not used on its own word.
    row.settings = {**row.settings, "stated_minutes": 10}
    pay = drafts.effective_pay(session, row)
    assert pay.per_hour_cents == 100
    assert "the stated 10 min is shorter and needs an owner's override" in pay.line()
    with pytest.raises(PlatformError, match=r"^refused: effective pay £1.00/h"):
        drafts.publish(session, p, row)
    assert state.studies[row.external_id]["status"] == "UNPUBLISHED"
    owner = Actor(name="owner@lab", via="cli")
    with pytest.raises(PlatformError, match="nothing to override"):
        drafts.override_minutes(session, row, 95, "longer than measured", owner)
    with pytest.raises(PlatformError, match="needs a reason"):
        drafts.override_minutes(session, row, 10, "  ", owner)
    pay = drafts.override_minutes(session, row, 10, "pilot batches were cut short", owner)
    assert pay.per_hour_cents == 900 and pay.override is not None
    assert pay.line().startswith(
        "effective pay £9.00/h (£1.50 for 10.0 min; stated duration, shorter than the "
        "measured 90.0 min (10.8 s per item x 500 items, median of 5 workers"
    )
    assert "overridden by owner owner@lab at " in pay.line()
    assert ": pilot batches were cut short" in pay.line()
    event = session.exec(
        select(AuditEvent).where(AuditEvent.kind == AuditKind.platform_override)
    ).one()
    assert (event.actor, event.study_id, event.target) == (
        "owner@lab",
        sid,
        f"platform study {row.id}",
    )
    assert event.change["after"]["override"]["minutes"] == 10
    assert event.change["measured_minutes"] == 90
    assert drafts.publish(session, p, row, actor=owner).per_hour_cents == 900
    assert state.studies[row.external_id]["status"] == "ACTIVE"


def test_each_platform_study_has_its_own_random_codes(
    session: Session, fake: tuple[str, State]
) -> None:
    url, state = fake
    study = default_study(session)
    p = ProlificPlatform(base_url=url, token=TOKEN)
    rows = [
        drafts.create(
            session,
            p,
            study,
            drafts.new_settings(
                session, study, "prolific", "generate", reward_cents=100, places=1, base_url=SITE
            ),
        )
        for _ in range(3)
    ]
    codes = [r.settings["completion_code"] for r in rows]
    assert len(set(codes)) == 3 and "VSRDONE" not in codes
    assert all(re.fullmatch(r"[A-Z0-9]{12}", c) for c in codes)
    for r in rows:  # set on the platform as the study's COMPLETED code
        sent = state.studies[r.external_id]["completion_codes"]
        assert sent[0] == {
            "code": r.settings["completion_code"],
            "code_type": "COMPLETED",
            "actions": [{"action": "MANUALLY_REVIEW"}],
        }


def test_a_slow_create_leaves_one_draft_on_record(
    session: Session, fake: tuple[str, State]
) -> None:
    """The create is carried out but answered after the client gave up: it is not sent
    again; the draft is found by its marker and recorded (no orphan on Prolific)."""
    url, state = fake
    study = default_study(session)
    p = ProlificPlatform(base_url=url, token=TOKEN, timeout=0.3, sleep=lambda s: None)
    settings = drafts.new_settings(
        session, study, "prolific", "generate", reward_cents=100, places=1, base_url=SITE
    )
    state.slow, state.slow_methods = 0.6, ("POST",)
    row = drafts.create(session, p, study, settings)
    assert state.count("POST", "/studies/") == 1 and len(state.studies) == 1
    assert row.external_id == next(iter(state.studies)) and row.state == "draft"
    assert len(session.exec(select(PlatformStudy)).all()) == 1


def test_a_refused_create_leaves_no_row(session: Session, fake: tuple[str, State]) -> None:
    url, state = fake
    study = default_study(session)
    p = ProlificPlatform(base_url="http://127.0.0.1:9/api/v1", token=TOKEN)  # nothing there
    settings = drafts.new_settings(
        session, study, "prolific", "generate", reward_cents=100, places=1, base_url=SITE
    )
    log = CallLog("prolific")
    p.log = log
    with pytest.raises(PlatformError, match="could not connect"):
        drafts.create(session, p, study, settings, on_row=log.name_study)
    assert session.exec(select(PlatformStudy)).all() == []
    log.save(session)  # the call is kept, naming no platform study (its row is gone)
    assert [c.platform_study_id for c in session.exec(select(PlatformCall))] == [None]


def test_mturk_hit_from_settings(session: Session) -> None:
    client = boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=SANDBOX,
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    study = default_study(session)
    quals = [
        {
            "QualificationTypeId": "000000000000000000L0",
            "Comparator": "GreaterThanOrEqualTo",
            "IntegerValues": [95],
        }
    ]
    settings = drafts.new_settings(
        session,
        study,
        "mturk",
        "validate",
        reward_cents=200,
        places=9,
        base_url=SITE,
        qualifications=quals,
    )
    with Stubber(client) as stub:
        stub.add_response(
            "create_hit",
            {"HIT": {"HITId": "H9"}},
            {
                "Title": ANY,
                "Description": ANY,
                "Keywords": ANY,
                "Reward": "2.00",
                "MaxAssignments": 9,
                "LifetimeInSeconds": ANY,
                "AssignmentDurationInSeconds": 90 * 60,
                "AutoApprovalDelayInSeconds": ANY,
                "Question": external_question(f"{SITE}/start/validate"),
                "QualificationRequirements": quals,
                "UniqueRequestToken": ANY,
                "RequesterAnnotation": ANY,
            },
        )
        row = drafts.create(session, MTurkPlatform(client=client), study, settings)
        stub.assert_no_pending_responses()
    assert (row.external_id, row.state, row.study_id) == ("H9", "published", study.id)
    pay = drafts.effective_pay(session, row)  # no batches, no stated time: unknown
    assert pay.measured.n == 0 and pay.minimum_cents is None and not pay.below_minimum
    assert pay.unknown


def test_bad_settings_are_refused(session: Session) -> None:
    study = default_study(session)
    with pytest.raises(PlatformError, match="kind must be one of generate, validate"):
        drafts.new_settings(
            session, study, "prolific", "nope", reward_cents=1, places=1, base_url=SITE
        )
