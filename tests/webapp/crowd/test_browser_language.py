"""The Chinese study in a real browser, from a fresh database to its export, next to the
English one: `vsr study create`, `vsr sample --study`, `vsr serve` + headless Debian Chromium
(Playwright), `vsr match --study vsr-zh`, `build-dataset --study vsr-zh`.

One site holds the default English study and the Chinese one (studies/vsr-zh.toml). Under
/s/vsr-zh/ an annotator consents, reads the instructions, filters the relations by typing
Chinese, swaps the objects, picks the photo with the keyboard and submits: the live preview
shows the Chinese caption that is stored; four more captions follow. A second person
validates them in Chinese; matching writes Chinese distractors, which a third person rejects
in the browser; the export then holds Chinese multiple-choice items. Meanwhile an English
annotator captions in the English study. Screenshots of every page are saved in the test's
tmp dir, or in $VSR_SCREENSHOT_DIR when set (Noto CJK renders the Chinese).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, col, select

from tests.support.admins import create_owner
from tests.support.browser import launch_chromium, require_chromium, running_site, watch_errors
from vsr_core.caption_language import grammar_of, parse, render
from vsr_core.db import make_engine
from vsr_core.models import Annotation, Example, Image, ImagePair, McItem, Study, Vote
from vsr_core.studies.definition import load_study
from vsr_core.studies.settings import save_study_config

pytestmark = pytest.mark.browser

ZH_FILE = Path(__file__).resolve().parents[3] / "studies" / "vsr-zh.toml"
ZH = "/s/vsr-zh"
ADMIN_PASSWORD = "browser-admin-password"


BIN = Path(sys.executable).parent  # this checkout's console scripts


def cli(*args: str) -> str:
    """A console script as a user runs it; fails the test with its stderr."""
    proc = subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def server(sqlite_url: str, coco_dir: Path, tmp_path: Path) -> Iterator[str]:
    """A fresh database; the Chinese study made from its file and both studies sampled
    with the CLI from the real COCO subset (the relaxed area rule gives it enough pairs)."""
    require_chromium()
    db = ("--database-url", sqlite_url)
    subset = str(coco_dir / "annotations" / "instances_val2017_subset.json")
    assert "created study vsr-zh" in cli("vsr", "study", "create", "--file", str(ZH_FILE), *db)
    sample = ("--coco", subset, "--min-area", "5000", *db)
    cli("vsr", "sample", "--study", "vsr-zh", "--pairs", "5", "--seed", "1", *sample)
    cli("vsr", "sample", "--pairs", "2", "--seed", "2", *sample)
    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        zh_id = s.exec(select(Study.id).where(Study.slug == "vsr-zh")).one()
        assert zh_id is not None
        assert len(s.exec(select(ImagePair).where(ImagePair.study_id == zh_id)).all()) == 5
        # One vote decides an Example here, so a single validator's work is enough to match.
        save_study_config(
            s,
            {
                "gold_rate": 0.0,
                "generate_batch_size": 5,
                "validate_batch_size": 20,
                "votes_per_example": 1,
                "max_votes_per_example": 1,
                "completion_code": "ZH-OK",
            },
            zh_id,
        )
        save_study_config(s, {"gold_rate": 0.0, "generate_batch_size": 1}, 1)
        create_owner(s, "admin", ADMIN_PASSWORD)
    engine.dispose()
    env = {"SECRET_KEY": "browser-test-" + "k" * 32, "IMAGE_CACHE_DIR": str(tmp_path / "cache")}
    with running_site(sqlite_url, coco_dir / "images", tmp_path, env) as base:
        yield base


def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("VSR_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def validate_by_label(page: Any, sqlite_url: str) -> int:
    """Answer every item of an open validation batch as its Example's label says (the item is
    found by its caption and the COCO id under the photo); returns how many were answered."""
    engine = make_engine(sqlite_url)
    answered = 0
    try:
        while page.locator("#completion-code").count() == 0:
            caption = page.locator("#caption").inner_text().strip()
            coco_id = int(page.locator("figcaption").inner_text().split()[1])
            with Session(engine) as s:
                (label,) = s.exec(
                    select(Example.label)
                    .join(Image, col(Image.id) == Example.image_id)
                    .where(Example.caption == caption, Image.coco_id == coco_id)
                ).all()
            with page.expect_navigation():
                page.keyboard.press("t" if label else "f")
            answered += 1
    finally:
        engine.dispose()
    return answered


def validator(
    browser: Any,
    link: str,
    server: str,
    errors: list[str],
    sqlite_url: str,
    shot: Path | None = None,
) -> int:
    """A new person takes a Chinese validation batch and answers it by the labels."""
    from playwright.sync_api import expect

    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    errors += watch_errors(page)
    page.goto(server + link)
    page.get_by_role("button", name="我同意，继续").click()
    page.get_by_role("button", name=re.compile("开始本批")).click()
    expect(page.locator("#caption")).to_have_text(re.compile("。$"))
    page.wait_for_load_state("load")
    if shot is not None:
        page.screenshot(path=str(shot))
    return validate_by_label(page, sqlite_url)


# The four captions after the first: a Chinese filter that leaves one relation, its id.
MORE = [("左边", "left of"), ("右边", "right of"), ("下方", "below"), ("很远", "far from")]


def _photos_loaded(page: Any) -> None:
    """Both photos of the pair really arrived (so the screenshot shows them)."""
    from playwright.sync_api import expect

    photos = page.locator(".photo img")
    expect(photos).to_have_count(2)
    for img in photos.all():
        expect(img).to_have_js_property("complete", True)
        assert img.evaluate("i => i.naturalWidth") > 0


def test_caption_and_validate_in_chinese(server: str, sqlite_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    out = shots(tmp_path)
    grammar = grammar_of(load_study(ZH_FILE).default_language)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        # The English study next door is still English, and takes a caption meanwhile.
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        errors = watch_errors(page)
        page.goto(server + "/start/generate?PROLIFIC_PID=en5f1e2d3c&STUDY_ID=st1&SESSION_ID=se0")
        assert page.locator("html").get_attribute("lang") == "en"
        page.get_by_role("button", name="I agree, continue").click()
        page.get_by_role("button", name=re.compile("Start the batch")).click()
        expect(page.locator("#caption-preview")).to_contain_text("___")
        page.keyboard.press("/")
        page.keyboard.type("on top of")
        page.keyboard.press("Enter")
        page.keyboard.press("1")
        english = re.compile(r"^The .+ is on top of the .+\.$")
        expect(page.locator("#caption-preview")).to_have_text(english)
        en_caption = page.locator("#caption-preview").inner_text()
        _photos_loaded(page)
        page.screenshot(path=str(out / "en_generate.png"))
        page.keyboard.press("Enter")
        expect(page.locator("#completion-code")).to_be_visible()

        page = browser.new_page(viewport={"width": 1440, "height": 900})
        errors += watch_errors(page)
        page.goto(f"{server}{ZH}/start/generate?PROLIFIC_PID=zh5f1e2d3c&STUDY_ID=st1&SESSION_ID=s1")
        assert page.locator("html").get_attribute("lang") == "zh-Hans"
        expect(page.get_by_role("heading", name="开始之前")).to_be_visible()
        page.screenshot(path=str(out / "zh_consent.png"), full_page=True)
        page.get_by_role("button", name="我同意，继续").click()
        expect(page.get_by_role("heading", name="撰写空间描述：说明")).to_be_visible()
        page.screenshot(path=str(out / "zh_instructions.png"), full_page=True)
        page.get_by_role("button", name=re.compile("开始本批")).click()

        expect(page.locator(".progress-text")).to_have_text("第 1 组，共 5 组")
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
        _photos_loaded(page)
        page.screenshot(path=str(out / "zh_generate.png"))
        page.keyboard.press("Enter")
        captions = [caption]
        for n, (typed, rel) in enumerate(MORE, start=2):
            expect(page.locator(".progress-text")).to_have_text(f"第 {n} 组，共 5 组")
            page.keyboard.press("/")
            page.keyboard.type(typed)
            expect(page.locator(".chip:not([hidden])")).to_have_count(1)
            page.keyboard.press("Enter")
            page.keyboard.press("1")
            expect(page.locator("#form-hint")).to_have_text("准备好了：按 Enter 提交。")
            shown = page.locator("#caption-preview").inner_text()
            assert parse(grammar, shown).relation == rel, shown
            captions.append(shown)
            page.keyboard.press("Enter")
        expect(page.locator("#completion-code")).to_have_text("ZH-OK")
        expect(page.get_by_role("heading", name="谢谢，你已完成！")).to_be_visible()
        page.screenshot(path=str(out / "zh_done.png"))

        # Someone else validates the new captions (each True and False Example), in Chinese.
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        errors += watch_errors(page)
        page.goto(f"{server}{ZH}/start/validate?PROLIFIC_PID=zh6a7b8c9d&STUDY_ID=st1&SESSION_ID=s2")
        page.get_by_role("button", name="我同意，继续").click()
        expect(page.get_by_role("heading", name="判断空间描述：说明")).to_be_visible()
        page.screenshot(path=str(out / "zh_validate_instructions.png"), full_page=True)
        page.get_by_role("button", name=re.compile("开始本批")).click()
        expect(page.locator("#caption")).to_have_text(caption)
        expect(page.locator("#btn-true")).to_contain_text("正确")
        page.wait_for_load_state("load")
        page.screenshot(path=str(out / "zh_validate.png"))
        # A validator is shown one Example of each caption (its True or its False image).
        assert validate_by_label(page, sqlite_url) == 5
        expect(page.locator("#completion-code")).to_have_text("ZH-OK")
        page.get_by_role("button", name="复制完成码").click()
        copied = re.compile("^(已复制。|请选中完成码并复制（Ctrl\\+C）。)$")
        expect(page.locator("#copy-status")).to_have_text(copied)
        page.screenshot(path=str(out / "zh_validate_done.png"))
        assert (
            validator(
                browser,
                f"{ZH}/start/validate?PROLIFIC_PID=zh1a2b3c4d&STUDY_ID=st1&SESSION_ID=s3",
                server,
                errors,
                sqlite_url,
            )
            == 5
        )

        # Matching writes Chinese distractors and sends them to validators as negatives.
        db = ("--database-url", sqlite_url)
        report = cli("vsr", "match", "--study", "vsr-zh", "--k", "1", *db)
        assert "kept True Examples" in report, report
        negatives = validator(
            browser,
            f"{ZH}/start/validate?PROLIFIC_PID=zh7e8f9a0b&STUDY_ID=st1&SESSION_ID=s4",
            server,
            errors,
            sqlite_url,
            out / "zh_validate_negative.png",
        )
        assert negatives >= 1

        # The dashboard on the same server: each study's workers table holds its own people.
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors += watch_errors(page)
        page.goto(server + "/admin/workers")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill(ADMIN_PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.goto(server + "/admin/workers?study=vsr-zh")
        expect(page.get_by_role("heading", name="Workers", exact=True)).to_be_visible()
        rows = page.locator("table.workers tr[data-worker]")
        expect(rows).to_have_count(4)
        assert sorted(rows.locator("td:nth-child(2) a").all_inner_texts()) == sorted(
            ["zh5f1e2d3c", "zh6a7b8c9d", "zh1a2b3c4d", "zh7e8f9a0b"]
        )
        page.screenshot(path=str(out / "admin_workers_zh.png"), full_page=True)
        page.goto(server + "/admin/workers?study=vsr")
        expect(rows).to_have_count(1)
        assert rows.locator("td:nth-child(2) a").all_inner_texts() == ["en5f1e2d3c"]
        page.screenshot(path=str(out / "admin_workers_en.png"), full_page=True)
        browser.close()
        assert errors == []

    engine = make_engine(sqlite_url)
    with Session(engine) as s:
        zh_id = s.exec(select(Study.id).where(Study.slug == "vsr-zh")).one()
        anns = s.exec(select(Annotation).order_by(col(Annotation.id))).all()
        assert sorted(a.relation or "" for a in anns) == sorted(
            ["on top of", "on top of", *(r for _, r in MORE)]
        )  # one English, five Chinese
        human = s.exec(select(Example).where(Example.origin == "human")).all()
        zh_human = [e for e in human if e.study_id == zh_id]
        assert {e.caption for e in zh_human} == set(captions) and len(zh_human) == 10
        assert [e.caption for e in human if e.study_id == 1] == [en_caption, en_caption]
        adversarial = s.exec(select(Example).where(Example.origin == "adversarial")).all()
        assert len(adversarial) == negatives and {e.study_id for e in adversarial} == {zh_id}
        for e in adversarial:
            assert parse(grammar, e.caption).relation == e.relation  # a Chinese caption
        (vote,) = s.exec(select(Vote).where(Vote.example_id == zh_human[0].id)).all()
        assert vote.value is zh_human[0].label
        assert s.exec(select(McItem)).all()
    engine.dispose()

    # The Chinese export: its rows, Chinese multiple-choice items the validators cleared;
    # the English study's captions beside it (nothing validated there: only its raw part)
    # hold only the English caption.
    zh_out, en_out = tmp_path / "zh-dataset", tmp_path / "en-dataset"
    cli("build-dataset", "--study", "vsr-zh", "--out", str(zh_out), "--database-url", sqlite_url)
    cli("build-dataset", "--only", "raw", "--out", str(en_out), "--database-url", sqlite_url)
    raw = [json.loads(x) for x in (zh_out / "all_raw.jsonl").read_text().splitlines()]
    assert {r["caption"] for r in raw if r.get("origin", "human") == "human"} >= set(captions)
    assert {(r["study"], r["language"]) for r in raw} == {("vsr-zh", "zh-Hans")}
    mc = [
        json.loads(x)
        for f in sorted((zh_out / "mc").glob("*.jsonl"))
        for x in f.read_text().splitlines()
    ]
    assert mc, "no validated multiple-choice item in the Chinese export"
    for item in mc:
        for choice, rel in zip(item["choices"], item["relations"], strict=True):
            assert parse(grammar, choice).relation == rel
    en_raw = [json.loads(x) for x in (en_out / "all_raw.jsonl").read_text().splitlines()]
    assert {r["caption"] for r in en_raw} == {en_caption}
    assert {(r["study"], r["language"]) for r in en_raw} == {("vsr", "en")}
