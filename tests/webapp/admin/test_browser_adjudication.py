"""Adjudication and label models in a real browser (docs/dashboard.md), at 1440x900 and at
phone width 390x844: settle an Example from its page, tick rows and settle them from the data
browser, settle everything matching a filter after the confirmation dialog, fit the label
models, read the preview of a switch and follow its link to the Examples that flip, and see
each model's estimate on the workers page; every page fits the window.

Screenshots go to the test's tmp dir; VSR_KEEP_SCREENSHOTS=/some/dir copies them out.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, select

from tests.support.admin_captions import DEMO_IMAGES
from tests.support.admin_seed import read_raw, seed
from tests.support.admins import create_owner
from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from vsr_core.agreement import is_kept
from vsr_core.db import make_engine
from vsr_core.models import Adjudication, AuditEvent

PASSWORD = "browser-admin-password"
pytestmark = pytest.mark.browser


@pytest.fixture
def server(sqlite_url: str, vsr_dir: Path, tmp_path: Path) -> Iterator[tuple[str, list[int]]]:
    require_chromium()
    engine = make_engine(sqlite_url)
    seeded = seed(engine, read_raw(vsr_dir, every=40))
    with Session(engine) as s:
        create_owner(s, "admin", PASSWORD)
    engine.dispose()
    rejected = [
        eid
        for eid, rec in zip(seeded.example_ids, seeded.records, strict=True)
        if not is_kept(
            bool(rec["label"]),
            [True] * len(rec["vote_true_validator_id"])
            + [False] * len(rec["vote_false_validator_id"]),
        )
    ]
    env = {
        "SECRET_KEY": "browser-admin-" + "k" * 32,
        "IMAGE_CACHE_DIR": str(tmp_path / "var" / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    with running_site(sqlite_url, DEMO_IMAGES, tmp_path, env) as base:
        yield base, rejected


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_adjudicate_and_preview_in_chromium(
    server: tuple[str, list[int]], sqlite_url: str, tmp_path: Path, size: tuple[int, int]
) -> None:
    from playwright.sync_api import Page, expect, sync_playwright

    base, rejected = server
    width, height = size
    shots = tmp_path / "screenshots"
    shots.mkdir()

    def fits(page: Page, name: str) -> None:
        page.screenshot(path=str(shots / f"{width}_{name}.png"), full_page=True)
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width + 1, (name, scroll, width)

    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_context(viewport={"width": width, "height": height}).new_page()
        errors = watch_errors(page)
        page.goto(base + "/admin/login")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()
        kept_before = int(page.locator('b[data-key="kept"]').inner_text())

        # One Example from its page: the reason, then the decision.
        page.goto(f"{base}/admin/examples/{rejected[0]}")
        form = page.locator('form[action$="/adjudicate"]')
        form.locator('textarea[name="reason"]').fill("the mug is on the table in the photo")
        form.get_by_role("button", name="Final label: True").click()
        expect(page.get_by_role("status")).to_contain_text("settled as True")
        expect(page.locator("dd.adjudication")).to_contain_text("final label True")
        fits(page, "example_adjudicated")
        page.goto(base + "/admin")
        expect(page.locator('b[data-key="kept"]')).to_have_text(str(kept_before + 1))
        expect(page.locator('b[data-key="adjudicated"]')).to_have_text("1")

        # Two ticked rows of the data browser, excluded.
        page.goto(base + "/admin/data?agreement=rejected")
        boxes = page.locator('input[name="ids"]')
        boxes.nth(0).check()
        boxes.nth(1).check()
        bulk = page.locator("form#adjudicate")
        bulk.locator('select[name="decision"]').select_option("excluded")
        bulk.locator('input[name="reason"]').fill("photo too dark to judge")
        fits(page, "data_ticked")
        bulk.get_by_role("button", name="Settle the ticked Examples").click()
        expect(page.get_by_role("status")).to_contain_text("2 of 2 Examples excluded")

        # Everything matching a filter, after the dialog (dismissed first: nothing happens).
        page.goto(base + "/admin/data?agreement=rejected")
        total = int(re.findall(r"\d+", page.locator(".page-head .muted").inner_text())[0])
        bulk = page.locator("form#adjudicate")
        bulk.locator('select[name="decision"]').select_option("false")
        bulk.locator('input[name="reason"]').fill("writers misread these captions")
        everything = bulk.get_by_role("button", name=f"Settle all {total} matching this filter")
        page.once("dialog", lambda dialog: dialog.dismiss())
        everything.click()
        expect(page.get_by_role("status")).to_have_count(0)
        page.once("dialog", lambda dialog: dialog.accept())
        everything.click()
        expect(page.get_by_role("status")).to_contain_text(f"{total} of {total} Examples")

        # Label models: fit, the preview, the Examples that would flip.
        page.goto(base + "/admin/settings#label-models")
        expect(page.locator("table.fits")).to_contain_text("never")
        # The first fit in a fresh server imports crowd-kit (pandas, scikit-learn): seconds,
        # far more on a shared, loaded machine; the page answers when the fit is stored.
        page.get_by_role("button", name="Fit the label models now").click(timeout=300_000)
        expect(page.get_by_role("status")).to_contain_text("Label models fitted")
        preview = page.locator("table.preview")
        expect(preview.locator('tr[data-rule="dawid-skene"]')).to_be_visible()
        fits(page, "settings_preview")
        link = preview.locator("a").first
        if link.count():
            n = int(re.findall(r"\d+", link.inner_text())[0])
            link.click()
            expect(page.locator("p.flips")).to_be_visible()
            expect(page.locator(".page-head .muted")).to_contain_text(f"{n} matching")
            fits(page, "data_flips")

        # Workers: each model's estimate next to gold accuracy.
        page.goto(base + "/admin/workers")
        expect(page.get_by_role("columnheader", name="D-S accuracy")).to_be_visible()
        fits(page, "workers_models")
        assert (
            page.locator('td.model-skill[data-model="mace"]')
            .filter(has_text=re.compile(r"\d"))
            .count()
        )
        browser.close()
    assert not errors, errors
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        settled = s.exec(select(Adjudication)).all()
        events = s.exec(select(AuditEvent).where(AuditEvent.kind == "adjudicate")).all()
    engine.dispose()
    assert len(settled) == len(events) == 1 + 2 + total
    keep = os.environ.get("VSR_KEEP_SCREENSHOTS")
    if keep:
        shutil.copytree(shots, Path(keep) / f"adjudication_{width}", dirs_exist_ok=True)
