"""The worker pages' translations: one gettext catalog per language, picked per request by
the study's language (``request.state.study.language.code``).

Catalogs are the ``.po`` files under ``webapp/locales/<locale>/LC_MESSAGES/messages.po``
(``webapp/locales/messages.pot`` is their template, extracted by ``pybabel extract -F
babel.cfg``). They are read once per process with ``babel.messages.pofile.read_po`` and
compiled in memory into ``babel.support.Translations``: no compiled ``.mo`` is committed or
built, because a generated binary next to its source drifts the moment someone edits the
``.po`` and forgets to recompile, and a few hundred strings parse in milliseconds. Fuzzy or
empty entries fall back to English, as gettext does; plural entries take the form the
catalog's ``Plural-Forms`` rule picks.

The dashboard (``/admin``) stays English whatever study it looks at.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

from babel import Locale, UnknownLocaleError
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import NullTranslations, Translations
from jinja2 import pass_context
from starlette.requests import Request

LOCALES_DIR = Path(__file__).resolve().parents[1] / "locales"
DOMAIN = "messages"
SOURCE_LANGUAGE = "en"


def N_(message: str) -> str:
    """Marks a string for extraction where it is defined; translated where it is shown."""
    return message


@dataclass(frozen=True)
class Translator:
    """gettext for one language, English when a string has no translation."""

    code: str  # the study language's BCP 47 code ("zh-Hans"), for <html lang>
    translations: NullTranslations = field(default_factory=NullTranslations)

    def gettext(self, message: str) -> str:
        return self.translations.gettext(message)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.translations.ngettext(singular, plural, n)


ENGLISH = Translator(SOURCE_LANGUAGE)


def locale_dir_name(code: str) -> str | None:
    """The catalog folder of a BCP 47 code: "zh-Hans" -> "zh_Hans" (Babel's identifier)."""
    try:
        return str(Locale.parse(code, sep="-"))
    except (ValueError, UnknownLocaleError):
        return None


def _read_po(path: Path) -> Catalog:
    with path.open("rb") as fh:
        return read_po(fh)


def read_catalog(path: Path) -> dict[str, str]:
    """A catalog's translated singular entries, msgid -> msgstr (for checks of its coverage)."""
    return {
        str(m.id): str(m.string)
        for m in _read_po(path)
        if m.id and isinstance(m.id, str) and isinstance(m.string, str) and m.string and not m.fuzzy
    }


def compile_catalog(path: Path) -> Translations:
    """A ``.po`` compiled in memory (fuzzy and empty entries left out, as ``msgfmt`` does)."""
    compiled = BytesIO()
    write_mo(compiled, _read_po(path))
    compiled.seek(0)
    return Translations(compiled, domain=DOMAIN)


class Catalogs:
    """Every shipped catalog, read at startup; one Translator per language code."""

    def __init__(self, root: Path = LOCALES_DIR) -> None:
        self.root = root
        self._by_dir = {
            po.parent.parent.name: compile_catalog(po)
            for po in sorted(root.glob(f"*/LC_MESSAGES/{DOMAIN}.po"))
        }
        self._translators: dict[str, Translator] = {}
        self._lock = threading.Lock()

    @property
    def languages(self) -> list[str]:
        return sorted(self._by_dir)

    def translator(self, code: str) -> Translator:
        with self._lock:
            found = self._translators.get(code)
        if found is not None:
            return found
        name = locale_dir_name(code) or ""
        translations = self._by_dir.get(name)
        if translations is None and "_" in name:  # "zh-Hans-CN": the zh_Hans catalog
            translations = self._by_dir.get(name.rsplit("_", 1)[0])
        found = Translator(code, translations if translations is not None else NullTranslations())
        with self._lock:
            self._translators[code] = found
        return found


def catalogs(app: Any) -> Catalogs:
    found = getattr(app.state, "catalogs", None)
    if found is None:
        found = Catalogs()
        app.state.catalogs = found
    return found


def translator(request: Request) -> Translator:
    """The request's language: its study's, English on the dashboard or without a study."""
    path: str = request.scope.get("path", "")
    root: str = request.scope.get("root_path", "")
    if path.startswith(root):
        path = path[len(root) :]
    if path == "/admin" or path.startswith("/admin/"):
        return ENGLISH
    study = getattr(request.state, "study", None)
    if study is None:
        return ENGLISH
    return catalogs(request.app).translator(study.language.code)


def gettext(request: Request, message: str) -> str:
    return translator(request).gettext(message)


@pass_context
def _context_gettext(context: Any, message: str) -> str:
    request = context.get("request")
    return translator(request).gettext(message) if request is not None else message


@pass_context
def _context_ngettext(context: Any, singular: str, plural: str, n: int) -> str:
    request = context.get("request")
    found = translator(request) if request is not None else ENGLISH
    return found.ngettext(singular, plural, n)


def install(env: Any) -> None:
    """``{% trans %}``, ``_()`` and ``lang`` in templates, resolved per rendered request."""
    env.add_extension("jinja2.ext.i18n")
    env.policies["ext.i18n.trimmed"] = True  # as babel.cfg extracts them
    env.install_gettext_callables(  # newstyle: _("... %(x)s", x=...) escapes x
        gettext=_context_gettext, ngettext=_context_ngettext, newstyle=True
    )
    env.globals["html_lang"] = _html_lang


@pass_context
def _html_lang(context: Any) -> str:
    request = context.get("request")
    return translator(request).code if request is not None else SOURCE_LANGUAGE
