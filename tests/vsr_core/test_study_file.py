"""Study definition files: the shipped VSR study reproduces the code, broken files are named
by field and line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vsr_core import relation_semantics as S
from vsr_core.caption_language import (
    compile_language,
    grammar_of,
    parse,
    render,
    render_concepts,
)
from vsr_core.captions import english_language, parse_caption, render_caption
from vsr_core.relations import all_relations
from vsr_core.studies.definition import StudyFileError, line_index, load_study, parse_study
from vsr_core.studies.settings import DEFAULT_CONSENT

ROOT = Path(__file__).resolve().parents[2]
VSR = ROOT / "studies" / "vsr.toml"
COCO = ROOT / ".." / "shared" / "coco" / "annotations" / "instances_val2017_subset.json"


def coco_names() -> list[str]:
    return [c["name"] for c in json.loads(COCO.read_text())["categories"]]


def test_vsr_file_reproduces_the_relations_of_the_code() -> None:
    study = load_study(VSR)
    lang = study.default_language
    got = [
        (r.id, r.name, tuple(r.categories), r.verb, r.enabled, r.import_only)
        for r in lang.relations
    ]
    want = [
        (r.name, r.name, r.categories, not r.copula, r.enabled, r.import_only)
        for r in all_relations(include_import_only=True)
    ]
    assert got == want
    assert len(got) == 71 and sum(not e for *_, e, _ in got) == 6  # 5 unused + congruent
    assert lang.relations == english_language().relations
    assert sorted(lang.concepts) == sorted(coco_names()) and len(lang.concepts) == 80
    assert lang.texts.consent.strip() == DEFAULT_CONSENT.strip()


def test_vsr_file_reproduces_the_semantics_of_the_code() -> None:
    sem = load_study(VSR).semantics
    assert [tuple(g) for g in sem.equivalents] == [g for g, _ in S.EQUIVALENTS]
    assert [tuple(c) for c in sem.converses] == [(x, y) for x, y, _ in S.CONVERSES]
    assert sem.symmetric == [x for x, _ in S.SYMMETRIC]
    assert [tuple(e) for e in sem.entailments] == [(x, y) for x, y, _ in S.ENTAILMENTS]
    assert sem.contradictions == [(x, y, p) for x, y, p, _ in S.CONTRADICTIONS]
    assert sem.overlaps == [(x, y, p) for x, y, p, _ in S.OVERLAPS]


def test_vsr_file_renders_every_caption_as_the_code_does() -> None:
    grammar = compile_language(load_study(VSR).default_language)
    concepts = coco_names()
    n = 0
    for subj in concepts:
        for rel in all_relations(include_import_only=True):
            obj = concepts[(n * 7) % len(concepts)]  # a different partner each time
            text = render(grammar, subj, rel.name, obj)
            assert text == render_caption(subj, rel.name, obj)
            assert parse(grammar, text, rel.name) == parse(grammar, text)
            back = parse_caption(text)
            assert (back.subj, back.relation, back.obj) == (subj, rel.name, obj), text
            n += 1
    assert n == 80 * 71


def test_copula_rule() -> None:
    assert render_caption("oven", "contains", "cake") == "The oven contains the cake."
    assert render_caption("cat", "on", "bed") == "The cat is on the bed."
    with pytest.raises(ValueError):
        parse_caption("The oven is contains the cake.", "contains")


# --- broken files ---------------------------------------------------------------------


def broken(old: str, new: str, count: int = 1) -> str:
    text = VSR.read_text()
    assert old in text
    return text.replace(old, new, count)


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def problems(text: str) -> list[str]:
    with pytest.raises(StudyFileError) as exc:
        parse_study(text, "s.toml")
    return exc.value.problems


def test_wrong_type_names_field_and_line() -> None:
    text = broken("votes_per_example = 3", 'votes_per_example = "three"')
    [p] = problems(text)
    assert p.startswith(
        f"s.toml:{line_of(text, 'votes_per_example = ')}: collection.votes_per_example: "
    )


def test_unknown_key_names_field_and_line() -> None:
    text = broken("prefer_contrast = false", "prefer_contrast = false\nprefer_constrast = true")
    [p] = problems(text)
    line = line_of(text, "prefer_constrast")
    assert p == f"s.toml:{line}: sampling.prefer_constrast: unknown key"


def test_missing_field_in_a_nested_array_of_tables() -> None:
    text = broken('id = "beside"\nname = "beside"\n', 'id = "beside"\n')
    [p] = problems(text)
    idx = [r for r in range(71) if f"languages[0].relations[{r}]" in p]
    assert idx and p.endswith(".name: missing field")
    # the line is the [[languages.relations]] header of exactly that entry
    lines = text.splitlines()
    line = int(p.split(":")[1])
    assert lines[line - 1] == "[[languages.relations]]" and lines[line] == 'id = "beside"'


def test_bad_slug() -> None:
    for slug in ("VSR", "-vsr", "v" * 64, "vsr study", "vsr\n"):
        text = broken('slug = "vsr"', f"slug = {json.dumps(slug)}")
        [p] = problems(text)
        assert p.startswith("s.toml:3: slug: "), p


def test_relation_in_semantics_not_in_vocabulary() -> None:
    text = broken('["on", "on top of"]', '["on", "atop"]')
    [p] = problems(text)
    assert p == (
        f"s.toml:{line_of(text, 'equivalents = [')}: semantics.equivalents: "
        "entry 0: 'atop' is not in the relation vocabulary"
    )


def test_duplicate_relation() -> None:
    text = broken('id = "beside"\nname = "beside"', 'id = "on"\nname = "on"')
    ps = problems(text)
    # beside is gone from the vocabulary, so the semantics that name it are reported too
    assert len(ps) == 3 and "'beside' is not in the relation vocabulary" in ps[2]
    ps = ps[:2]
    lines = text.splitlines()
    # the second "on" entry is the one reported, id and name each on their own line
    later = max(i for i, ln in enumerate(lines, 1) if ln == 'id = "on"')
    assert [int(p.split(":")[1]) for p in ps] == [later, later + 1]
    assert ps[0].endswith(".id: duplicate relation 'on'")
    assert ps[1].endswith(".name: duplicate relation name 'on'")


def test_not_toml_and_template_rules() -> None:
    [p] = problems("name = \n")
    assert p.startswith("s.toml: not valid TOML") and "line 1" in p
    text = broken('template = "The ENT1 RELATION the ENT2."', 'template = "The ENT1 the ENT2."')
    [p] = problems(text)
    assert p.startswith(f"s.toml:{line_of(text, 'template =')}: languages[0].template: ")


def test_line_index_handles_quoted_keys_and_multiline_strings() -> None:
    text = '[a]\nx = """\ny = 1\n"""\n"q.k" = 2\n[[b.c]]\nz = 1\n[[b.c]]\nz = 2\n'
    idx = line_index(text)
    assert idx[("a", "x")] == 2 and ("a", "y") not in idx and idx[("a", "q.k")] == 5
    assert idx[("b", "c", 1, "z")] == 9 and idx[("b", "c", 0)] == 6


# --- every shipped language -----------------------------------------------------------

ZH = ROOT / "studies" / "vsr-zh.toml"


SHIPPED = sorted((ROOT / "studies").glob("*.toml"))


def test_both_languages_are_shipped() -> None:
    assert VSR in SHIPPED and ZH in SHIPPED


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_concept_and_relation_round_trips(path: Path) -> None:
    lang = load_study(path).default_language
    grammar = compile_language(lang)
    names = list(lang.concepts.values())
    seen = 0
    for i, subj in enumerate(names):
        for j, rel in enumerate(lang.relations):
            # each concept is subject and (over the loop) object with every relation
            obj = names[(i + j) % len(names)]
            text = render(grammar, subj, rel.id, obj)
            for given in (None, rel.id, rel.name):
                got = parse(grammar, text, given)
                assert (got.subj, got.relation, got.obj) == (subj, rel.id, obj), text
            seen += 1
    assert seen == 80 * 71
    # As the worker pages render them: COCO categories named in the language (render_concepts,
    # the grammar compiled once per language object).
    assert grammar_of(lang) is grammar_of(lang)
    for category, name in lang.concepts.items():
        for rel in lang.relations:
            text = render_concepts(lang, category, rel.id, "dog")
            got = parse(grammar_of(lang), text, rel.id)
            assert (got.subj, got.relation, got.obj) == (name, rel.id, lang.concepts["dog"])


def test_chinese_study_mirrors_the_default() -> None:
    en, zh = load_study(VSR), load_study(ZH)
    assert zh.slug == "vsr-zh" and zh.default_language.code == "zh-Hans"
    assert zh.semantics == en.semantics and zh.sources == en.sources
    e, z = en.default_language, zh.default_language
    assert [(r.id, r.verb, r.enabled, r.import_only) for r in z.relations] == [
        (r.id, False, r.enabled, r.import_only) for r in e.relations
    ]
    assert sorted(z.concepts) == sorted(e.concepts) and len(set(z.concepts.values())) == 80
    grammar = compile_language(z)
    assert render(grammar, "猫", "on", "床") == "猫在床上。"
    assert render(grammar, "烤箱", "contains", "蛋糕") == "烤箱包含蛋糕。"
    # Every worker-facing text is Chinese: no English words beyond names and placeholders.
    texts = [
        z.texts.instructions,
        z.texts.consent,
        *(x.caption + x.why for x in z.texts.examples),
        *(r.name for r in z.relations),
        *z.concepts.values(),
    ]
    allowed = {"MS", "COCO", "ID", "ENT", "items", "minutes"}
    for text in texts:
        words = set(re.findall(r"[A-Za-z]+", text)) - allowed
        assert not words, (words, text[:40])
    for ex in z.texts.examples:
        parse(grammar, ex.caption)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_no_relation_is_named_as_a_category(path: Path) -> None:
    """The caption page lists relations under their categories: a relation named like a
    category ("toward" and Orientation were both 朝向) reads as a heading."""
    for lang in load_study(path).languages:
        categories = {c for r in lang.relations for c in r.categories}
        clashes = sorted(r.name for r in lang.relations if r.name in categories)
        assert not clashes, (lang.code, clashes)
