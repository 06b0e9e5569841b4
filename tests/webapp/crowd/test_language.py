"""The Chinese study's worker pages, end to end through the app (both backends).

The study made from studies/vsr-zh.toml sits next to the default English one. An annotator
who enters under /s/vsr-zh/ reads the consent, the instructions and the task page in
Chinese, picks from the Chinese relation vocabulary (its switched-off relations hidden), and
stores the Chinese caption with the relation's id; a validator is then shown that caption.
No page has English UI text left over, and the English study's pages are unchanged.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.webapp_coco import client_for, form_field, make_app, make_pairs
from vsr_core.caption_language import render_concepts
from vsr_core.codes import CODE_ALPHABET, CODE_LENGTH
from vsr_core.models import Annotation, Example, ImagePair
from vsr_core.studies.definition import load_study
from vsr_core.studies.settings import save_study_config
from vsr_core.studies.store import create_study

ZH_FILE = Path(__file__).resolve().parents[3] / "studies" / "vsr-zh.toml"
ZH = "/s/vsr-zh"
ZH_LANG = load_study(ZH_FILE).default_language

# Text that may stay Latin on a Chinese page: names, codes, keys and the licence of a photo.
ALLOWED = re.compile(
    r"COCO \d+|Flickr[^\n]*License|Prolific|Amazon Mechanical Turk|MTurk|HIT|ENT1|ENT2|Enter|"
    r"Ctrl\+C|JSON|ID|"
    r"X-CSRF-Token|\b[A-Z0-9]\b|VSR[A-Z]*|MS-COCO|Content-Type: application/json|"
    # a study's completion or screen-out code (vsr_core.codes): no words, nothing to translate
    rf"\b[{CODE_ALPHABET}]{{{CODE_LENGTH}}}\b"
)
ENGLISH_WORD = re.compile(r"[A-Za-z]{2,}")


VOID = {"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class _Visible(HTMLParser):
    """Text a worker reads or hears: text nodes and alt/title/placeholder/aria-label, outside
    blocks hidden from everyone (``aria-hidden="true"`` + ``inert``: the agent canaries,
    docs/quality.md)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0
        self._hidden = 0  # open elements inside an aria-hidden, inert block

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        names = dict(attrs)
        if self._hidden or (names.get("aria-hidden") == "true" and "inert" in names):
            self._hidden += tag not in VOID
            return
        for name, value in attrs:
            if name in ("alt", "title", "placeholder", "aria-label") and value:
                self.parts.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1
        if self._hidden and tag not in VOID:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip and not self._hidden and data.strip():
            self.parts.append(data.strip())


def english_left(html: str) -> list[str]:
    parser = _Visible()
    parser.feed(html)
    left = []
    for part in parser.parts:
        rest = ALLOWED.sub(" ", part)
        if ENGLISH_WORD.search(rest):
            left.append(part)
    return left


def js_strings(html: str) -> dict[str, str]:
    m = re.search(r'<script type="application/json" id="i18n-strings">(.*?)</script>', html, re.S)
    assert m, "no i18n-strings blob"
    return json.loads(m.group(1))  # type: ignore[no-any-return]


