"""/admin/platform on the fake Prolific and a real database: create a draft from the study
settings, see the effective pay, publish, sync, plan, preview counts and money, apply only
with the confirmation of the plan as seen (CSRF like every admin form), a second apply sends
nothing, the call log pages, the token is never shown; scoped by the study switcher."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support import platform_work as work
from tests.support.admins import create_owner, own_every_study
from tests.support.fake_prolific import TOKEN, State, running
from tests.webapp.admin.test_admin import PASSWORD, csrf_of, login, make_admin_app
from vsr_core.models import PlatformCall, PlatformStudy
from vsr_core.studies.store import create_study

ZH_FILE = Path(__file__).resolve().parents[3] / "studies" / "vsr-zh.toml"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, State]]:
    with running() as (url, state):
        monkeypatch.setenv("PROLIFIC_API_TOKEN", TOKEN)
        monkeypatch.setenv("PROLIFIC_BASE_URL", url)
        yield url, state


@pytest.fixture
def admin(db_url: str, engine: Engine, tmp_path: Path) -> tuple[TestClient, str]:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    client = TestClient(make_admin_app(db_url, engine, tmp_path, base_url="http://testserver"))
    return client, login(client)


def _post(client: TestClient, url: str, **data: Any) -> str:
    r = client.post(url, data=data, follow_redirects=False)
    assert r.status_code == 303, r.text
    return str(r.headers["location"])


def _workers(engine: Engine, study_ext: str) -> None:
    """p1 wrote two kept captions in the batch its session s1 opened, p2 nothing."""
    with Session(engine) as s:
        p1 = work.worker(s, "p1")
        work.worker(s, "p2")
        b = work.batch(s, p1, work.prolific_entry(study_ext, "s1"))
        work.captions(s, b, work.scene(s), kept=2)


def test_from_draft_to_paid(
    admin: tuple[TestClient, str], engine: Engine, fake: tuple[str, State]
) -> None:
    client, token = admin
    _, state = fake
    assert "None yet: create one below." in client.get("/admin/platform").text
    form = {"platform": "prolific", "kind": "generate", "reward_cents": "900", "places": "2"}
    r = client.post("/admin/platform/create", data=form, follow_redirects=False)
    assert r.status_code == 403 and not state.studies  # no CSRF token, nothing sent
    where = _post(client, "/admin/platform/create", csrf_token=token, **form)
    ps = int(where.split("ps=")[1])
    (sent,) = state.studies.values()
    assert sent["external_study_url"].startswith("http://testserver/start/generate?PROLIFIC_PID=")
    page = client.get(where).text
    assert (
        "effective pay unknown (£9.00 for 200 items; 0 of the 5 workers needed "
        "measured); platform minimum £6.00/h" in page
    )
    assert (
        "Not done: refused: effective pay unknown"
        in client.get(_post(client, f"/admin/platform/{ps}/publish", csrf_token=token)).text
    )
    assert sent["status"] == "UNPUBLISHED"
    where = _post(client, "/admin/platform/create", csrf_token=token, expected_minutes="80", **form)
    ps = int(where.split("ps=")[1])
    sent = state.studies[client.get(where).text.split("prolific study ")[1].split(" ")[0]]
    page = client.get(where).text
    assert (
        "effective pay £6.75/h (£9.00 for 80.0 min; stated duration; 0 of the 5 workers "
        "needed measured); platform minimum £6.00/h" in page
    )
    buttons = re.findall(r'name="go" value="(\w+)"', page)
    assert buttons == ["publish", "sync"]  # a draft can be published, not paused
    _post(client, f"/admin/platform/{ps}/publish", csrf_token=token)
    assert sent["status"] == "ACTIVE"
    page = client.get(where).text
    assert re.findall(r'name="go" value="(\w+)"', page) == ["pause", "sync"]
    assert (
        "Not done: cannot publish a published study"
        in client.get(_post(client, f"/admin/platform/{ps}/publish", csrf_token=token)).text
    )
    _post(client, f"/admin/platform/{ps}/pause", csrf_token=token)
    assert sent["status"] == "PAUSED"
    assert re.findall(r'name="go" value="(\w+)"', client.get(where).text) == ["resume", "sync"]
    _post(client, f"/admin/platform/{ps}/resume", csrf_token=token)
    assert sent["status"] == "ACTIVE"

    _workers(engine, sent["id"])
    for sub, pid in (("s1", "p1"), ("s2", "p2")):
        state.add_submission(sent["id"], sub, pid, "AWAITING REVIEW")
    _post(client, f"/admin/platform/{ps}/sync", csrf_token=token)
    _post(
        client,
        f"/admin/platform/{ps}/plan",
        csrf_token=token,
        bonus_cents_per_kept="20",
        min_items="1",
    )
    page = client.get(where).text
    assert re.search(r"Pending: <b>1</b> approve, <b>1</b> reject, <b>1</b> bonuses", page)
    assert "rewards £9.00 + bonuses £0.40 = <b>£9.40</b>" in page
    # Per submission: the work in its own batches and what the ledger pays it for.
    paid = dict(re.findall(r'<tr data-sub="(\w+)">.*?<td class="paid">(.*?)</td>', page, re.S))
    assert paid == {"s1": "0 votes, 2 written (2 kept), bonus £0.40", "s2": "–"}
    seen = re.search(r'name="seen" value="(\w+)"', page)
    assert seen
    before = len(state.received)
    _post(client, f"/admin/platform/{ps}/apply", csrf_token=token, seen=seen.group(1))
    _post(client, f"/admin/platform/{ps}/apply", csrf_token=token, confirm="yes", seen="0" * 16)
    assert len(state.received) == before  # neither unconfirmed nor a stale plan sends
    _post(
        client, f"/admin/platform/{ps}/apply", csrf_token=token, confirm="yes", seen=seen.group(1)
    )
    assert sorted(state.transitions) == [("s1", "APPROVED"), ("s2", "REJECTED")]
    assert state.paid == [("p1", 0.20 * 2)]
    page = client.get(where).text
    assert "Applied: 3 done, 0 failed." in page and "Nothing planned" in page
    status = dict(re.findall(r'<tr data-sub="(\w+)">.*?<td class="status">(.*?)</td>', page, re.S))
    assert status == {"s1": "APPROVED", "s2": "REJECTED"}  # before any sync
    empty = re.search(r'name="seen" value="(\w+)"', page)
    assert empty is None
    sent_so_far = len(state.received)
    _post(
        client, f"/admin/platform/{ps}/apply", csrf_token=token, confirm="yes", seen=seen.group(1)
    )
    assert len(state.received) == sent_so_far  # a second apply sends nothing
    assert "POST /submissions/s1/transition/" in page  # the call log, with the answer
    assert '"status": "APPROVED"' in page and TOKEN not in page
    with Session(engine) as s:  # 25 more calls: the log pages, oldest on page 2
        s.add_all(
            PlatformCall(platform="prolific", platform_study_id=ps, method="GET", path=f"/x/{i}/")
            for i in range(25)
        )
        s.commit()
    page = client.get(where).text
    assert 'aria-label="pages"' in page and "POST /studies/<" not in page
    older = client.get(where + "&page=2").text
    assert "POST /studies/<" in older and TOKEN not in older


def test_scoped_by_the_study_switcher(
    admin: tuple[TestClient, str], engine: Engine, fake: tuple[str, State]
) -> None:
    client, token = admin
    with Session(engine) as s:
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        row = PlatformStudy(
            study_id=zh.id or 0, platform="prolific", external_id="zh1", settings={"url": "x"}
        )
        s.add(row)
        s.commit()
        ps = row.id
        own_every_study(s, "alice")
    with Session(engine) as s:  # the default study's own Prolific study, and a call made
        # for the other study's: the default study's page shows its study, not that call
        s.add(PlatformStudy(platform="prolific", external_id="en1", settings={"url": "x"}))
        s.add(
            PlatformCall(
                platform="prolific",
                platform_study_id=ps,
                method="GET",
                path="/studies/zh1/secret-call/",
            )
        )
        s.commit()
    own = client.get("/admin/platform").text  # the default study's page
    assert "en1" in own and "zh1" not in own and "secret-call" not in own
    assert client.get(f"/admin/platform?ps={ps}").status_code == 404
    r = client.post(f"/admin/platform/{ps}/sync", data={"csrf_token": token})
    assert r.status_code == 404
    page = client.get("/admin/platform?study=vsr-zh").text  # the switcher's own ?study=
    assert "zh1" in page and f'data-ps="{ps}"' in page and "/studies/zh1/secret-call/" in page
    assert client.get(f"/admin/platform?ps={ps}").status_code == 200  # remembered choice
    assert csrf_of(page)
