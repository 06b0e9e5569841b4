"""Render and parse captions of the VSR template "The ENT1 (is) RELATION the ENT2."

One pair of functions, used by the annotation site, the importers and matching, so that a
caption written anywhere parses back to the same (subj, relation, obj).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from vsr_core.relations import NO_COPULA, all_relations, get_relation


@dataclass(frozen=True)
class ParsedCaption:
    subj: str
    relation: str
    obj: str


class CaptionParseError(ValueError):
    pass


def render_caption(subj: str, relation: str, obj: str, *, allow_import_only: bool = True) -> str:
    """Render the template; the copula is dropped for verbs (contains, has as a part, ...)."""
    rel = get_relation(relation, allow_import_only=allow_import_only).name
    subj, obj = _clean_concept(subj), _clean_concept(obj)
    copula = "" if rel in NO_COPULA else "is "
    return f"The {subj} {copula}{rel} the {obj}."


def _clean_concept(name: str) -> str:
    name = " ".join(name.split())
    if not name:
        raise ValueError("a concept name must not be empty")
    return name


@lru_cache(maxsize=1)
def _relation_pattern() -> re.Pattern[str]:
    # Longest relation first so "at the left side of" wins over "at" and "left of"; verbs
    # (no copula) and the rest are separate alternatives so the copula always matches.
    names = sorted(
        (r.name for r in all_relations(include_import_only=True)), key=len, reverse=True
    )
    with_is = "|".join(re.escape(n) for n in names if n not in NO_COPULA)
    verbs = "|".join(re.escape(n) for n in names if n in NO_COPULA)
    return re.compile(
        rf"^The (?P<subj>.+?) (?:is (?P<rel>{with_is})|(?P<verb>{verbs})) the (?P<obj>.+)\.$"
    )


def parse_caption(caption: str, relation: str | None = None) -> ParsedCaption:
    """Parse a caption back into (subj, relation, obj).

    With ``relation`` known (as in the VSR files) the split is unambiguous even for
    multi-word concepts; without it the longest relation that makes the template fit wins.
    """
    text = " ".join(caption.split())
    if relation is not None:
        rel = get_relation(relation, allow_import_only=True).name
        copula = "" if rel in NO_COPULA else "is "
        # Try each occurrence of " <copula><rel> the " so a concept containing the relation
        # word (e.g. "hot dog" and "on") cannot confuse the split.
        marker = f" {copula}{rel} the "
        if text.startswith("The ") and text.endswith("."):
            body = text[4:-1]
            start = 0
            while (idx := body.find(marker, start)) != -1:
                subj, obj = body[:idx], body[idx + len(marker) :]
                # "The oven is contains ..." is not the template: verbs take no copula.
                if subj and obj and not (not copula and subj.endswith(" is")):
                    return ParsedCaption(subj, rel, obj)
                start = idx + 1
        raise CaptionParseError(f"caption {caption!r} does not fit the template for {rel!r}")
    m = _relation_pattern().match(text)
    if not m:
        raise CaptionParseError(f"caption {caption!r} does not fit 'The ENT1 (is) REL the ENT2.'")
    return ParsedCaption(m.group("subj"), m.group("rel") or m.group("verb"), m.group("obj"))
