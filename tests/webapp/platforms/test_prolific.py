"""ProlificPlatform against the local fake Prolific server (no network), including the
documented harmful behaviour: a pay request pays again each time it is sent, and a request
may be carried out although its answer is lost (slow, 5xx after the write)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fake_prolific import TOKEN, State
from webapp.platforms.base import PlatformError
from webapp.platforms.prolific import ProlificPlatform, rejection_category, rejection_message

SETTINGS = {
    "name": "Spatial captions",
    "external_study_url": "https://vsr.example/start/generate?PROLIFIC_PID={{%PROLIFIC_PID%}}",
    "total_available_places": 5,
    "reward": 150,
    "estimated_completion_time": 10,
    "completion_codes": [{"code": "C0DE", "code_type": "COMPLETED", "actions": []}],
}


def client(url: str, **kw: Any) -> ProlificPlatform:
    return ProlificPlatform(base_url=url, token=TOKEN, sleep=lambda s: None, **kw)


def test_draft_publish_pause_sync_approve_reject_bonus(fake: tuple[str, State]) -> None:
    url, state = fake
    calls: list[tuple[Any, ...]] = []
    p = client(url, log=lambda *a: calls.append(a))
    sid = p.create_draft(SETTINGS, "vsr-m1")
    assert p.find_draft("vsr-m1") == sid and p.find_draft("vsr-m2") is None
    assert "vsr-m1" in state.studies[sid]["internal_name"]
    p.publish(sid)
    assert state.studies[sid]["status"] == "ACTIVE"
    p.pause(sid)
    assert state.studies[sid]["status"] == "PAUSED"
    state.add_submission(sid, "s1", "p1", "AWAITING REVIEW")
    state.add_submission(sid, "s2", "p2", "AWAITING REVIEW")
    state.add_submission(sid, "s3", "p3", "RETURNED")
    subs = p.sync_submissions(sid)
    assert {(s.external_id, s.status) for s in subs} == {
        ("s1", "AWAITING REVIEW"),
        ("s2", "AWAITING REVIEW"),
        ("s3", "RETURNED"),
    }
    p.approve("s1", "k1")
    p.reject("s2", "failed gold items", "k2")
    assert p.submission_status("s1") == "APPROVED"
    assert p.submission_status("s2") == "REJECTED"
    pays_before_record: list[int] = []

    def record(note: dict[str, Any]) -> None:
        pays_before_record.append(state.count("POST", "/pay/"))
        assert note["setup"]["id"]

    p.bonus(sid, "s1", "p1", 125, "kept captions", "k3", record)
    assert pays_before_record == [0]  # the set-up id is on record before pay is sent
    assert state.paid == [("p1", 1.25)]
    assert state.count("POST", "/api/v1/submissions/bonus-payments/") == 1
    assert state.count("POST", "/api/v1/bulk-bonus-payments/") == 1
    assert all(TOKEN not in repr(c) for c in calls)  # the log never holds the token


def test_error_answer_is_one_line(fake: tuple[str, State]) -> None:
    url, state = fake
    p = client(url)
    with pytest.raises(PlatformError) as err:
        p.create_draft({"name": "x"}, "m")
    assert "HTTP 400" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(PlatformError, match="HTTP 401"):
        ProlificPlatform(base_url=url, token="wrong").publish("x")


def test_429_honours_retry_after_then_succeeds(fake: tuple[str, State]) -> None:
    url, state = fake
    waits: list[float] = []
    p = ProlificPlatform(base_url=url, token=TOKEN, sleep=waits.append)
    state.rate_limit = 2
    assert p.create_draft(SETTINGS, "m")
    assert waits == [0.0, 0.0]  # the fake's Retry-After: 0
    # 429 is answered before processing: the POST was re-sent, and one study exists.
    assert state.count("POST", "/studies/") == 3 and len(state.studies) == 1


def test_pay_twice_pays_twice(fake: tuple[str, State]) -> None:
    """The fake follows the documented harm: pay is not idempotent."""
    url, state = fake
    p = client(url)
    sid = p.create_draft(SETTINGS, "m")
    state.add_submission(sid, "s1", "p1", "APPROVED")
    setup = p._call(
        "POST", "/submissions/bonus-payments/", {"study_id": sid, "csv_bonuses": "s1,4.00"}
    )
    assert setup["amount"] == 400 and state.paid == []  # a set-up pays nothing
    p._call("POST", f"/bulk-bonus-payments/{setup['id']}/pay/")
    p._call("POST", f"/bulk-bonus-payments/{setup['id']}/pay/")
    assert state.paid == [("p1", 4.0), ("p1", 4.0)]
    with pytest.raises(PlatformError, match="HTTP 400"):  # not in the study
        p._call(
            "POST", "/submissions/bonus-payments/", {"study_id": sid, "csv_bonuses": "nobody,1.00"}
        )


def test_a_post_whose_answer_is_lost_is_never_re_sent(fake: tuple[str, State]) -> None:
    """Slow (carried out, answered after the client gave up) and 5xx after the write: one
    request each, reported as maybe sent; a GET is retried."""
    url, state = fake
    p = ProlificPlatform(base_url=url, token=TOKEN, timeout=0.2, retries=3, sleep=lambda s: None)
    state.slow = 0.6
    with pytest.raises(PlatformError, match="outcome unknown") as err:
        p.create_draft(SETTINGS, "vsr-slow")
    assert err.value.maybe_sent
    assert state.count("POST", "/studies/") == 1 and len(state.studies) == 1
    with pytest.raises(PlatformError, match="timeout"):
        p.find_draft("vsr-slow")
    assert state.count("GET", "/studies/") == 4  # a GET changes nothing: retried
    state.slow = 0.0
    assert p.find_draft("vsr-slow") == next(iter(state.studies))
    sid = next(iter(state.studies))
    state.add_submission(sid, "s1", "p1", "AWAITING REVIEW")
    state.fail_after = 1
    with pytest.raises(PlatformError, match="HTTP 502") as err:
        p.approve("s1", "k")
    assert err.value.maybe_sent and state.submissions["s1"]["status"] == "APPROVED"
    assert state.count("POST", "/submissions/s1/transition/") == 1
    state.fail_before = 1
    with pytest.raises(PlatformError, match="HTTP 500") as err:
        p.reject("s1", "x", "k")
    assert err.value.maybe_sent  # the client cannot tell before from after
    assert state.count("POST", "/submissions/s1/transition/") == 2


def test_missing_token_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROLIFIC_API_TOKEN", raising=False)
    with pytest.raises(PlatformError, match="PROLIFIC_API_TOKEN"):
        ProlificPlatform(base_url="http://127.0.0.1:9")


def test_rejection_has_a_category_and_100_characters(fake: tuple[str, State]) -> None:
    url, state = fake
    p = client(url)
    sid = p.create_draft(SETTINGS, "m")
    for sub in ("s1", "s2", "s3"):
        state.add_submission(sid, sub, f"p{sub}", "AWAITING REVIEW")
    # What Prolific refuses (the fake follows its documented rules): a short message.
    with pytest.raises(PlatformError, match="HTTP 400"):
        p._call(
            "POST",
            "/submissions/s1/transition/",
            {"action": "REJECT", "message": "low effort", "rejection_category": "OTHER"},
        )
    p.reject("s1", "answers flagged as too fast", "k1")
    p.reject("s2", "gold accuracy 40% below 70%", "k2")
    p.reject("s3", "0 items done, fewer than the 1 required", "k3")
    assert [state.submissions[s]["status"] for s in ("s1", "s2", "s3")] == ["REJECTED"] * 3
    assert rejection_category("answers flagged as too fast") == "TOO_QUICKLY"
    assert rejection_category("gold accuracy 40% below 70%") == "FAILED_CHECK"
    assert rejection_category("0 items done") == "LOW_EFFORT"
    assert len(rejection_message("x")) >= 100
