"""A real annotator in a real browser: `vsr serve` + headless Debian Chromium via Playwright.

Enters through a Prolific link, consents, reads the instructions, does two tasks (one with
the keyboard only, one with the mouse only), sees the completion code, and the database
holds exactly what was chosen. A screenshot of the task page is saved in the test's tmp dir.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from tests.support.webapp_coco import make_pairs, set_study
from vsr_core.db import make_engine
from vsr_core.models import Annotation, Example, ImagePair

pytestmark = pytest.mark.browser


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        make_pairs(s, coco_dir, 4)
    engine.dispose()
    set_study(sqlite_url, generate_batch_size=2, completion_code="BROWSER-OK")
    env = {"SECRET_KEY": "browser-test-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


def test_annotator_completes_two_tasks_in_chromium(
    server: str, sqlite_url: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        errors = watch_errors(page)

        page.goto(server + "/start/generate?PROLIFIC_PID=5f1e2d3c4b5a&STUDY_ID=st1&SESSION_ID=se1")
        page.screenshot(path=str(tmp_path / "consent_page.png"))
        page.get_by_role("button", name="I agree, continue").click()
        heading = page.get_by_role("heading", name="Write spatial captions: instructions")
        expect(heading).to_be_visible()
        page.screenshot(path=str(tmp_path / "instructions_page.png"), full_page=True)
        page.get_by_role("button", name="Start the batch").click()

        # --- task 1: keyboard only ------------------------------------------------------
        expect(page.locator("#countdown")).to_have_text(re.compile(r"^(79|80):\d\d$"))
        concept_a = page.locator(".ent1 .toggle").nth(0).inner_text().strip()
        concept_b = page.locator(".ent1 .toggle").nth(1).inner_text().strip()
        page.wait_for_load_state("load")
        for img in page.locator(".photo img").all():  # marked images really loaded
            assert img.evaluate("i => i.complete && i.naturalWidth > 0")
        page.screenshot(path=str(tmp_path / "task_page_start.png"))
        page.keyboard.press("/")
        page.keyboard.type("on top")
        expect(page.locator(".chip:not([hidden])")).to_have_count(1)
        page.keyboard.press("Enter")  # picks the only match
        page.keyboard.press("s")  # swap: ENT1 is now concept B
        page.keyboard.press("2")  # true for image 2
        caption = f"The {concept_b} is on top of the {concept_a}."
        expect(page.locator("#caption-preview")).to_have_text(caption)
        expect(page.locator(".photo").nth(1)).to_have_class(re.compile("chosen-true"))
        page.screenshot(path=str(tmp_path / "task_page.png"), full_page=False)
        page.keyboard.press("Enter")

        # --- task 2: mouse only -----------------------------------------------------------
        expect(page.locator(".progress-text")).to_contain_text("Pair 2 of 2")
        concept_a2 = page.locator(".ent1 .toggle").nth(0).inner_text().strip()
        concept_b2 = page.locator(".ent1 .toggle").nth(1).inner_text().strip()
        page.locator(".chip", has_text="left of").first.click()
        page.locator(".photo").nth(0).click()
        expect(page.locator("#caption-preview")).to_have_text(
            f"The {concept_a2} is left of the {concept_b2}."
        )
        page.get_by_role("button", name="Submit").click()

        # --- completion -----------------------------------------------------------------
        expect(page.locator("#completion-code")).to_have_text("BROWSER-OK")
        href = page.locator("#prolific-link").get_attribute("href")
        assert href == "https://app.prolific.com/submissions/complete?cc=BROWSER-OK"
        page.screenshot(path=str(tmp_path / "done_page.png"))
        browser.close()
        assert errors == []

    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        anns = s.exec(select(Annotation).order_by(col(Annotation.id))).all()
        assert [(a.relation, a.subj, a.obj) for a in anns] == [
            ("on top of", concept_b, concept_a),
            ("left of", concept_a2, concept_b2),
        ]
        first_pair = s.get(ImagePair, anns[0].pair_id)
        assert first_pair is not None and anns[0].true_image_id == first_pair.image2_id
        examples = s.exec(select(Example).order_by(col(Example.id))).all()
        # The two Examples are written in a random order (the queue must not reveal labels).
        assert sorted((e.caption, e.label) for e in examples[:2]) == [
            (caption, False),
            (caption, True),
        ]
        assert len(examples) == 4
        assert all(a.duration_ms and a.duration_ms > 0 for a in anns)
    engine.dispose()
    assert (tmp_path / "task_page.png").stat().st_size > 10_000


def test_the_task_works_without_javascript(server: str, sqlite_url: str) -> None:
    """Plain HTML forms: with scripts off, clicking through still stores a correct answer."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        page.goto(server + "/start/generate?PROLIFIC_PID=nojs123&STUDY_ID=st1&SESSION_ID=se9")
        page.get_by_role("button", name="I agree, continue").click()
        page.get_by_role("button", name="Start the batch").click()
        concept_a = page.locator(".ent1 .toggle").nth(0).inner_text().strip()
        concept_b = page.locator(".ent1 .toggle").nth(1).inner_text().strip()
        page.locator(".chip", has_text="behind").first.click()
        page.locator(".ent1 .toggle").nth(1).click()
        page.locator(".photo").nth(1).click()
        page.get_by_role("button", name="Submit").click()
        expect(page.locator(".progress-text")).to_contain_text("Pair 2 of 2")
        browser.close()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        (ann,) = s.exec(select(Annotation)).all()
        assert (ann.relation, ann.subj, ann.obj) == ("behind", concept_b, concept_a)
        assert ann.duration_ms is None  # only the script measures time
    engine.dispose()
