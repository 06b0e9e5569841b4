"""First-time use of the dashboard in a real browser (docs/dashboard.md), at
1440x900 and at phone width 390x844: every page fits, block asks first, settings keep what
was typed, thumbnails tell a caption's two Examples apart, times are local, an empty sample
job is a warning with its reason, a re-validation round opens from the dashboard.

Screenshots go to the test's tmp dir; VSR_KEEP_SCREENSHOTS=/some/dir copies them out.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from tests.support.admin_captions import DEMO_COCO, DEMO_IMAGES, write_captions
from tests.support.admin_seed import read_raw, seed
from tests.support.admins import create_owner
from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from vsr_core.db import make_engine
from vsr_core.models import Example, Worker
from vsr_core.standing import standing

PASSWORD = "browser-admin-password"
pytestmark = pytest.mark.browser
PAGES = [
    ("/admin", "Overview"),
    ("/admin/quality", "Data quality"),
    ("/admin/workers", "Workers"),
    ("/admin/data", "Data"),
    ("/admin/settings", "Study settings"),
    ("/admin/pipeline", "Pipeline"),
    ("/admin/revalidation", "Re-validation"),
    ("/admin/platform", "Crowd platforms"),
]


@pytest.fixture
def server(sqlite_url: str, vsr_dir: Path, tmp_path: Path) -> Iterator[tuple[str, dict[str, int]]]:
    require_chromium()
    engine = make_engine(sqlite_url)
    seed(engine, read_raw(vsr_dir, every=200))  # imported, settled: something to re-validate
    made = write_captions(engine, 4, vote_ms=0)  # demo captions, a 0-second validator
    with Session(engine) as s:
        create_owner(s, "admin", PASSWORD)
    engine.dispose()
    ids = {
        "writer": made.writer_id,
        "validator": made.validator_id,
        "first": made.example_ids[0],
        "second": made.example_ids[1],
    }
    env = {
        "SECRET_KEY": "browser-admin-" + "k" * 32,
        "IMAGE_CACHE_DIR": str(tmp_path / "var" / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    with running_site(sqlite_url, DEMO_IMAGES, tmp_path, env) as base:
        yield base, ids


def _login(page: object, base: str) -> None:
    from playwright.sync_api import Page, expect

    assert isinstance(page, Page)
    page.goto(base + "/admin/login")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_dashboard_first_use_in_chromium(
    server: tuple[str, dict[str, int]], sqlite_url: str, tmp_path: Path, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, ids = server
    width, height = size
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(
            viewport={"width": width, "height": height}, timezone_id="America/New_York"
        )
        page = context.new_page()
        errors = watch_errors(page)
        _login(page, base)
        for path, heading in PAGES:
            page.goto(base + path)
            expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
            page.screenshot(
                path=str(shots / f"{width}_{path.strip('/').replace('/', '_')}.png"), full_page=True
            )
            # the page fits the window: no sideways scrolling of the whole page
            scroll = page.evaluate("document.documentElement.scrollWidth")
            assert scroll <= width + 1, (path, scroll, width)

        # Overview: the kept count and no raw ISO time (local time in New York, not UTC).
        page.goto(base + "/admin")
        updated = page.locator('time[data-key="generated_at"]').inner_text()
        assert "T" not in updated and "UTC" not in updated, updated

        # Workers: named by invite label, the 0-second validator flagged, Block asks first.
        page.goto(base + "/admin/workers")
        row = page.locator(f'tr[data-worker="{ids["validator"]}"]')
        expect(row).to_contain_text("Grace (lab)")
        expect(row.locator(".too-fast")).to_be_visible()
        page.once("dialog", lambda dialog: dialog.dismiss())
        row.get_by_role("button", name="Block").click()
        expect(page.get_by_role("status")).to_have_count(0)  # dismissed: nothing happened
        page.once("dialog", lambda dialog: dialog.accept())
        row.get_by_role("button", name="Block").click()
        expect(page.get_by_role("status")).to_contain_text(f"Worker #{ids['validator']} blocked")

        # Data: two thumbnails of one caption differ; the Example links to its other half.
        page.goto(base + "/admin/data?origin=human")
        thumbs = page.locator("img.thumb")
        expect(thumbs.first).to_be_visible()
        for i in range(2):
            img = thumbs.nth(i)
            img.scroll_into_view_if_needed()
            expect(img).to_have_js_property("complete", True)
            assert img.evaluate("i => i.naturalWidth") > 0
        page.screenshot(path=str(shots / f"{width}_data_human.png"), full_page=True)
        # The photo's box is reserved before it arrives: the link below it does not move when
        # it loads (it did on a phone, and a click aimed at it landed elsewhere).
        held: list[Any] = []
        page.route("**/admin/examples/*/image", lambda route: held.append(route))  # it waits
        page.goto(f"{base}/admin/examples/{ids['first']}", wait_until="domcontentloaded")
        link = page.locator("a.other-half")
        before = link.bounding_box()
        for _ in range(100):  # until the browser has asked for the photo (at most 5 s)
            if held:
                break
            page.wait_for_timeout(50)
        assert held, "the Example page never asked for its photo"
        for route in held:
            route.continue_()
        page.unroute("**/admin/examples/*/image")
        photo = page.locator("figure.example-image img")
        expect(photo).to_have_js_property("complete", True)
        assert photo.evaluate("i => i.naturalWidth") > 0
        after = link.bounding_box()
        assert before is not None and after is not None
        assert abs(before["y"] - after["y"]) < 1, (before, after)
        page.screenshot(path=str(shots / f"{width}_example.png"), full_page=True)
        link.click()
        expect(page).to_have_url(f"{base}/admin/examples/{ids['second']}")
        when = page.locator("time.local").first.inner_text()
        assert "UTC" not in when and "T" not in when

        # Settings: one bad value keeps the other edits; the error sits next to its field.
        page.goto(base + "/admin/settings")
        page.locator('input[name="generate_batch_size"]').fill("150")
        page.locator('input[name="votes_per_example"]').fill("0")
        page.locator('select[name="decide_method"]').select_option("exact")
        page.get_by_role("button", name="Save settings").click()
        expect(page.locator("#field-votes_per_example .field-error")).to_have_text(
            "must be at least 1"
        )
        expect(page.locator('input[name="generate_batch_size"]')).to_have_value("150")
        expect(page.locator('select[name="decide_method"]')).to_have_value("exact")
        expect(page.locator('input[name="keep_threshold"]')).to_have_value("2/3")
        page.screenshot(path=str(shots / f"{width}_settings_error.png"), full_page=True)

        # Pipeline: an empty sample job is a warning with its reason.
        page.goto(base + "/admin/pipeline")
        sample = page.locator('form[action="/admin/jobs/sample"]')
        expect(sample.locator('textarea[name="coco_files"]')).to_have_value(str(DEMO_COCO))
        sample.locator('textarea[name="coco_files"]').fill(str(DEMO_COCO))
        sample.locator('input[name="min_area"]').fill("900000")
        sample.get_by_role("button", name="Sample pairs").click()
        expect(page.get_by_text("produced nothing").first).to_be_visible(timeout=120_000)
        expect(page.get_by_text("smaller minimum area").first).to_be_visible()
        page.screenshot(path=str(shots / f"{width}_pipeline_warning.png"), full_page=True)
        # a bad path: the error next to the field, inside the admin layout
        sample.locator('textarea[name="coco_files"]').fill("/nope/instances.json")
        sample.get_by_role("button", name="Sample pairs").click()
        expect(page.locator("#err-sample-coco_files")).to_contain_text("no such file")
        expect(page.locator("nav.admin-nav")).to_be_visible()

        # Re-validation: open a round from the dashboard; the report shows up.
        page.goto(base + "/admin/revalidation")
        page.locator('input[name="sample"]').fill("5")
        page.locator('input[name="round_name"]').fill(f"b{width}")
        page.get_by_role("button", name="Open for fresh votes").click()
        expect(page.get_by_role("status")).to_contain_text("opened 5 imported Examples")
        expect(page.get_by_role("heading", name=f"round b{width}")).to_be_visible()
        page.screenshot(path=str(shots / f"{width}_revalidation.png"), full_page=True)
        browser.close()
    assert not errors, errors
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        worker = s.get(Worker, ids["validator"])
        assert worker is not None and standing(s, worker, 1).blocked  # in the study
        copies = s.exec(select(Example).where(Example.origin == "revalidation")).all()
        assert len(copies) == 5
    engine.dispose()
    keep = os.environ.get("VSR_KEEP_SCREENSHOTS")
    if keep:
        shutil.copytree(shots, keep, dirs_exist_ok=True)
