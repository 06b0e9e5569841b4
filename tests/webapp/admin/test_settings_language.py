"""The settings form of a study in another language: it shows the study's own consent (from
its file, in its language) and a save stores only the fields the admin edited, so saving the
Chinese study's completion code never replaces its Chinese consent with English. Plain HTTP,
both backends; the form is sent back as a browser sends it (every field it holds)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.webapp.admin.test_studies import dashboard  # noqa: F401 - the fixture
from tests.webapp.http.test_studies import ZH_FILE
from vsr_core.models import StudySetting
from vsr_core.studies.definition import load_study
from vsr_core.studies.settings import DEFAULT_CONSENT, load_study_config, save_study_config

ZH_CONSENT = load_study(ZH_FILE).default_language.texts.consent
ENGLISH_FIRST_LINE = DEFAULT_CONSENT.splitlines()[0]


class _Form(HTMLParser):
    """The successful controls of the settings form, as a browser submits them: inputs
    (checkboxes only when ticked), textareas (one leading newline dropped, CRLF line ends)
    and selected options."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, str]] = []
        self._in_form = False
        self._textarea: str | None = None
        self._text = ""
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("action") == "/admin/settings":
            self._in_form = True
        if not self._in_form:
            return
        if tag == "input" and "name" in a:
            if a.get("type") == "checkbox":
                if "checked" in a:
                    self.fields.append((a["name"], a.get("value") or "on"))
            else:
                self.fields.append((a["name"], a.get("value", "")))
        elif tag == "textarea":
            self._textarea, self._text = a["name"], ""
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select and "selected" in a:
            self.fields.append((self._select, a["value"]))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._textarea is not None:
            text = self._text[1:] if self._text.startswith("\n") else self._text
            self.fields.append((self._textarea, text.replace("\n", "\r\n")))
            self._textarea = None
        elif tag == "select":
            self._select = None
        elif tag == "form":
            self._in_form = False


def browser_form(html: str) -> dict[str, Any]:
    parser = _Form()
    parser.feed(html)
    out: dict[str, Any] = {}
    for name, value in parser.fields:
        if name in out:
            out[name] = [*out[name], value] if isinstance(out[name], list) else [out[name], value]
        else:
            out[name] = value
    return out


def _stored(engine: Engine, study_id: int) -> dict[str, Any]:
    with Session(engine) as s:
        rows = s.exec(select(StudySetting).where(StudySetting.study_id == study_id))
        return {r.key: r.value for r in rows}


def test_the_chinese_settings_form_shows_and_keeps_its_chinese_consent(
    dashboard: tuple[TestClient, str, int],  # noqa: F811
    engine: Engine,  # noqa: F811
) -> None:
    client, _, zh_id = dashboard
    page = client.get("/admin/settings?study=vsr-zh")
    assert page.status_code == 200
    form = browser_form(page.text)
    assert form["consent_text"].replace("\r\n", "\n").strip() == ZH_CONSENT.strip()
    assert ENGLISH_FIRST_LINE not in page.text
    before = _stored(engine, zh_id)

    form["completion_code"] = "ZHDONE"
    r = client.post("/admin/settings", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    assert _stored(engine, zh_id) == before | {"completion_code": "ZHDONE"}
    with Session(engine) as s:
        assert load_study_config(s, zh_id).consent_text == ZH_CONSENT
    worker = TestClient(client.app)
    worker.get("/s/vsr-zh/start/validate?PROLIFIC_PID=p1&STUDY_ID=s&SESSION_ID=x")
    consent = worker.get("/s/vsr-zh/consent/validate").text
    assert "这是一项研究人们如何描述照片中物体位置的研究" in consent
    assert "This is a research study" not in consent

    # Sent back untouched, nothing changes (and the admin is told so).
    page = client.get("/admin/settings")
    r = client.post("/admin/settings", data=browser_form(page.text), follow_redirects=False)
    assert r.status_code == 303
    assert _stored(engine, zh_id) == before | {"completion_code": "ZHDONE"}

    # An edited consent is stored as typed, and wins over the file's.
    form = browser_form(client.get("/admin/settings").text)
    form["consent_text"] = "我们的同意书。{minutes} 分钟。"
    r = client.post("/admin/settings", data=form, follow_redirects=False)
    assert r.status_code == 303
    assert _stored(engine, zh_id)["consent_text"] == "我们的同意书。{minutes} 分钟。"


def test_a_value_shown_rounded_or_changed_meanwhile_is_left_alone(
    dashboard: tuple[TestClient, str, int],  # noqa: F811
    engine: Engine,  # noqa: F811
) -> None:
    client, _, zh_id = dashboard
    with Session(engine) as s:
        save_study_config(s, {"keep_threshold": 0.6153}, zh_id)  # shown as 0.615
    form = browser_form(client.get("/admin/settings?study=vsr-zh").text)
    assert form["keep_threshold"] == "0.615"
    # Another admin changes the votes meanwhile; this admin's form still shows the old value.
    with Session(engine) as s:
        save_study_config(s, {"votes_per_example": 4}, zh_id)
    form["gold_rate"] = "0.1"
    r = client.post("/admin/settings", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        config = load_study_config(s, zh_id)
    assert (config.keep_threshold, config.votes_per_example, config.gold_rate) == (0.6153, 4, 0.1)


def test_the_english_default_stored_by_the_old_form_gives_way_to_the_studys_text(
    dashboard: tuple[TestClient, str, int],  # noqa: F811
    engine: Engine,  # noqa: F811
) -> None:
    _, _, zh_id = dashboard
    with Session(engine) as s:
        s.add(StudySetting(study_id=zh_id, key="consent_text", value=DEFAULT_CONSENT.strip()))
        s.commit()
        assert load_study_config(s, zh_id).consent_text == ZH_CONSENT
        assert load_study_config(s, 1).consent_text == DEFAULT_CONSENT
