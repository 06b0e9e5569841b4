"""The Chinese study's settings in a real browser (Debian Chromium) at 1440x900 and 390x844:
the consent box shows the study's Chinese text, and saving another field keeps it.

Screenshots go to the test's tmp dir; VSR_KEEP_SCREENSHOTS=/some/dir copies them out.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, select

from tests.support.admin_captions import DEMO_IMAGES
from tests.support.admins import create_owner
from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from tests.webapp.admin.test_browser_first_use import PASSWORD, _login
from tests.webapp.http.test_studies import ZH_FILE
from vsr_core.codes import STUDY_CODE_KEYS
from vsr_core.db import make_engine
from vsr_core.models import StudySetting
from vsr_core.studies.definition import load_study
from vsr_core.studies.settings import load_study_config
from vsr_core.studies.store import create_study

pytestmark = pytest.mark.browser
ZH_CONSENT = load_study(ZH_FILE).default_language.texts.consent


@pytest.fixture
def server(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, int]]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        s.commit()
        assert zh.id is not None
        zh_id = zh.id
        create_owner(s, "admin", PASSWORD)
    engine.dispose()
    env = {
        "SECRET_KEY": "browser-settings-" + "k" * 32,
        "IMAGE_CACHE_DIR": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
    }
    with running_site(sqlite_url, DEMO_IMAGES, tmp_path, env) as base:
        yield base, zh_id


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_saving_the_chinese_settings_keeps_the_chinese_consent(
    server: tuple[str, int], sqlite_url: str, tmp_path: Path, size: tuple[int, int]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, zh_id = server
    width, height = size
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": width, "height": height})
        errors = watch_errors(page)
        _login(page, base)
        page.goto(base + "/admin/settings?study=vsr-zh")
        consent = page.locator('textarea[name="consent_text"]')
        consent.scroll_into_view_if_needed()
        assert consent.input_value().strip() == ZH_CONSENT.strip()
        page.screenshot(path=str(shots / f"{width}_settings_zh.png"), full_page=True)
        page.locator('input[name="completion_code"]').fill("ZHDONE")
        page.get_by_role("button", name="Save settings").click()
        expect(page.get_by_role("status")).to_contain_text("Settings saved.")
        assert page.locator('textarea[name="consent_text"]').input_value().strip() == (
            ZH_CONSENT.strip()
        )
        page.screenshot(path=str(shots / f"{width}_settings_zh_saved.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        assert errors == []
        browser.close()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        stored = {r.key for r in s.exec(select(StudySetting).where(StudySetting.study_id == zh_id))}
        # The typed code; the study's other random code (vsr_core.codes) was drawn and kept
        # when the page first showed it.
        assert stored - set(STUDY_CODE_KEYS) == set() and "completion_code" in stored
        assert load_study_config(s, zh_id).completion_code == "ZHDONE"
        assert load_study_config(s, zh_id).consent_text == ZH_CONSENT
    engine.dispose()
    keep = os.environ.get("VSR_KEEP_SCREENSHOTS")
    if keep:
        shutil.copytree(shots, Path(keep) / f"settings_language_{width}", dirs_exist_ok=True)
