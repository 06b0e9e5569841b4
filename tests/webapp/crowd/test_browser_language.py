"""The Chinese study in a real browser: `vsr serve` + headless Debian Chromium (Playwright).

One site holds the default English study and the Chinese one (studies/vsr-zh.toml). Under
/s/vsr-zh/ an annotator consents, reads the instructions, filters the relations by typing
Chinese, swaps nothing, picks the photo with the keyboard and submits: the live preview shows
the Chinese caption that is stored. A second person then validates that caption in Chinese.
Screenshots of every page are saved in the test's tmp dir (Noto CJK renders the Chinese).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from tests.support.webapp_coco import make_pairs
from vsr_core.caption_language import grammar_of, render
from vsr_core.db import make_engine
from vsr_core.models import Annotation, Example, ImagePair, Vote
from vsr_core.studies import create_study
from vsr_core.study import save_study_config
from vsr_core.study_file import load_study

pytestmark = pytest.mark.browser

ZH_FILE = Path(__file__).resolve().parents[3] / "studies" / "vsr-zh.toml"
ZH = "/s/vsr-zh"


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    require_chromium()
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        s.commit()
        assert zh.id is not None
        for pair_id in make_pairs(s, coco_dir, 4)[2:]:
            pair = s.get(ImagePair, pair_id)
            assert pair is not None
            pair.study_id = zh.id
            s.add(pair)
        s.commit()
        save_study_config(s, {"gold_rate": 0.0, "generate_batch_size": 1,
                              "validate_batch_size": 1, "completion_code": "ZH-OK"}, zh.id)
    engine.dispose()
    env = {"SECRET_KEY": "browser-test-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


def test_caption_and_validate_in_chinese(server: str, sqlite_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    grammar = grammar_of(load_study(ZH_FILE).default_language)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        # The English study next door is still English.
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        errors = watch_errors(page)
        page.goto(server + "/start/generate?PROLIFIC_PID=en5f1e2d3c&STUDY_ID=st1&SESSION_ID=se0")
        expect(page.get_by_role("button", name="I agree, continue")).to_be_visible()
        assert page.locator("html").get_attribute("lang") == "en"

        page = browser.new_page(viewport={"width": 1440, "height": 900})
        errors += watch_errors(page)
        page.goto(f"{server}{ZH}/start/generate?PROLIFIC_PID=zh5f1e2d3c&STUDY_ID=st1&SESSION_ID=s1")
        assert page.locator("html").get_attribute("lang") == "zh-Hans"
        expect(page.get_by_role("heading", name="开始之前")).to_be_visible()
        page.screenshot(path=str(tmp_path / "zh_consent.png"), full_page=True)
        page.get_by_role("button", name="我同意，继续").click()
        expect(page.get_by_role("heading", name="撰写空间描述：说明")).to_be_visible()
        page.screenshot(path=str(tmp_path / "zh_instructions.png"), full_page=True)
        page.get_by_role("button", name=re.compile("开始本批")).click()

        expect(page.locator(".progress-text")).to_have_text("第 1 组，共 1 组")
        name_a = page.locator(".ent1 .toggle").nth(0).inner_text().strip()
        name_b = page.locator(".ent1 .toggle").nth(1).inner_text().strip()
        expect(page.locator("#caption-preview")).to_have_text(f"{name_a}___{name_b}。")
        expect(page.locator("#form-hint")).to_have_text("还需要选择：一个关系和句子成立的照片。")
        page.keyboard.press("/")
        page.keyboard.type("顶上")  # the Chinese name filters the chips
        expect(page.locator(".chip:not([hidden])")).to_have_count(1)
        expect(page.locator("#filter-count")).to_have_text("1 个匹配")
        page.keyboard.press("Enter")
        page.keyboard.press("s")  # swap: ENT1 is now the second object
        page.keyboard.press("2")
        caption = render(grammar, name_b, "on top of", name_a)
        assert caption == f"{name_b}在{name_a}顶上。"
        expect(page.locator("#caption-preview")).to_have_text(caption)
        expect(page.locator("#truth-preview")).to_have_text("对照片 2 成立，对照片 1 不成立。")
        expect(page.locator(".photo").nth(1).locator(".photo-verdict")).to_have_text("成立")
        expect(page.locator("#form-hint")).to_have_text("准备好了：按 Enter 提交。")
        page.screenshot(path=str(tmp_path / "zh_generate.png"))
        page.keyboard.press("Enter")
        expect(page.locator("#completion-code")).to_have_text("ZH-OK")
        expect(page.get_by_role("heading", name="谢谢，你已完成！")).to_be_visible()
        page.screenshot(path=str(tmp_path / "zh_done.png"))

        # Someone else validates the new caption, in Chinese.
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        errors += watch_errors(page)
        page.goto(f"{server}{ZH}/start/validate?PROLIFIC_PID=zh6a7b8c9d&STUDY_ID=st1&SESSION_ID=s2")
        page.get_by_role("button", name="我同意，继续").click()
        expect(page.get_by_role("heading", name="判断空间描述：说明")).to_be_visible()
        page.screenshot(path=str(tmp_path / "zh_validate_instructions.png"), full_page=True)
        page.get_by_role("button", name=re.compile("开始本批")).click()
        expect(page.locator("#caption")).to_have_text(caption)
        expect(page.locator("#btn-true")).to_contain_text("正确")
        page.wait_for_load_state("load")
        page.screenshot(path=str(tmp_path / "zh_validate.png"))
        page.keyboard.press("t")
        expect(page.locator("#completion-code")).to_have_text("ZH-OK")
        page.get_by_role("button", name="复制完成码").click()
        copied = re.compile("^(已复制。|请选中完成码并复制（Ctrl\\+C）。)$")
        expect(page.locator("#copy-status")).to_have_text(copied)
        page.screenshot(path=str(tmp_path / "zh_validate_done.png"))
        browser.close()
        assert errors == []

    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        (ann,) = s.exec(select(Annotation)).all()
        assert ann.relation == "on top of"
        examples = s.exec(select(Example).order_by(col(Example.id))).all()
        assert {(e.caption, e.relation) for e in examples} == {(caption, "on top of")}
        (vote,) = s.exec(select(Vote)).all()
        assert vote.value is True and vote.example_id in {e.id for e in examples}
    engine.dispose()
