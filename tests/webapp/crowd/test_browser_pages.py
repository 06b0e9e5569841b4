"""Every worker page in a real browser at desktop (1440x900) and phone (390x844) width.

An annotator and a validator walk in from Prolific links: consent, instructions, the task,
"Finish now", the completion page; plus the error, declined, screen-out and home pages. On
each page: no horizontal scroll, the controls that matter inside the viewport without
scrolling, no console error (a missing favicon logs one) and no CSP violation. Screenshots
of every page are saved in the test's tmp dir (look at them when changing the layout).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from tests.support.browser import launch_chromium, require_chromium, running_site
from tests.support.webapp_coco import set_study
from tests.webapp.validate.test_routes import seed_examples
from vsr_core.db import make_engine
from vsr_core.models import Batch

pytestmark = pytest.mark.browser

VIEWPORTS = {"desktop": (1440, 900), "phone": (390, 844)}


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        seed_examples(s, coco_dir, 3)  # 3 pairs free to caption, 6 Examples to judge
    engine.dispose()
    set_study(sqlite_url, completion_code="PAGES-OK", gold_rate=0.0)
    env = {"SECRET_KEY": "browser-test-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


def console_errors(page: Any) -> list[str]:
    """Every console error (a 404 for /favicon.ico is one) and every script error."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None
    )
    return errors


def assert_fits(page: Any, what: str) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"{what}: {width[0]} px wide in a {width[1]} px window"


def assert_in_view(locator: Any, what: str) -> None:
    """Wholly inside the viewport as the page is now (no scrolling to find it)."""
    page = locator.page
    box = locator.bounding_box()
    vw, vh = page.evaluate("[window.innerWidth, window.innerHeight]")
    assert box is not None, f"{what} is not rendered"
    assert box["x"] >= 0 and box["x"] + box["width"] <= vw + 0.5, f"{what} off screen: {box}"
    assert box["y"] >= 0 and box["y"] + box["height"] <= vh + 0.5, f"{what} off screen: {box}"


