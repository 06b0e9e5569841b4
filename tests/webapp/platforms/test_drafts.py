"""From study settings to a draft and a published study: the draft's body on the fake
Prolific and in CreateHIT (Stubber), the entry URL under /s/<slug>/ for a non-default study,
the effective hourly pay from measured batch times and the refusal below the minimum."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber
from sqlmodel import Session

from tests.support.fake_prolific import TOKEN, State
from vsr_core.models import Batch, BatchStatus, Worker
from vsr_core.studies import create_study, default_study
from vsr_core.types import utcnow
from webapp.platforms import drafts
from webapp.platforms.base import PlatformError
from webapp.platforms.mturk import SANDBOX, MTurkPlatform, external_question
from webapp.platforms.prolific import ProlificPlatform

ZH_FILE = Path(__file__).resolve().parents[3] / "studies" / "vsr-zh.toml"
SITE = "https://vsr.example.org"


def _batches(session: Session, study_id: int, minutes: list[float], source: str) -> None:
    for i, m in enumerate(minutes):
        w = Worker(source=source, external_id=f"{source}{i}")
        session.add(w)
        session.commit()
        start = utcnow() - timedelta(hours=2)
        session.add(Batch(study_id=study_id, worker_id=w.id or 0, kind="generate",
                          status=BatchStatus.completed, size=10, created_at=start,
                          deadline=start + timedelta(hours=1),
                          finished_at=start + timedelta(minutes=m)))
    session.commit()


def test_entry_urls() -> None:
    class S:
        slug, is_default = "vsr-zh", False

    url = drafts.entry_url(SITE + "/", S(), "generate", "prolific")  # type: ignore[arg-type]
    assert url == (f"{SITE}/s/vsr-zh/start/generate?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
                   "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}")
    S.is_default = True
    assert drafts.entry_url(SITE, S(), "validate", "mturk") == (  # type: ignore[arg-type]
        f"{SITE}/start/validate")


def test_prolific_draft_pay_and_publish(session: Session, fake: tuple[str, State]) -> None:
    url, state = fake
    study = create_study(session, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
    # Real workers took 10, 20 and 30 minutes; the imported worker's hour is not a measurement.
    _batches(session, study.id or 0, [10, 20, 30], "prolific")
    _batches(session, study.id or 0, [60], "imported")
    p = ProlificPlatform(base_url=url, token=TOKEN)
    settings = drafts.new_settings(session, study, "prolific", "generate", reward_cents=150,
                                   places=20, base_url=SITE)
    row = drafts.create(session, p, study, settings)
    sent = state.studies[row.external_id]
    assert sent["external_study_url"].startswith(f"{SITE}/s/vsr-zh/start/generate?")
    assert "PROLIFIC_PID={{%PROLIFIC_PID%}}" in sent["external_study_url"]
    assert sent["total_available_places"] == 20 and sent["reward"] == 150
    assert sent["estimated_completion_time"] == 20  # the measured median
    assert sent["prolific_id_option"] == "url_parameters"
    assert [c["code_type"] for c in sent["completion_codes"]] == ["COMPLETED", "NO_CONSENT"]
    assert row.state == "draft" and sent["status"] == "UNPUBLISHED"

    pay = drafts.effective_pay(session, row)
    assert (pay.per_hour_cents, pay.measured_batches, pay.minimum_cents) == (450, 3, 600)
    assert pay.line() == ("effective pay £4.50/h (£1.50 for 20.0 min, median of 3 measured "
                          "batches); platform minimum £6.00/h")
    with pytest.raises(PlatformError, match=r"^refused: effective pay £4.50/h"):
        drafts.publish(session, p, row)
    assert sent["status"] == "UNPUBLISHED" and row.state == "draft"

    row.settings = {**row.settings, "reward_cents": 250}
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


def test_mturk_hit_from_settings(session: Session) -> None:
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=SANDBOX,
                          aws_access_key_id="x", aws_secret_access_key="y")
    study = default_study(session)
    quals = [{"QualificationTypeId": "000000000000000000L0",
              "Comparator": "GreaterThanOrEqualTo", "IntegerValues": [95]}]
    settings = drafts.new_settings(session, study, "mturk", "validate", reward_cents=200,
                                   places=9, base_url=SITE, qualifications=quals)
    with Stubber(client) as stub:
        stub.add_response("create_hit", {"HIT": {"HITId": "H9"}}, {
            "Title": ANY, "Description": ANY, "Keywords": ANY, "Reward": "2.00",
            "MaxAssignments": 9, "LifetimeInSeconds": ANY,
            "AssignmentDurationInSeconds": 90 * 60, "AutoApprovalDelayInSeconds": ANY,
            "Question": external_question(f"{SITE}/start/validate"),
            "QualificationRequirements": quals})
        row = drafts.create(session, MTurkPlatform(client=client), study, settings)
        stub.assert_no_pending_responses()
    assert (row.external_id, row.state, row.study_id) == ("H9", "published", study.id)
    pay = drafts.effective_pay(session, row)  # no batches: the estimate (the 90 min limit)
    assert pay.measured_batches == 0 and pay.minimum_cents is None and not pay.below_minimum


def test_bad_settings_are_refused(session: Session) -> None:
    study = default_study(session)
    with pytest.raises(PlatformError, match="kind must be one of generate, validate"):
        drafts.new_settings(session, study, "prolific", "nope", reward_cents=1, places=1,
                            base_url=SITE)
