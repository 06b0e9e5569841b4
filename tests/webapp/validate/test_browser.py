"""A real validator in a real browser: `vsr serve` + headless Debian Chromium via Playwright.

Enters through a Prolific link, consents, starts a batch and judges three items with the
keyboard only (T, F, and a frame answer 2 then T), reaches the completion code; the database
holds exactly those votes. Screenshots of the task page are saved in the test's tmp dir.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from tests.support.webapp_coco import set_study
from tests.webapp.validate.test_routes import seed_examples
from vsr_core.db import make_engine
from vsr_core.models import Example, Vote

pytestmark = pytest.mark.browser


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        seed_examples(s, coco_dir, 3)
    engine.dispose()
    set_study(sqlite_url, validate_batch_size=3, completion_code="VALID-OK", gold_rate=0.0)
    env = {"SECRET_KEY": "browser-test-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


def test_validator_judges_with_the_keyboard(server: str, sqlite_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = watch_errors(page)
        page.goto(server + "/start/validate?PROLIFIC_PID=6a7b8c9d&STUDY_ID=st1&SESSION_ID=se1")
        page.get_by_role("button", name="I agree, continue").click()
        heading = page.get_by_role("heading", name="Check spatial captions: instructions")
        expect(heading).to_be_visible()
        page.get_by_role("button", name="Start the batch").click()

        captions = []
        # Item 1 ("left of", the True image): the frame rule and question are shown.
        expect(page.locator("#countdown")).to_have_text(re.compile(r"^(89|90):\d\d$"))
        expect(page.locator("#frame-rule")).to_be_visible()
        img = page.locator(".v-figure img")
        expect(img).to_be_visible()
        page.wait_for_load_state("load")
        assert img.evaluate("i => i.complete && i.naturalWidth > 0")  # the marked JPEG loaded
        page.screenshot(path=str(tmp_path / "validate_page.png"))
        captions.append(page.locator("#caption").inner_text())
        page.keyboard.press("2")  # optional frame: the object's own view (intrinsic)
        page.keyboard.press("t")
        # Item 2: answered False.
        expect(page.locator("#item-number")).to_have_text("2")
        captions.append(page.locator("#caption").inner_text())
        page.keyboard.press("f")
        # Item 3: True without a frame answer.
        expect(page.locator("#item-number")).to_have_text("3")
        captions.append(page.locator("#caption").inner_text())
        page.screenshot(path=str(tmp_path / "validate_page_3.png"))
        page.keyboard.press("t")
        expect(page.locator("#completion-code")).to_have_text("VALID-OK")
        page.screenshot(path=str(tmp_path / "validate_done.png"))
        browser.close()
    assert errors == []

    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        votes = s.exec(select(Vote).order_by(col(Vote.id))).all()
        shown = [s.get(Example, v.example_id) for v in votes]
    engine.dispose()
    assert [v.value for v in votes] == [True, False, True]
    assert [v.reference_frame for v in votes] == ["intrinsic", None, None]
    assert [e.caption for e in shown if e] == captions
    assert all(v.duration_ms is not None and v.duration_ms > 0 for v in votes)
