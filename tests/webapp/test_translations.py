"""The worker pages' gettext catalogs are complete.

Messages are extracted from the sources afresh (babel.cfg, the same keywords as
scripts/extract_messages.sh), so a worker-facing English string added to a template, the
JS blob or an error message without a translation fails here, whether or not someone ran the
extraction. Placeholders must survive translation, and the committed .pot must be current.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po
from jinja2 import Environment

from webapp.http.i18n import LOCALES_DIR, Catalogs, install, read_catalog

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = {
    "_": None,
    "gettext": None,
    "ngettext": (1, 2),
    "N_": None,
    "PageError": (2,),
    "SubmissionError": (2,),
    "VoteError": (2,),
}
TRANSLATED = ["zh_Hans"]
PLACEHOLDER = re.compile(r"%\(\w+\)s|\{\w+\}")


def extracted() -> set[str]:
    with (ROOT / "babel.cfg").open(encoding="utf-8") as fh:
        # babel leaves this function unannotated
        method_map, options_map = parse_mapping_cfg(fh)  # type: ignore[no-untyped-call]
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
        str(ROOT), method_map, options_map, keywords=KEYWORDS
    ):
        found.update([message] if isinstance(message, str) else [m for m in message if m])
    return found


@pytest.fixture(scope="module")
def messages() -> set[str]:
    found = extracted()
    assert len(found) > 150  # the extraction really read the templates and the code
    return found


@pytest.mark.parametrize("locale", TRANSLATED)
def test_every_message_has_a_translation(messages: set[str], locale: str) -> None:
    catalog = read_catalog(LOCALES_DIR / locale / "LC_MESSAGES" / "messages.po")
    missing = sorted(m for m in messages if m not in catalog)
    assert missing == [], f"untranslated in {locale} (run scripts/extract_messages.sh): {missing}"
    for msgid in messages:
        translated = catalog[msgid]
        assert sorted(PLACEHOLDER.findall(translated)) == sorted(PLACEHOLDER.findall(msgid)), msgid


def test_the_template_is_current(messages: set[str]) -> None:
    with (LOCALES_DIR / "messages.pot").open("rb") as fh:
        pot = {str(m.id) for m in read_po(fh) if m.id}
    assert pot == messages, "run scripts/extract_messages.sh"


def test_the_chinese_catalog_is_found_for_the_study_code() -> None:
    catalogs = Catalogs()
    assert catalogs.languages == ["en", "zh_Hans"]
    zh = catalogs.translator("zh-Hans")
    assert zh.gettext("Submit") == "提交" and zh.code == "zh-Hans"
    assert catalogs.translator("en").gettext("Submit") == "Submit"
    assert catalogs.translator("fr").gettext("Submit") == "Submit"  # no catalog: English


PLURAL_ENTRY = """
msgid "%(num)s vote left"
msgid_plural "%(num)s votes left"
{strings}
"""
PLURAL_STRINGS = {
    "en": 'msgstr[0] ""\nmsgstr[1] ""',  # the source language: the msgids themselves
    "zh_Hans": 'msgstr[0] "还剩 %(num)s 票"',  # Chinese has one form (nplurals=1)
}


@pytest.fixture
def plural_catalogs(tmp_path: Path) -> Catalogs:
    """The shipped catalogs, each with a plural entry added."""
    for locale, strings in PLURAL_STRINGS.items():
        po = tmp_path / locale / "LC_MESSAGES" / "messages.po"
        po.parent.mkdir(parents=True)
        shipped = (LOCALES_DIR / locale / "LC_MESSAGES" / "messages.po").read_text("utf-8")
        po.write_text(shipped + PLURAL_ENTRY.format(strings=strings), "utf-8")
    return Catalogs(tmp_path)


def test_plural_entries_take_the_form_the_catalogs_rule_picks(
    plural_catalogs: Catalogs,
) -> None:
    en, zh = plural_catalogs.translator("en"), plural_catalogs.translator("zh-Hans")
    singular, plural = "%(num)s vote left", "%(num)s votes left"
    assert [en.ngettext(singular, plural, n) for n in (0, 1, 2)] == [plural, singular, plural]
    assert {zh.ngettext(singular, plural, n) for n in (0, 1, 2, 11)} == {"还剩 %(num)s 票"}
    assert zh.gettext("Submit") == "提交"  # the singular entries are still there
    # a language without a catalog: English's rule
    fr = plural_catalogs.translator("fr")
    assert [fr.ngettext(singular, plural, n) for n in (1, 3)] == [singular, plural]


def test_a_template_pluralizes_in_the_study_language(plural_catalogs: Catalogs) -> None:
    env = Environment(autoescape=True)
    install(env)
    template = env.from_string(
        "{% trans num=n %}{{ num }} vote left{% pluralize %}{{ num }} votes left{% endtrans %}"
    )

    def request(code: str) -> SimpleNamespace:
        study = SimpleNamespace(language=SimpleNamespace(code=code))
        return SimpleNamespace(
            scope={"path": "/validate", "root_path": ""},
            state=SimpleNamespace(study=study),
            app=SimpleNamespace(state=SimpleNamespace(catalogs=plural_catalogs)),
        )

    assert template.render(request=request("en"), n=1) == "1 vote left"
    assert template.render(request=request("en"), n=3) == "3 votes left"
    assert template.render(request=request("zh-Hans"), n=3) == "还剩 3 票"
