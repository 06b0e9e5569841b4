"""The qualification check in a real browser (`vsr serve` + Debian's Chromium) at desktop
(1440x900) and phone (390x844) width: a worker passes the caption-writing check (worked
examples) and lands in their first batch; another fails both tries of the validation check
(gold items with their photos) and gets the clear page with the Prolific study's no-pay
code and the link back to Prolific. Every page fits the screen and logs no error.
Screenshots go to the test's tmp dir (and to $VSR_SCREENSHOTS when set)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from tests.support.browser import launch_chromium, require_chromium, running_site
from tests.support.qualification import PREFIX, known_answers, make_study
from tests.webapp.crowd.test_browser_pages import (
    VIEWPORTS,
    assert_fits,
    assert_in_view,
    console_errors,
)
from vsr_core.db import make_engine
from vsr_core.models import PlatformStudy

pytestmark = pytest.mark.browser
PROLIFIC_STUDY = "5f1e2d3c4b5a6978"
NO_PAY_CODE = "QFAILBROWSER"


@pytest.fixture
def server(
    sqlite_url: str, coco_dir: Path, tmp_path: Path
) -> Iterator[tuple[str, dict[str, bool]]]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        study = make_study(s, coco_dir)
        s.add(
            PlatformStudy(
                study_id=study.id or 0,
                platform="prolific",
                external_id=PROLIFIC_STUDY,
                settings={"qualification_code": NO_PAY_CODE},
            )
        )
        s.commit()
        known = known_answers(s, study)
    engine.dispose()
    env = {"SECRET_KEY": "browser-qual-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base, known


def shoot(page: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    keep = os.environ.get("VSR_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)


def answer(page: Any, known: dict[str, bool], right: bool) -> None:
    """Pick an answer for every item the page shows, as a careful (or careless) worker: by
    the caption it reads (the fields are named by opaque ids)."""
    items = page.locator(".q-item")
    for n in range(items.count()):
        item = items.nth(n)
        name = item.locator('input[type="radio"][value="true"]').get_attribute("name")
        assert name is not None and re.fullmatch(r"a_[A-Za-z0-9_-]{22}", name)
        caption = item.locator(".q-caption").inner_text()
        value = known[caption] if right else not known[caption]
        page.locator(f'input[name="{name}"][value="{"true" if value else "false"}"]').check()


def enter(page: Any, base: str, kind: str, pid: str) -> None:
    page.goto(
        f"{base}{PREFIX}/start/{kind}?PROLIFIC_PID={pid}&STUDY_ID={PROLIFIC_STUDY}&SESSION_ID=s{pid}"
    )
    page.get_by_role("button", name="I agree, continue").click()
    page.get_by_role("button", name=re.compile("Start the batch")).click()


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_pass_then_the_first_batch(
    server: tuple[str, dict[str, bool]], tmp_path: Path, size: str
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, known = server
    width, height = VIEWPORTS[size]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_context(viewport={"width": width, "height": height}).new_page()
        errors = console_errors(page)
        enter(page, base, "generate", f"pass{size}")
        expect(page.get_by_role("heading", name=re.compile("A short check"))).to_be_visible()
        page.wait_for_load_state("load")
        assert_fits(page, "check")
        assert_in_view(page.locator("h1"), "check heading")
        expect(page.locator(".q-item")).to_have_count(3)
        shoot(page, tmp_path, f"{size}_qualify_generate")
        answer(page, known, right=True)
        shoot(page, tmp_path, f"{size}_qualify_generate_answered")
        page.get_by_role("button", name="Send my answers").click()
        expect(page.get_by_role("heading", name="You passed the check")).to_be_visible()
        assert_fits(page, "passed")
        assert_in_view(page.locator("#q-begin"), "start button")
        shoot(page, tmp_path, f"{size}_qualify_passed")
        page.locator("#q-begin").click()
        expect(page.locator(".progress-text")).to_have_text("Pair 1 of 5")  # the study's 5 pairs
        page.wait_for_load_state("load")
        assert_fits(page, "first batch")
        shoot(page, tmp_path, f"{size}_qualify_first_batch")
        browser.close()
    assert errors == []


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_fail_twice_then_the_screen_out(
    server: tuple[str, dict[str, bool]], tmp_path: Path, size: str
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, known = server
    width, height = VIEWPORTS[size]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_context(viewport={"width": width, "height": height}).new_page()
        errors = console_errors(page)
        enter(page, base, "validate", f"fail{size}")
        expect(page.get_by_role("heading", name=re.compile("A short check"))).to_be_visible()
        photos = page.locator(".q-figure img")
        expect(photos).to_have_count(2)  # the gold items' photos, outlined by the server
        for img in photos.all():
            img.scroll_into_view_if_needed()
            expect(img).to_have_js_property("complete", True)
            assert img.evaluate("i => i.naturalWidth") > 0
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_load_state("load")
        assert_fits(page, "check with photos")
        shoot(page, tmp_path, f"{size}_qualify_validate")
        answer(page, known, right=False)
        page.get_by_role("button", name="Send my answers").click()
        expect(page.locator("#q-retry")).to_contain_text("Your last try had 0 of 2 right")
        expect(page.locator("#q-attempt")).to_have_text("Try 2 of 2.")
        assert_fits(page, "second try")
        assert_in_view(page.locator("#q-retry"), "the retry notice")
        shoot(page, tmp_path, f"{size}_qualify_retry")
        answer(page, known, right=False)
        page.get_by_role("button", name="Send my answers").click()
        expect(page.get_by_role("heading", name="Thank you for your interest")).to_be_visible()
        expect(page.locator("#screenout-code")).to_have_text(NO_PAY_CODE)
        link = page.locator("#prolific-link")
        assert link.get_attribute("href") == (
            f"https://app.prolific.com/submissions/complete?cc={NO_PAY_CODE}"
        )
        assert_fits(page, "screen-out")
        assert_in_view(link, "the link back to Prolific")
        shoot(page, tmp_path, f"{size}_qualify_screenout")
        # The study link again: straight to the same page, never a batch.
        page.goto(
            f"{base}{PREFIX}/start/validate?PROLIFIC_PID=fail{size}&STUDY_ID={PROLIFIC_STUDY}"
            f"&SESSION_ID=sfail{size}"
        )
        expect(page.locator("#screenout-code")).to_have_text(NO_PAY_CODE)
        browser.close()
    assert errors == []
