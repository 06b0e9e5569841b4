"""Caption rendering and parsing driven by a study language (template + relation vocabulary).

A language's template holds ENT1, RELATION and ENT2 (in that order); non-verb relations take
the language's copula; a relation name holding the language's ellipsis ("在…上方") puts ENT2
where the ellipsis is. ``vsr_core.captions`` is this with the default English definition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vsr_core.studies.definition import Language, RelationEntry


@dataclass(frozen=True)
class Parsed:
    subj: str
    relation: str  # the relation id
    obj: str


class LanguageParseError(ValueError):
    pass


@dataclass(frozen=True)
class Grammar:
    """A language compiled for rendering and parsing."""

    prefix: str  # template text before ENT1
    mid1: str  # between ENT1 and RELATION
    mid2: str  # between RELATION and ENT2
    suffix: str  # after ENT2
    forms: dict[str, tuple[str, str]]  # relation id -> (before ENT2, after ENT2)
    by_name: dict[str, str]  # relation name (lower) or id -> id
    pattern: re.Pattern[str]
    copula: str
    verbs: frozenset[str]


def _form(lang: Language, rel: RelationEntry) -> tuple[str, str]:
    name = rel.name
    before, _, after = name.partition(lang.ellipsis) if lang.ellipsis in name else (name, "", "")
    if lang.copula and not rel.verb:
        before = f"{lang.copula} {before}"
    return before, after


def compile_language(lang: Language) -> Grammar:
    t = lang.template
    i1, ir, i2 = t.index("ENT1"), t.index("RELATION"), t.index("ENT2")
    prefix, mid1, mid2, suffix = t[:i1], t[i1 + 4 : ir], t[ir + 8 : i2], t[i2 + 4 :]
    forms = {r.id: _form(lang, r) for r in lang.relations}
    by_name = {r.id: r.id for r in lang.relations} | {r.name.lower(): r.id for r in lang.relations}
    # Longest form first so "at the left side of" wins over "at" and "left of"; one named
    # group per relation tells which alternative matched.
    order = sorted(lang.relations, key=lambda r: len("".join(forms[r.id])), reverse=True)
    alts = "|".join(
        f"(?P<r{i}>{re.escape(forms[r.id][0])}){re.escape(mid2)}(?P<o{i}>.+?){re.escape(forms[r.id][1])}"
        for i, r in enumerate(order)
    )
    pattern = re.compile(
        rf"^{re.escape(prefix)}(?P<subj>.+?){re.escape(mid1)}(?:{alts}){re.escape(suffix)}$"
    )
    # Map group index back to the id via a list kept in the pattern's order.
    by_name |= {f"#{i}": r.id for i, r in enumerate(order)}
    verbs = frozenset(r.id for r in lang.relations if r.verb)
    return Grammar(prefix, mid1, mid2, suffix, forms, by_name, pattern, lang.copula, verbs)


def relation_id(grammar: Grammar, name: str) -> str:
    rid = grammar.by_name.get(" ".join(name.split()).lower())
    if rid is None or rid.startswith("#"):
        raise LanguageParseError(f"unknown relation {name!r}")
    return rid


def _clean(name: str) -> str:
    name = " ".join(name.split())
    if not name:
        raise ValueError("a concept name must not be empty")
    return name


def render(grammar: Grammar, subj: str, relation: str, obj: str) -> str:
    before, after = grammar.forms[relation_id(grammar, relation)]
    return (
        f"{grammar.prefix}{_clean(subj)}{grammar.mid1}{before}{grammar.mid2}"
        f"{_clean(obj)}{after}{grammar.suffix}"
    )


def parse(grammar: Grammar, caption: str, relation: str | None = None) -> Parsed:
    """Caption -> (subj, relation id, obj). With ``relation`` given the split is tried at
    every place the relation fits, so a concept holding the relation's words cannot confuse it."""
    text = " ".join(caption.split())
    if relation is not None:
        rid = relation_id(grammar, relation)
        before, after = grammar.forms[rid]
        head, tail = grammar.prefix, f"{after}{grammar.suffix}"
        marker = f"{grammar.mid1}{before}{grammar.mid2}"
        # A copula before a verb is not the template ("The oven is contains ...").
        bad_end = f" {grammar.copula}" if grammar.copula and rid in grammar.verbs else ""
        if text.startswith(head) and text.endswith(tail) and len(text) >= len(head) + len(tail):
            body = text[len(head) : len(text) - len(tail)]
            start = 0
            while (idx := body.find(marker, start)) != -1:
                subj, obj = body[:idx], body[idx + len(marker) :]
                if subj and obj and not (bad_end and subj.endswith(bad_end)):
                    return Parsed(subj, rid, obj)
                start = idx + 1
        raise LanguageParseError(f"caption {caption!r} does not fit the template for {rid!r}")
    m = grammar.pattern.match(text)
    if not m:
        raise LanguageParseError(f"caption {caption!r} does not fit the template")
    for key, value in m.groupdict().items():
        if key.startswith("r") and value is not None:
            i = key[1:]
            return Parsed(m.group("subj"), grammar.by_name[f"#{i}"], m.group(f"o{i}"))
    raise LanguageParseError(f"caption {caption!r} does not fit the template")  # unreachable


_GRAMMARS: dict[int, tuple[Language, Grammar]] = {}
_GRAMMARS_MAX = 64


def grammar_of(lang: Language) -> Grammar:
    """The compiled grammar of a language object, compiled once per object (a study's parsed
    definition is cached by its hash, so its Language objects live as long as the process)."""
    hit = _GRAMMARS.get(id(lang))
    if hit is not None and hit[0] is lang:
        return hit[1]
    grammar = compile_language(lang)
    if len(_GRAMMARS) >= _GRAMMARS_MAX:
        _GRAMMARS.pop(next(iter(_GRAMMARS)))
    _GRAMMARS[id(lang)] = (lang, grammar)  # keeps lang alive, so its id is not reused
    return grammar


def concept_name(lang: Language, category: str) -> str:
    """A COCO category as the language names it (the category itself when not translated)."""
    return lang.concepts.get(category, category)


def offered_relations(lang: Language) -> list[RelationEntry]:
    """The language's relations annotators may pick: switched on and not import-only."""
    return [r for r in lang.relations if r.enabled and not r.import_only]


def render_concepts(lang: Language, subj: str, relation: str, obj: str) -> str:
    """The caption of two COCO categories and a relation id, in the language."""
    return render(grammar_of(lang), concept_name(lang, subj), relation, concept_name(lang, obj))


def blank_caption(lang: Language, subj: str, obj: str, blank: str = "___") -> str:
    """The caption with the relation still to choose: "The cat (is) ___ the dog." """
    slot = f"({lang.copula}) {blank}" if lang.copula else blank
    return lang.template.replace("ENT1", subj).replace("RELATION", slot).replace("ENT2", obj)