@pytest.fixture
def site(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> Any:
    with Session(engine) as s:
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        s.commit()
        pair_ids = make_pairs(s, coco_dir, 4)
        for pair_id in pair_ids[2:]:
            pair = s.get(ImagePair, pair_id)
            assert pair is not None
            pair.study_id = zh.id  # type: ignore[assignment]
            s.add(pair)
        s.commit()
        assert zh.id is not None
        save_study_config(s, {"gold_rate": 0.0, "generate_batch_size": 2}, zh.id)
    return make_app(db_url, tmp_path, image_root=coco_dir / "images")


def check_chinese(html: str) -> None:
    assert '<html lang="zh-Hans">' in html
    assert english_left(html) == []


def test_chinese_study_pages_caption_and_validation(site: Any, engine: Engine) -> None:
    client = client_for(site)
    r = client.get(
        f"{ZH}/start/generate?PROLIFIC_PID=zh0001&STUDY_ID=s1&SESSION_ID=e1", follow_redirects=False
    )
    assert r.headers["location"] == f"{ZH}/consent/generate"
    page = client.get(f"{ZH}/consent/generate")
    check_chinese(page.text)
    assert "这是一项研究人们如何描述照片中物体位置的研究" in page.text  # the file's consent
    assert "<strong>你要做的：</strong>" in page.text  # through the Markdown renderer
    csrf = form_field(page.text, "csrf")
    r = client.post(
        f"{ZH}/consent/generate", data={"decision": "agree", "csrf": csrf}, follow_redirects=False
    )
    page = client.get(r.headers["location"])
    check_chinese(page.text)
    assert "撰写空间描述：说明" in page.text and "笔记本电脑在猫顶上。" in page.text
    assert "你会看到并排的两张照片" in page.text  # the file's instructions
    r = client.post(f"{ZH}/begin/generate", data={"csrf": csrf}, follow_redirects=False)
    assert r.headers["location"] == f"{ZH}/generate"
    page = client.get(f"{ZH}/generate")
    check_chinese(page.text)
    html = page.text
    # The vocabulary of the Chinese study: its names, its categories, its switched-off
    # relations ("deep down" = 在…深处) left out.
    chips = dict(
        re.findall(r'name="relation" value="([^"]+)" required ><span>([^<]+)</span>', html)
    )
    assert chips["on top of"] == "在…顶上" and chips["facing away from"] == "背对"
    assert "deep down" not in chips and "在…深处" not in html
    assert '<span class="group-name">邻接</span>' in html
    strings = js_strings(html)
    assert strings["ready"] == "准备好了：按 Enter 提交。"
    assert strings["blank"] == "{first}___{second}。"
    fields = {k: form_field(html, k) for k in ("assignment_id", "client_token", "csrf")}
    lease_pair = None
    with Session(engine) as s:
        zh_pairs = s.exec(select(ImagePair).order_by(col(ImagePair.id))).all()[2:]
    found = re.search(r'id="captions-data">(.*?)</script>', html, re.S)
    assert found
    captions = json.loads(found.group(1))
    r = client.post(
        f"{ZH}/generate",
        data=dict(fields, action="submit", relation="on top of", ent1="b", true_image="2"),
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        (ann,) = s.exec(select(Annotation)).all()
        lease_pair = s.get(ImagePair, ann.pair_id)
        assert lease_pair is not None and lease_pair.id in {p.id for p in zh_pairs}
        examples = s.exec(select(Example)).all()
    caption = render_concepts(ZH_LANG, lease_pair.concept_b, "on top of", lease_pair.concept_a)
    assert caption.endswith("。") and "在" in caption and "顶上" in caption
    assert captions["on top of"]["b"] == caption  # the page showed what is stored
    assert (ann.relation, ann.subj, ann.obj) == (
        "on top of",
        lease_pair.concept_b,
        lease_pair.concept_a,
    )
    assert sorted((e.caption, e.relation, e.label) for e in examples) == [
        (caption, "on top of", False),
        (caption, "on top of", True),
    ]
    # An English relation name is not a Chinese study's relation (a 4xx page, in Chinese).
    page = client.get(f"{ZH}/generate")
    fields = {k: form_field(page.text, k) for k in ("assignment_id", "client_token", "csrf")}
    r = client.post(
        f"{ZH}/generate",
        data=dict(fields, action="submit", relation="deep down", ent1="a", true_image="1"),
    )
    assert r.status_code == 422
    check_chinese(r.text)
    assert "有些回答缺失或无效" in r.text
    assert "这不是本研究提供的关系；请从列表中选择一个。" in r.text

    # A validator of the Chinese study sees the Chinese caption, in a Chinese page.
    validator = client_for(site)
    r = validator.get(
        f"{ZH}/start/validate?PROLIFIC_PID=zh0002&STUDY_ID=s1&SESSION_ID=e2", follow_redirects=False
    )
    page = validator.get(f"{ZH}/consent/validate")
    check_chinese(page.text)
    csrf = form_field(page.text, "csrf")
    validator.post(f"{ZH}/consent/validate", data={"decision": "agree", "csrf": csrf})
    page = validator.get(f"{ZH}/instructions/validate")
    check_chinese(page.text)
    r = validator.post(f"{ZH}/begin/validate", data={"csrf": csrf}, follow_redirects=False)
    page = validator.get(f"{ZH}/validate")
    assert page.status_code == 200, page.text
    check_chinese(page.text)
    assert f'<p class="v-caption" id="caption">{caption}</p>' in page.text
    assert "这句描述对这张照片<strong>正确</strong>吗？" in page.text

    # Finishing early: the finish and done pages, and the copy button's strings.
    page = validator.get(f"{ZH}/finish/validate")
    check_chinese(page.text)
    r = validator.post(f"{ZH}/finish/validate", data={"csrf": csrf}, follow_redirects=False)
    page = validator.get(r.headers["location"])
    check_chinese(page.text)

    # An unknown task and the screen-out page, in Chinese too.
    page = validator.get(f"{ZH}/consent/nosuchtask")
    assert page.status_code == 404 and "本研究中没有这个任务。" in page.text
    check_chinese(page.text)


def test_relations_enabled_still_applies_in_chinese(site: Any, engine: Engine) -> None:
    """The dashboard's run-time list narrows the Chinese vocabulary (and may switch a relation
    of the file back on); a relation outside it is refused."""
    with Session(engine) as s:
        zh_id = s.exec(select(ImagePair.study_id).order_by(col(ImagePair.id).desc())).first()
        assert zh_id is not None and zh_id != 1
        save_study_config(s, {"relations_enabled": ["left of", "right of", "up"]}, zh_id)
    client = client_for(site)
    client.get(f"{ZH}/start/generate?PROLIFIC_PID=zh0003&STUDY_ID=s1&SESSION_ID=e3")
    csrf = form_field(client.get(f"{ZH}/consent/generate").text, "csrf")
    client.post(f"{ZH}/consent/generate", data={"decision": "agree", "csrf": csrf})
    client.post(f"{ZH}/begin/generate", data={"csrf": csrf})
    page = client.get(f"{ZH}/generate")
    chips = dict(
        re.findall(r'name="relation" value="([^"]+)" required ><span>([^<]+)</span>', page.text)
    )
    assert chips == {"left of": "在…左边", "right of": "在…右边", "up": "沿…向上"}
    fields = {k: form_field(page.text, k) for k in ("assignment_id", "client_token", "csrf")}
    r = client.post(
        f"{ZH}/generate",
        data=dict(fields, action="submit", relation="on top of", ent1="a", true_image="1"),
    )
    assert r.status_code == 422
    r = client.post(
        f"{ZH}/generate",
        data=dict(fields, action="submit", relation="up", ent1="a", true_image="1"),
        follow_redirects=False,
    )
    assert r.status_code == 303
    with Session(engine) as s:
        (example, _) = s.exec(select(Example)).all()
        assert example.relation == "up" and "沿" in example.caption and "向上" in example.caption


def test_chinese_preview_screenout_and_home(site: Any) -> None:
    """The MTurk preview (with the task's Chinese vocabulary), the screen-out page, the
    study's home and a declined consent: all Chinese."""
    client = client_for(site)
    page = client.get(f"{ZH}/start/generate?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=H1")
    assert page.status_code == 200
    check_chinese(page.text)
    assert "在…顶上" in page.text and "任务的样子" in page.text
    for path in ("/screenout", "/"):
        page = client.get(ZH + path)
        assert page.status_code == 200
        check_chinese(page.text)
    client.get(f"{ZH}/start/validate?PROLIFIC_PID=zh0009&STUDY_ID=s1&SESSION_ID=e9")
    csrf = form_field(client.get(f"{ZH}/consent/validate").text, "csrf")
    page = client.post(f"{ZH}/consent/validate", data={"decision": "decline", "csrf": csrf})
    check_chinese(page.text)
    assert "你选择了不参与" in page.text


def test_english_study_is_unchanged_and_the_dashboard_stays_english(site: Any) -> None:
    client = client_for(site)
    client.get("/start/generate?PROLIFIC_PID=en0001&STUDY_ID=s1&SESSION_ID=e1")
    page = client.get("/consent/generate")
    assert '<html lang="en">' in page.text and "I agree, continue" in page.text
    page = client.get(f"{ZH}/")
    assert '<html lang="zh-Hans">' in page.text and "空间描述研究" in page.text
    check_chinese(page.text)
    page = client.get("/admin/login?study=vsr-zh")
    assert '<html lang="en">' in page.text
