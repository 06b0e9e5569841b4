"""The whole Prolific workflow in a real browser (`vsr serve` + headless Debian Chromium)
against the fake Prolific: study settings -> a draft from them (refused below the minimum
pay, published above it) -> workers arrive through the study's entry URL with PROLIFIC_PID,
STUDY_ID and SESSION_ID (one writes a caption, one returns mid-batch, one does nothing) ->
sync (the returned participant's lease goes back) -> plan -> approve, reject and pay from
the dashboard with a double-clicked Apply -> everything reached Prolific exactly once, and
planning again sends nothing. Screenshots go to VSR_SHOTS (default: the test's tmp dir)."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from tests.support.admins import create_owner
from tests.support.browser import (
    free_port,
    launch_chromium,
    require_chromium,
    running_site,
    watch_errors,
)
from tests.support.fake_prolific import TOKEN, State, running
from tests.support.webapp_coco import make_pairs
from tests.webapp.crowd.test_browser_pages import assert_fits
from vsr_core.db import make_engine
from vsr_core.models import Assignment, Example, LeaseStatus, PlatformAction, Worker

pytestmark = pytest.mark.browser
PASSWORD = "platform-admin-password"
WRITER, RETURNER, IDLE = (
    "5f1e2d3c4b5a697887960001",
    "5f1e2d3c4b5a697887960002",
    "5f1e2d3c4b5a697887960003",
)


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[tuple[str, State]]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        make_pairs(s, coco_dir, 4)
        create_owner(s, "admin", PASSWORD)
    engine.dispose()
    port = free_port()
    with running() as (prolific_url, state):
        env = {
            "SECRET_KEY": "browser-platform-" + "k" * 32,
            "IMAGE_CACHE_DIR": str(tmp_path / "cache"),
            "BASE_URL": f"http://127.0.0.1:{port}",
            "PROLIFIC_API_TOKEN": TOKEN,
            "PROLIFIC_BASE_URL": prolific_url,
        }
        with running_site(sqlite_url, coco_dir / "images", tmp_path, env, port=port) as base:
            yield base, state


def _entry(template: str, pid: str, study: str, session: str) -> str:
    return (
        template.replace("{{%PROLIFIC_PID%}}", pid)
        .replace("{{%STUDY_ID%}}", study)
        .replace("{{%SESSION_ID%}}", session)
    )


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_settings_to_paid_in_chromium(
    server: tuple[str, State], sqlite_url: str, tmp_path: Path, viewport: tuple[int, int]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, state = server
    shots = Path(os.environ.get("VSR_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        w, h = viewport
        admin = browser.new_context(viewport={"width": w, "height": h}).new_page()
        errors = watch_errors(admin)
        admin.goto(base + "/admin/login")
        admin.get_by_label("Username").fill("admin")
        admin.get_by_label("Password").fill(PASSWORD)
        admin.get_by_role("button", name="Log in").click()
        expect(admin.get_by_role("heading", name="Overview", exact=True)).to_be_visible()

        # Study settings: one caption per batch, 10 minutes, our completion code.
        admin.goto(base + "/admin/settings")
        for name, value in (
            ("generate_batch_size", "1"),
            ("generate_minutes", "10"),
            ("completion_code", "PLATOK"),
            ("validate_batch_size", "1"),
            ("votes_per_example", "1"),
            ("max_votes_per_example", "1"),
            ("gold_rate", "0"),
        ):
            admin.locator(f'input[name="{name}"]').fill(value)
        admin.get_by_role("button", name="Save settings").click()
        expect(admin.get_by_role("status")).to_contain_text("Settings saved.")

        # A draft at £0.50 for 10 minutes is refused; one at £1.50 is published. Nobody has
        # been measured yet, so the expected duration is stated.
        admin.goto(base + "/admin/platform")
        expect(admin.get_by_role("heading", name="Crowd platforms")).to_be_visible()
        for reward in ("50", "150"):
            if not admin.locator("details").evaluate("d => d.open"):
                admin.locator("summary").click()
            admin.get_by_label("Reward per participant (pence/cents)").fill(reward)
            admin.get_by_label("Places / assignments").fill("3")
            admin.get_by_label("Expected minutes per batch (optional)").fill("10")
            admin.get_by_role("button", name="Create draft").click()
            expect(admin.get_by_role("status")).to_contain_text("(draft)")
            admin.get_by_role("button", name="Publish").click()
        cheap, good = (s for s in state.studies.values())
        assert (cheap["status"], good["status"]) == ("UNPUBLISHED", "ACTIVE")
        admin.goto(base + "/admin/platform")
        expect(admin.locator(f'tr:has-text("{cheap["id"]}") td.pay')).to_have_text(
            "effective pay £3.00/h (£0.50 for 10.0 min; stated duration; 0 of the 5 workers "
            "needed measured); platform minimum £6.00/h"
        )
        url = good["external_study_url"]
        assert url.startswith(base + "/start/generate?PROLIFIC_PID={{%PROLIFIC_PID%}}")
        # Each platform study has its own random code; the study's own is for other links.
        code = good["completion_codes"][0]["code"]
        assert re.fullmatch(r"[A-Z0-9]{12}", code) and code != cheap["completion_codes"][0]["code"]
        assert (good["reward"], good["estimated_completion_time"]) == (150, 10)

        # Workers arrive from Prolific with the URL parameters.
        worker = browser.new_context().new_page()
        errors += watch_errors(worker)
        worker.goto(_entry(url, WRITER, good["id"], "a" * 24))
        worker.get_by_role("button", name="I agree, continue").click()
        worker.get_by_role("button", name=re.compile("Start the batch")).click()
        expect(worker.locator(".progress-text")).to_be_visible()
        worker.wait_for_load_state("load")
        worker.keyboard.press("/")
        worker.keyboard.type("on top of")
        expect(worker.locator(".chip:not([hidden])")).to_have_count(1)
        worker.keyboard.press("Enter")
        worker.keyboard.press("2")
        worker.keyboard.press("Enter")
        expect(worker.locator("#completion-code")).to_have_text(code)
        worker.screenshot(path=str(shots / f"worker_done_{w}.png"))
        # Two validators (from elsewhere) judge the caption's two Examples "true": the one
        # whose label is true is kept, which is what the bonus counts.
        for n in (1, 2):
            judge = browser.new_context().new_page()
            errors += watch_errors(judge)
            judge.goto(
                f"{base}/start/validate?PROLIFIC_PID=6a7b8c9d0e1f2a3b4c5d6e0{n}"
                f"&STUDY_ID=other&SESSION_ID={'d' * 24}"
            )
            judge.get_by_role("button", name="I agree, continue").click()
            judge.get_by_role("button", name=re.compile("Start the batch")).click()
            expect(judge.locator("#caption")).to_be_visible()
            judge.wait_for_load_state("load")
            judge.keyboard.press("t")
            expect(judge.locator("#completion-code")).to_have_text("PLATOK")
        returner = browser.new_context().new_page()
        returner.goto(_entry(url, RETURNER, good["id"], "b" * 24))
        returner.get_by_role("button", name="I agree, continue").click()
        returner.get_by_role("button", name=re.compile("Start the batch")).click()
        expect(returner.locator(".progress-text")).to_be_visible()  # holds a lease, leaves
        idle = browser.new_context().new_page()
        idle.goto(_entry(url, IDLE, good["id"], "c" * 24))
        expect(idle.get_by_role("button", name="I agree, continue")).to_be_visible()
        # Prolific's SESSION_ID is the submission's id.
        sa, sb, sc = "a" * 24, "b" * 24, "c" * 24
        for sub, pid, status in (
            (sa, WRITER, "AWAITING REVIEW"),
            (sb, RETURNER, "RETURNED"),
            (sc, IDLE, "AWAITING REVIEW"),
        ):
            state.add_submission(good["id"], sub, pid, status)

        # Sync, plan, preview, approve/reject/pay.
        admin.goto(base + "/admin/platform")
        admin.get_by_role("button", name="Sync submissions").click()
        expect(admin.get_by_role("status")).to_have_text(
            "Synced; 1 leased item(s) of gone participants released."
        )
        admin.get_by_label("Bonus per kept caption (pence/cents)").fill("20")
        admin.get_by_role("button", name="Plan", exact=True).click()
        expect(admin.get_by_role("status")).to_contain_text("Planned 3 new action(s)")
        summary = admin.locator(".plan-summary")
        expect(summary).to_contain_text("Pending: 1 approve, 1 reject, 1 bonuses.")
        expect(summary).to_contain_text("rewards £1.50 + bonuses")
        expect(admin.locator(f'tr[data-sub="{sa}"] td.status')).to_have_text("AWAITING REVIEW")
        expect(admin.locator(f'tr[data-sub="{sa}"] td.paid')).to_contain_text("2 written")
        assert_fits(admin, "platforms page with a plan")
        # In view without scrolling the table: the submission's status; each plan field
        # under its own label, not beside the previous field.
        box = admin.locator(f'tr[data-sub="{sa}"] td.status').bounding_box()
        assert box is not None and box["x"] + box["width"] <= w
        first, second = (
            admin.locator(f'.platform-plan input[name="{n}"]').bounding_box()
            for n in ("bonus_cents_per_kept", "min_items")
        )
        assert first is not None and second is not None
        assert (second["y"] >= first["y"] + first["height"]) == (w < 700)
        admin.screenshot(path=str(shots / f"platform_plan_{w}.png"), full_page=True)
        before = len(state.received)
        admin.get_by_role("button", name="Apply").click()  # not confirmed: the browser stops it
        assert len(state.received) == before
        admin.get_by_label(re.compile("Send these 3 actions")).check()
        admin.get_by_role("button", name="Apply").dblclick()  # a double click
        expect(admin.get_by_role("status")).to_contain_text(re.compile("Applied|Not applied"))
        admin.goto(base + "/admin/platform")
        expect(admin.locator(".plan-summary")).to_contain_text("All actions so far: 3 done.")
        expect(admin.locator(f'tr[data-sub="{sa}"] .action.done')).to_have_count(2)
        # What the apply did shows before the next sync.
        expect(admin.locator(f'tr[data-sub="{sa}"] td.status')).to_have_text("APPROVED")
        expect(admin.locator(f'tr[data-sub="{sc}"] td.status')).to_have_text("REJECTED")
        assert_fits(admin, "platforms page after apply")
        admin.screenshot(path=str(shots / f"platform_applied_{w}.png"), full_page=True)

        # Planning again adds nothing and offers nothing to apply.
        sent = len(state.received)
        admin.get_by_role("button", name="Plan", exact=True).click()
        expect(admin.get_by_role("status")).to_contain_text("Planned 0 new action(s)")
        expect(admin.get_by_role("button", name="Apply")).to_have_count(0)
        assert len(state.received) == sent
        assert TOKEN not in admin.content()
        browser.close()
        assert errors == []

    posts = Counter(path for method, path in state.received if method == "POST")
    assert posts[f"/api/v1/submissions/{'a' * 24}/transition/"] == 1
    assert posts[f"/api/v1/submissions/{'c' * 24}/transition/"] == 1
    assert posts["/api/v1/submissions/bonus-payments/"] == 1
    assert sum(n for p, n in posts.items() if p.endswith("/pay/")) == 1
    assert sorted(state.transitions) == [("a" * 24, "APPROVED"), ("c" * 24, "REJECTED")]
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        writer = s.exec(select(Worker).where(Worker.external_id == WRITER)).one()
        written = s.exec(select(Example).where(Example.author_id == writer.id)).all()
        kept = sum(1 for e in written if e.queue_settled and e.queue_agree == e.queue_votes == 1)
        returner = s.exec(select(Worker).where(Worker.external_id == RETURNER)).one()
        leases = s.exec(select(Assignment).where(Assignment.worker_id == returner.id)).all()
        actions = s.exec(select(PlatformAction).order_by(col(PlatformAction.id))).all()
    engine.dispose()
    assert state.paid == [(WRITER, round(0.20 * kept, 2))] and kept >= 1
    assert [a.status for a in leases] == [LeaseStatus.released]
    assert {a.state for a in actions} == {"done"}
