"""Render and parse captions of the VSR template "The ENT1 (is) RELATION the ENT2."

One pair of functions, used by the annotation site, the importers and matching, so that a
caption written anywhere parses back to the same (subj, relation, obj). They are the
language-driven pair of ``vsr_core.caption_language`` with the default English definition,
built here from ``vsr_core.relations`` (studies/vsr.toml holds the same, a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from vsr_core.caption_language import Grammar, LanguageParseError, compile_language, parse
from vsr_core.caption_language import render as render_in
from vsr_core.relations import all_relations, get_relation
from vsr_core.studies.definition import Language, RelationEntry, Texts

ENGLISH_TEMPLATE = "The ENT1 RELATION the ENT2."


@dataclass(frozen=True)
class ParsedCaption:
    subj: str
    relation: str
    obj: str


class CaptionParseError(ValueError):
    pass


def english_language() -> Language:
    """VSR's English template and Table 1 vocabulary as a study language (texts elsewhere)."""
    return Language(
        code="en",
        template=ENGLISH_TEMPLATE,
        copula="is",
        relations=[
            RelationEntry(
                id=r.name,
                name=r.name,
                categories=list(r.categories),
                verb=not r.copula,
                enabled=r.enabled,
                import_only=r.import_only,
            )
            for r in all_relations(include_import_only=True)
        ],
        texts=Texts(instructions="-", consent="-"),
    )


@lru_cache(maxsize=1)
def _grammar() -> Grammar:
    return compile_language(english_language())


def render_caption(subj: str, relation: str, obj: str, *, allow_import_only: bool = True) -> str:
    """Render the template; the copula is dropped for verbs (contains, has as a part, ...)."""
    rel = get_relation(relation, allow_import_only=allow_import_only).name
    return render_in(_grammar(), subj, rel, obj)


def parse_caption(caption: str, relation: str | None = None) -> ParsedCaption:
    """Parse a caption back into (subj, relation, obj).

    With ``relation`` known (as in the VSR files) the split is unambiguous even for
    multi-word concepts; without it the longest relation that makes the template fit wins.
    """
    if relation is not None:
        relation = get_relation(relation, allow_import_only=True).name
    try:
        p = parse(_grammar(), caption, relation)
    except LanguageParseError:
        if relation is not None:
            raise CaptionParseError(
                f"caption {caption!r} does not fit the template for {relation!r}"
            ) from None
        raise CaptionParseError(
            f"caption {caption!r} does not fit 'The ENT1 (is) REL the ENT2.'"
        ) from None
    return ParsedCaption(p.subj, p.relation, p.obj)
