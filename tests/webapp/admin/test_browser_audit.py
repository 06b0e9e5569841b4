"""The audit trail page in a real browser (`vsr serve` + headless Debian Chromium) at 1440x900
and 390x844: reached from the dashboard's navigation, filtered by kind and actor, the next
page of older records, each change readable, and nothing wider than the screen. Screenshots
go to VSR_SHOTS (default: the test's tmp dir)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session

from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from tests.webapp.admin.test_audit_trail import _trail
from tests.webapp.crowd.test_browser_pages import assert_fits
from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.db import make_engine
from vsr_core.models import AuditKind

pytestmark = pytest.mark.browser
PASSWORD = "correct horse battery"  # _trail's admins


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    engine = make_engine(sqlite_url)
    _trail(engine)
    with Session(engine) as s:  # the long values a real trail holds
        audit.record(
            s,
            Actor("alice", 1),
            AuditKind.settings_change,
            study_id=1,
            target="settings",
            change=audit.changed(
                {"consent_text": "You are invited to take part in a study. " * 8, "votes": 3},
                {"consent_text": "Vous êtes invité·e à une étude. " * 8, "votes": 5},
            ),
        )
        audit.record(
            s,
            Actor("cli:root", None, via="cli"),
            AuditKind.job_start,
            study_id=1,
            target="job 12",
            change={"kind": "sample", "params": {"n_pairs": 500, "coco_files": ["/x/" * 30]}},
        )
        s.commit()
    engine.dispose()
    env = {"SECRET_KEY": "browser-audit-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_audit_page_in_chromium(server: str, tmp_path: Path, viewport: tuple[int, int]) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("VSR_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    w, h = viewport
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_context(viewport={"width": w, "height": h}).new_page()
        errors = watch_errors(page)
        page.goto(server + "/admin/login")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("link", name="Audit", exact=True).click()
        expect(page.get_by_role("heading", name="Audit trail")).to_be_visible()
        rows = page.locator("table.audit tbody tr")
        expect(rows).to_have_count(50)
        # Newest first: the job started at the CLI, then the settings change, readable.
        expect(rows.nth(0)).to_contain_text("cli:root")
        expect(rows.nth(0)).to_contain_text("(CLI)")
        expect(rows.nth(1)).to_contain_text("votes: 3 → 5")
        expect(rows.nth(1)).to_contain_text("consent_text: You are invited")
        page.screenshot(path=str(shots / f"audit_{w}.png"))
        page.screenshot(path=str(shots / f"audit_full_{w}.png"), full_page=True)
        assert_fits(page, "audit page")
        # Older records: the next page, by id.
        first_id = rows.nth(0).get_attribute("data-id")
        page.get_by_role("link", name="older →").click()
        expect(rows.first).not_to_have_attribute("data-id", first_id or "")
        expect(page.get_by_role("link", name="← newest")).to_be_visible()
        # Filters: every study alice can see, gold marks by bob.
        page.locator('select[name="scope"]').select_option("all")
        page.locator('select[name="kind"]').select_option("gold_mark")
        page.locator('input[name="actor"]').fill("bob")
        page.get_by_role("button", name="Filter").click()
        expect(rows.first).to_contain_text("gold_mark")
        for i in range(rows.count()):
            expect(rows.nth(i)).to_contain_text("bob")
        page.screenshot(path=str(shots / f"audit_filtered_{w}.png"), full_page=True)
        assert_fits(page, "filtered audit page")
        assert errors == []
        browser.close()
