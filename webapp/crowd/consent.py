"""The study's consent text: the researcher's own words (study settings), shown safely.

Written in a strict Markdown subset by markdown-it-py (a well-kept CommonMark parser):
paragraphs, lists, emphasis, headings and links. Raw HTML is off (``<script>`` shows as
text), images are off (the consent page loads nothing from elsewhere), and markdown-it's
link check drops ``javascript:``-style addresses. ``{minutes}`` and ``{items}`` become the
batch's time limit and size for the task at hand, so they never drift from the settings.
"""

from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt
from markupsafe import Markup

PLACEHOLDERS = ("{minutes}", "{items}")


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    return md.disable(["image", "html_block", "html_inline"])


def render_consent(text: str, minutes: int, items: int) -> Markup:
    """The consent text as safe HTML, with the batch's minutes and size filled in."""
    filled = text.replace("{minutes}", str(minutes)).replace("{items}", str(items))
    return Markup(_parser().render(filled))  # noqa: S704 - markdown-it escapes; HTML is off


def render_text(text: str) -> Markup:
    """A study text (its instructions) as safe HTML, in the same Markdown subset."""
    return Markup(_parser().render(text))  # noqa: S704 - markdown-it escapes; HTML is off
