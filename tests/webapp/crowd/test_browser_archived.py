"""A worker who follows a link into an archived study (`vsr study archive`) in a real
browser at desktop (1440x900) and phone (390x844) width: the link itself gives the plain 403
page saying the study is closed (no consent to give for nothing, no new worker), which fits
the screen, keeps its message in view and logs no error. Screenshots go to the test's tmp dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session

from tests.support.browser import launch_chromium, require_chromium, running_site
from tests.webapp.crowd.test_browser_pages import (
    VIEWPORTS,
    assert_fits,
    assert_in_view,
    console_errors,
)
from vsr_core.db import make_engine
from vsr_core.studies.store import create_study
from vsr_core.studies.versions import archive_study

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[3]
CLOSED = "closed-lab"


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    text = (ROOT / "studies" / "vsr.toml").read_text(encoding="utf-8")
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        create_study(s, text.replace('slug = "vsr"', f'slug = "{CLOSED}"', 1))
        archive_study(s, CLOSED)
        s.commit()
    engine.dispose()
    env = {"SECRET_KEY": "browser-archived-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_an_archived_study_says_it_is_closed(server: str, tmp_path: Path, size: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    width, height = VIEWPORTS[size]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_context(viewport={"width": width, "height": height}).new_page()
        errors = console_errors(page)
        # Refused at the link, before any consent or instructions to read for nothing.
        answer = page.goto(
            f"{server}/s/{CLOSED}/start/generate?PROLIFIC_PID=5f1e2d3c4b5a"
            "&STUDY_ID=st1&SESSION_ID=s1"
        )
        assert answer is not None and answer.status == 403
        message = page.get_by_text("This study is closed: it takes no new participants or batches.")
        expect(message).to_be_visible()
        page.wait_for_load_state("load")
        assert_fits(page, "closed-study page")
        assert_in_view(message, "the closed-study message")
        page.screenshot(path=str(tmp_path / f"{size}_closed.png"), full_page=True)
        browser.close()
    # A refused request is logged by the browser as a failed resource (403): nothing else.
    assert [e for e in errors if "403" not in e] == []
