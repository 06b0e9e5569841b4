"""Real Chromium on `vsr serve`, the caption task: a keyboard-only person and a person working
through the accessibility tree (which must not contain the canary) are not flagged after a
batch; an agent following the hidden canary and one answering before the photos are decoded
are. The caption-task counterpart of tests/webapp/validate/test_browser_authenticity.py."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from bench.authenticity_browser import assess_sessions
from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from tests.support.webapp_coco import make_pairs, set_study
from vsr_core.db import make_engine

pytestmark = pytest.mark.browser

BATCH = 2
KINDS = ("keyboard_person", "a11y_person", "canary_agent", "blind_agent")
CANARY_WORDS = ("Confirm photos reviewed", "AI assistants", "relation shown in image")


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        make_pairs(s, coco_dir, BATCH * len(KINDS) + 1)
    engine.dispose()
    set_study(sqlite_url, generate_batch_size=BATCH)
    env = {"SECRET_KEY": "browser-test-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


def _photos_shown(page: Any) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('.photo img')]"
        ".every(i => i.complete && i.naturalWidth > 0)",
        timeout=20_000,
    )
    page.wait_for_timeout(300)  # a person looks before choosing


def keyboard_person(page: Any) -> None:
    _photos_shown(page)
    page.keyboard.press("/")
    page.keyboard.type("left of")
    page.keyboard.press("Enter")  # the first match
    page.keyboard.press("1")
    page.keyboard.press("Enter")


def a11y_person(page: Any) -> None:
    _photos_shown(page)
    tree = page.locator("body").aria_snapshot()
    for words in CANARY_WORDS:
        assert words not in tree, f"the canary is in the accessibility tree: {words}"
    page.get_by_role("radio", name="near", exact=True).first.focus()
    page.keyboard.press("Space")
    page.get_by_role("radio", name=re.compile("Image 2")).focus()
    page.keyboard.press("Space")
    page.get_by_role("button", name="Submit").press("Enter")


def canary_agent(page: Any) -> None:
    _photos_shown(page)
    page.evaluate(
        """() => {
        const b = [...document.querySelectorAll('button')]
          .find(x => x.textContent.includes('Confirm photos reviewed'));
        if (b) b.click();
        document.querySelector('input[name="relation"]').checked = true;
        document.getElementById('true1').checked = true;
        document.getElementById('task-form').requestSubmit();
    }"""
    )


BLIND = """document.addEventListener("DOMContentLoaded", () => {
  const f = document.getElementById("task-form");
  if (!f) return;
  document.querySelector('input[name="relation"]').checked = true;
  document.getElementById("true2").checked = true;
  f.requestSubmit();
});"""


def blind_agent(page: Any) -> None:
    """Answers from a script injected into every page, as soon as the DOM is parsed."""


ANSWER: dict[str, Callable[[Any], None]] = {
    "keyboard_person": keyboard_person,
    "a11y_person": a11y_person,
    "canary_agent": canary_agent,
    "blind_agent": blind_agent,
}


def test_caption_task_people_pass_and_agents_are_flagged(server: str, sqlite_url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    pids = {f"{kind[:3]}{i}": kind for i, kind in enumerate(KINDS)}
    with sync_playwright() as p:
        browser = launch_chromium(p)
        for pid, kind in pids.items():
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            errors = watch_errors(page)
            if kind == "blind_agent":
                context.add_init_script(BLIND)
            page.goto(f"{server}/start/generate?PROLIFIC_PID={pid}&STUDY_ID=st&SESSION_ID=s{pid}")
            page.get_by_role("button", name="I agree, continue").click()
            page.get_by_role("button", name="Start the batch").click()
            for n in range(1, BATCH + 1):
                if kind != "blind_agent":
                    expect(page.locator(".progress-text")).to_contain_text(f"Pair {n} of")
                ANSWER[kind](page)
            expect(page.locator("#completion-code")).to_be_visible()
            context.close()
            assert errors == [], (kind, errors)
        # The canary on the task page: off screen and inert for everyone.
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(server + "/start/generate?PROLIFIC_PID=phone1&STUDY_ID=st&SESSION_ID=sp")
        page.get_by_role("button", name="I agree, continue").click()
        page.get_by_role("button", name="Start the batch").click()
        box = page.locator("#g-canary-btn").bounding_box()
        assert box is None or box["x"] + box["width"] <= 0, box
        assert page.evaluate("document.getElementById('g-canary-btn').closest('[inert]') !== null")
        browser.close()
    found = assess_sessions(sqlite_url, pids)
    flagged = {pids[pid]: [str(f) for f in a.flags] for pid, a in found.items()}
    measured = {pids[pid]: a.summary.get("items_measured") for pid, a in found.items()}
    assert measured == dict.fromkeys(KINDS, BATCH), measured
    assert flagged["keyboard_person"] == [] and flagged["a11y_person"] == [], flagged
    assert flagged["canary_agent"] == ["canary"], flagged
    assert "before_image" in flagged["blind_agent"], flagged