def shoot(page: Any, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"))


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_annotator_pages_fit_the_screen(
    server: str, sqlite_url: str, tmp_path: Path, size: str
) -> None:
    from playwright.sync_api import expect, sync_playwright

    width, height = VIEWPORTS[size]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(
            viewport={"width": width, "height": height},
            permissions=["clipboard-read", "clipboard-write"],
        )
        page = context.new_page()
        errors = console_errors(page)
        page.goto(server + "/start/generate?PROLIFIC_PID=5f1e2d3c4b5a&STUDY_ID=st1&SESSION_ID=s1")
        assert_fits(page, "consent")
        shoot(page, tmp_path, f"{size}_consent")
        assert page.evaluate("window.scrollY") == 0
        page.get_by_role("button", name="I agree, continue").click()

        expect(page.get_by_role("heading", name=re.compile("instructions"))).to_be_visible()
        page.wait_for_load_state("load")
        assert page.evaluate("window.scrollY") == 0, "the instructions must open at the top"
        assert_in_view(page.locator("h1"), "instructions heading")
        assert_fits(page, "instructions")
        shoot(page, tmp_path, f"{size}_instructions_generate")
        page.screenshot(path=str(tmp_path / f"{size}_instructions_full.png"), full_page=True)
        photos = page.locator(".example-photo img")
        expect(photos).to_have_count(2)  # the worked example's two photos, really loaded
        for img in photos.all():
            img.scroll_into_view_if_needed()
            expect(img).to_have_js_property("complete", True)
            assert img.evaluate("i => i.naturalWidth") > 0
        page.evaluate("window.scrollTo(0, 0)")
        page.get_by_role("button", name=re.compile("Start the batch")).click()

        # The task: 3 pairs exist, so the header says 3, not the configured 200.
        expect(page.locator(".progress-text")).to_have_text("Pair 1 of 3")
        page.wait_for_load_state("load")
        assert_fits(page, "generate task")
        shoot(page, tmp_path, f"{size}_generate")
        assert_in_view(page.locator("#countdown"), "countdown")
        assert_in_view(page.locator(".help-link"), "Instructions link")
        assert_in_view(page.locator("#submit-btn"), "Submit button")
        assert_in_view(page.locator("#caption-preview"), "caption preview")
        assert page.locator(".composer").evaluate("e => getComputedStyle(e).position") == "fixed"
        # The picker is compact: a category's chips start right by its label.
        for group in page.locator(".group").all()[:3]:
            label = group.locator(".group-name").bounding_box()
            chips = group.locator(".chips").bounding_box()
            assert label is not None and chips is not None
            gap_below = chips["y"] - (label["y"] + label["height"])
            gap_right = chips["x"] - (label["x"] + label["width"])
            assert gap_below < 24 or (abs(chips["y"] - label["y"]) < 24 and gap_right < 48), (
                f"category label and chips apart: {label} {chips}"
            )
        page.locator(".chip", has_text="left of").first.click()
        page.locator(".photo").nth(0).click()
        page.get_by_role("button", name=re.compile("^Submit")).click()
        expect(page.locator(".progress-text")).to_have_text("Pair 2 of 3")
        shoot(page, tmp_path, f"{size}_generate_2")
        page.screenshot(path=str(tmp_path / f"{size}_generate_full.png"), full_page=True)

        # Finish now, with a confirmation; the code for the one pair done.
        assert_in_view(page.get_by_role("link", name="Finish now"), "Finish now")
        page.get_by_role("link", name="Finish now").click()
        expect(page.get_by_role("heading", name="Finish now?")).to_be_visible()
        expect(page.locator("main")).to_contain_text("You have finished 1 of the 3 items")
        assert_fits(page, "finish confirmation")
        shoot(page, tmp_path, f"{size}_finish_confirm")
        page.get_by_role("button", name="Yes, finish and get my code").click()
        expect(page.locator("#completion-code")).to_have_text("PAGES-OK")
        expect(page.locator("main")).to_contain_text("You finished early")
        assert_fits(page, "done")
        assert_in_view(page.locator("#completion-code"), "completion code")
        assert_in_view(page.locator("#copy-code"), "copy button")
        page.locator("#copy-code").click()
        expect(page.locator("#copy-status")).to_have_text("Copied.")
        assert page.evaluate("navigator.clipboard.readText()") == "PAGES-OK"
        shoot(page, tmp_path, f"{size}_done")
        browser.close()
    assert errors == []
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        (batch,) = s.exec(select(Batch)).all()
        assert (batch.status, batch.size, batch.completion_code) == ("completed", 3, "PAGES-OK")
        assert batch.done_count == 1 and batch.entry["finished_early"] is True
    engine.dispose()


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_validator_pages_fit_the_screen(server: str, tmp_path: Path, size: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    width, height = VIEWPORTS[size]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": width, "height": height})
        errors = console_errors(page)
        page.goto(server + "/start/validate?PROLIFIC_PID=6a7b8c9d0e1f&STUDY_ID=st1&SESSION_ID=s2")
        assert_fits(page, "consent")
        page.get_by_role("button", name="I agree, continue").click()
        expect(page.get_by_role("heading", name=re.compile("instructions"))).to_be_visible()
        page.wait_for_load_state("load")
        assert page.evaluate("window.scrollY") == 0, "the instructions must open at the top"
        assert_fits(page, "validate instructions")
        shoot(page, tmp_path, f"{size}_instructions_validate")
        page.get_by_role("button", name=re.compile("Start the batch")).click()

        # 6 Examples of 3 captions, all someone else's: a batch holds one image of each.
        expect(page.locator(".progress-text")).to_have_text("Item 1 of 3")
        page.wait_for_load_state("load")
        assert_fits(page, "validate task")
        shoot(page, tmp_path, f"{size}_validate")
        assert_in_view(page.locator("#countdown"), "countdown")
        assert_in_view(page.locator(".help-link"), "Instructions link")
        assert_in_view(page.locator("#btn-true"), "True button")
        assert_in_view(page.locator("#btn-false"), "False button")
        assert_in_view(page.locator("#caption"), "caption")
        # Both countdowns read minutes:seconds (90 minutes is "90:00", not "1:30:00").
        expect(page.locator("#countdown")).to_have_text(re.compile(r"^(89|90):\d\d$"))
        page.locator("#btn-true").click()
        expect(page.locator("#item-number")).to_have_text("2")
        page.get_by_role("link", name="Finish now").click()
        page.get_by_role("button", name="Yes, finish and get my code").click()
        expect(page.locator("#completion-code")).to_have_text("PAGES-OK")
        assert_fits(page, "done")
        shoot(page, tmp_path, f"{size}_validate_done")

        # The other pages a worker can meet.
        for name, url in {
            "error": "/start/generate",
            "declined": None,
            "screenout": "/screenout",
            "home": "/",
        }.items():
            if url is None:
                page.goto(server + "/consent/validate")
                page.get_by_role("button", name="I do not agree").click()
            else:
                page.goto(server + url)
            page.wait_for_load_state("load")
            assert_fits(page, name)
            shoot(page, tmp_path, f"{size}_{name}")
        browser.close()
    # The error page is a 400 on purpose; nothing else may log an error.
    assert [e for e in errors if "400 (Bad Request)" not in e] == []
