"""The README's walk-through in real Chromium, as one person in one browser: the demo's data
(scripts/demo_data.sh), the annotator link printed by its banner, three captions written on
the task page with a different relation each, "Finish now", the done page's "Check for more
work" opening a second writing batch, then the three validator links one after another in
the same browser until each has judged both halves of every caption, and the dashboard's
overview counting what is kept. Screenshots at 1440x900 and 390x844 go to the test's tmp
dir (VSR_KEEP_SCREENSHOTS=/some/dir keeps them).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, col, select

from tests.support.browser import (
    free_port,
    launch_chromium,
    require_chromium,
    running_site,
    screenshot,
    watch_errors,
)
from vsr_core.db import make_engine
from vsr_core.models import Example, Vote

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.browser
RELATIONS = ("left of", "on top of", "behind")


def _start(page: Any, link: str, heading: str) -> None:
    """An invite link through consent and instructions to the batch's first item."""
    page.goto(link)
    page.get_by_role("button", name="I agree, continue").click()
    page.get_by_role("heading", name=heading).wait_for()
    page.get_by_role("button", name="Start the batch").click()


def _write(page: Any, relation: str) -> None:
    """One caption on the task page with the mouse: a relation, then the True image."""
    page.locator(".chip", has_text=relation).first.click()
    page.locator(".photo").nth(0).click()
    page.get_by_role("button", name="Submit").click()


def test_the_readme_walk_through_in_chromium(tmp_path: Path) -> None:
    require_chromium()
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("VSR_KEEP_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{tmp_path / 'vsr_demo.db'}"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("VSR_DEBUG", "BASE_URL")}
    env.update(DATABASE_URL=db_url, PORT=str(port), PATH=f"{BIN}{os.pathsep}{env['PATH']}")
    made = subprocess.run(
        ["bash", str(ROOT / "scripts/demo_data.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    links = re.findall(r"http://127\.0\.0\.1:\d+/start/\w+\?token=[\w-]+", made.stdout)
    (annotator,) = [u for u in links if "/generate?" in u]
    validators = [u for u in links if "/validate?" in u]
    assert len(validators) == 3, made.stdout
    site_env = {
        "SECRET_KEY": "walk-through-" + "k" * 32,
        "HF_HUB_OFFLINE": "1",
        "IMAGE_CACHE_DIR": str(tmp_path / "cache"),
    }
    with (
        running_site(db_url, ROOT / "demo/coco/images", tmp_path, site_env, port) as base,
        sync_playwright() as p,
    ):
        assert annotator.startswith(base)
        browser = launch_chromium(p)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        errors = watch_errors(page)

        # 1. Write captions; "Finish now" after two; a second batch from the done page.
        _start(page, annotator, "Write spatial captions: instructions")
        screenshot(page, shots / "desktop_write.png")
        for relation in RELATIONS[:2]:
            _write(page, relation)
            expect(page.locator("#caption-preview, #completion-code").first).to_be_visible()
        page.get_by_role("link", name="Finish now").click()
        page.get_by_role("button", name="Yes, finish and get my code").click()
        expect(page.locator("#more-work")).to_be_visible()
        screenshot(page, shots / "desktop_finished.png")
        page.locator("#more-work button").click()
        # Consent and instructions were given in this session: straight to the task page.
        if page.get_by_role("button", name="Start the batch").count():
            page.get_by_role("button", name="Start the batch").click()
        expect(page.locator("#caption-preview")).to_be_attached()
        screenshot(page, shots / "desktop_second_batch.png")
        _write(page, RELATIONS[2])

        engine = make_engine(db_url)
        with Session(engine) as s:
            written = s.exec(select(Example)).all()
        assert {e.relation for e in written} == set(RELATIONS), written
        assert len(written) == 2 * len(RELATIONS)

        # 2. The three validator links in the same browser, each until nothing is left:
        # one half of every caption, then "Check for more work" for the other halves.
        judged: list[int] = []
        for link in validators:
            _start(page, link, "Check spatial captions: instructions")
            n = 0
            for _ in range(4 * len(RELATIONS)):
                if page.locator("#caption").count():
                    shown = page.locator("#item-number").inner_text()
                    page.keyboard.press("t" if _open_label(engine, link) else "f")
                    n += 1
                    page.wait_for_function(
                        "shown => { const n = document.querySelector('#item-number');"
                        " return !n || n.textContent !== shown; }",
                        arg=shown,
                    )
                elif page.locator("#more-work").count() and n < 2 * len(RELATIONS):
                    screenshot(page, shots / "desktop_validate_done.png")
                    page.locator("#more-work button").click()
                    page.wait_for_load_state("load")
                else:
                    break
            judged.append(n)
        assert judged == [2 * len(RELATIONS)] * 3, judged
        with Session(engine) as s:
            assert len(s.exec(select(Vote)).all()) == 3 * 2 * len(RELATIONS)
        engine.dispose()

        # 3. The dashboard's overview.
        page.goto(base + "/admin")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill("vsr-demo-admin-2026")
        page.get_by_role("button", name="Log in").click()
        # Every Example kept: each validator agreed with the writer.
        expect(page.locator("body")).to_contain_text(re.compile(rf"kept\s*{2 * len(RELATIONS)}\b"))
        screenshot(page, shots / "desktop_overview.png", full_page=True)

        # The same pages on a phone: a third writing batch and the overview.
        phone = browser.new_context(viewport={"width": 390, "height": 844})
        small = phone.new_page()
        errors += watch_errors(small)
        # The same person on another device: consent was given, so the link goes on from
        # the instructions (or straight to the task).
        small.goto(annotator)
        start = small.get_by_role("button", name="Start the batch")
        expect(start.or_(small.locator("#caption-preview"))).to_be_attached()
        screenshot(small, shots / "phone_instructions.png", full_page=True)
        if start.count():
            start.click()
        expect(small.locator("#caption-preview")).to_be_attached()
        screenshot(small, shots / "phone_write.png", full_page=True)
        width = small.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width  # nothing wider than the screen
        browser.close()
    assert errors == [], errors


def _open_label(engine: Any, link: str) -> bool:
    """The label of the Example the validator of ``link`` holds a lease on now."""
    from vsr_core.models import Assignment, InviteToken, LeaseStatus

    token = link.rsplit("token=", 1)[1]
    with Session(engine) as s:
        worker = s.exec(select(InviteToken.worker_id).where(InviteToken.token == token)).one()
        example_id = s.exec(
            select(Assignment.example_id)
            .where(
                Assignment.worker_id == worker,
                Assignment.status == LeaseStatus.active,
                col(Assignment.example_id).is_not(None),
            )
            .order_by(col(Assignment.id))  # the one on screen, not one leased ahead
        ).first()
        example = s.get(Example, example_id)
        assert example is not None
        return bool(example.label)
