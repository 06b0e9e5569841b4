"""Real Chromium on `vsr serve`: a keyboard-only person and a person working through the
accessibility tree (which must not contain the canary) are not flagged after a batch; an
agent answering before the photo is decoded and one following the hidden canary are.
The same sessions as `python -m bench.authenticity_browser`, one of each kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import authenticity_browser as bench
from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors

pytestmark = pytest.mark.browser

KINDS = ("keyboard_person", "a11y_person", "blind_agent", "canary_agent")


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    bench.seed_site(sqlite_url, coco_dir, len(KINDS))
    env = {"SECRET_KEY": "browser-test-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


def test_people_pass_and_agents_are_flagged(server: str, sqlite_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    pids = {f"{kind[:3]}{i}": kind for i, kind in enumerate(KINDS)}
    truth = bench.label_reader(sqlite_url)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        for seed, (pid, kind) in enumerate(pids.items()):
            bench.run_session(browser, server, kind, pid, seed, truth)
        # The task page at the phone size: the canary stays off screen.
        page = browser.new_page(viewport={"width": 390, "height": 844})
        errors = watch_errors(page)
        page.goto(server + "/start/validate?PROLIFIC_PID=phone1&STUDY_ID=st&SESSION_ID=se")
        # The consent page says what is recorded and why, before anything is.
        disclosure = page.locator("#consent-signals")
        assert "never what you typed" in disclosure.inner_text()
        page.screenshot(path=str(tmp_path / "consent_390.png"), full_page=True)
        page.get_by_role("button", name="I agree, continue").click()
        page.get_by_role("button", name="Start the batch").click()
        page.wait_for_selector("#btn-true")
        box = page.locator("#v-canary-btn").bounding_box()
        assert box is None or box["x"] + box["width"] <= 0, box  # off screen, left
        assert page.evaluate("document.getElementById('v-canary-btn').closest('[inert]') !== null")
        page.screenshot(path=str(tmp_path / "validate_390.png"))
        browser.close()
    assert errors == []
    found = bench.assess_sessions(sqlite_url, pids)
    flagged = {pids[pid]: [str(f) for f in a.flags] for pid, a in found.items()}
    assert flagged["keyboard_person"] == [] and flagged["a11y_person"] == [], flagged
    assert "before_image" in flagged["blind_agent"], flagged
    assert "canary" in flagged["canary_agent"], flagged
