"""Matching speaks for its study: a lab's own relation vocabulary and semantics decide what may
be a distractor, and distractors are captioned in the study's template and concept names
(matching.study_scope); the shipped Chinese study on real VSR captions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from matching.params import Balance
from matching.pipeline import MatchParams, MatchResult, run_matching
from matching.records import Record
from matching.relevance import RelevanceModel, load_encoder
from matching.similarity import TableSimilarity
from matching.study_scope import StudyScope, scope_for, study_scope
from tests.matching.support import VSR_VALIDATED, build_tiny_encoder, concepts_of, vsr_sample
from vsr_core.caption_language import concept_name, grammar_of, parse, render_concepts
from vsr_core.relation_semantics import SemanticsTable, builtin_table, table_for_study
from vsr_core.studies.definition import StudyDefinition, load_study, parse_study

STUDIES = Path(__file__).resolve().parents[2] / "studies"

LAB = """
name = "Shelf photos"
slug = "lab-shelf"
[[sources]]
annotations = "shelf.json"

[[languages]]
code = "en"
template = "In this photo, ENT1 RELATION ENT2!"
copula = "sits"
[[languages.relations]]
id = "atop"
name = "atop"
categories = ["vertical"]
[[languages.relations]]
id = "underneath"
name = "underneath"
categories = ["vertical"]
[[languages.relations]]
id = "flanking"
name = "flanking"
categories = ["beside"]
[[languages.relations]]
id = "distant-from"
name = "far off from"
categories = ["distance"]
[[languages.relations]]
id = "cradling"
name = "cradles"
categories = ["holding"]
verb = true
[languages.concepts]
cup = "teacup"
shelf = "wall shelf"
[languages.texts]
instructions = "Describe the shelf."
consent = "You agree."

[semantics]
converses = [["atop", "underneath"]]
symmetric = ["flanking", "distant-from"]
contradictions = [["atop", "underneath", 0.0], ["flanking", "distant-from", 0.0]]
"""

# (subj, relation id, obj) of the lab's captions; "A atop B" and "B underneath A" say the same.
LAB_TRIPLES = [
    ("cup", "atop", "shelf"),
    ("shelf", "underneath", "cup"),
    ("cup", "flanking", "shelf"),
    ("cup", "distant-from", "shelf"),
    ("shelf", "cradling", "cup"),
    ("book", "atop", "lamp"),
    ("lamp", "underneath", "book"),
    ("book", "flanking", "lamp"),
    ("lamp", "cradling", "book"),
    ("book", "distant-from", "lamp"),
]


@pytest.fixture(scope="module")
def lab() -> StudyDefinition:
    return parse_study(LAB, "lab.toml")


@pytest.fixture(scope="module")
def lab_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_encoder(tmp_path_factory.mktemp("lab-enc"), ["cup", "shelf", "book", "lamp"])


def lab_records(lab: StudyDefinition, copies: int = 4) -> list[Record]:
    lang = lab.default_language
    out: list[Record] = []
    for c in range(copies):
        for t, (s, r, o) in enumerate(LAB_TRIPLES):
            i = len(out) + 1
            out.append(
                Record(
                    id=i,
                    image=f"shelf{c}-{t}.jpg",
                    subj=s,
                    relation=r,
                    obj=o,
                    caption=render_concepts(lang, s, r, o),
                    label=True,
                    votes=(True, True, True),
                )
            )
    return out


def match(records: Sequence[Record], encoder: Path, params: MatchParams) -> MatchResult:
    relevance = RelevanceModel(load_encoder(str(encoder)))  # its vocabulary: the active table's
    return run_matching(
        records, relevance, TableSimilarity(), params, splits={r.id: "test" for r in records}
    )


def converse_offered(result: MatchResult) -> int:
    """Items where "B underneath A" is a distractor for the truth "A atop B" (or back)."""
    flip = {"atop": "underneath", "underneath": "atop"}
    n = 0
    for it in result.items:
        s, r, o = it.query.triple
        if r in flip and (o, flip[r], s) in it.distractor_triples:
            n += 1
    return n


def test_the_lab_table_is_its_own(lab: StudyDefinition) -> None:
    table = table_for_study(lab)
    assert table is not builtin_table() and table.names[0] == "atop"
    link = table.link("atop", "underneath", swapped=True)
    assert link.kind == "equivalent" and "lab-shelf" in link.reason
    assert table.link("atop", "underneath").kind == "contradicts"
    with pytest.raises(ValueError, match="unknown relation 'atop'"):
        builtin_table().link("atop", "underneath")


def test_a_converse_is_never_offered_as_a_distractor(
    lab: StudyDefinition, lab_encoder: Path
) -> None:
    records = lab_records(lab)
    params = MatchParams(k=2, remap=False, balance=Balance.OFF)
    # VSR's built-in table does not know the lab's relations: matching refuses to guess.
    with pytest.raises(ValueError, match="not in the study's relation vocabulary"):
        match(records, lab_encoder, params)
    with study_scope(scope_for(lab)):
        result = match(records, lab_encoder, params)
    assert len(result.items) == len(records)
    assert converse_offered(result) == 0
    for it in result.items:
        for d in it.distractor_triples:
            assert not table_for_study(lab).is_implied(it.query.triple, d), (it.query, d)
    # Where the converse is the only second distractor left, the lab table leaves those
    # queries unmatched; the same vocabulary without the converse entry offers it to every
    # one of them, so the checks above are the table's doing, not luck.
    forced = [r for r in records if r.triple in LAB_TRIPLES[:3]]
    with study_scope(scope_for(lab)):
        strict = match(forced, lab_encoder, params)
    assert converse_offered(strict) == 0 and sum(strict.unmatched.values()) > 0
    names = [r.id for r in lab.default_language.relations]
    blind = SemanticsTable(names, symmetric=[("flanking", "-"), ("distant-from", "-")])
    with study_scope(StudyScope(blind, lab.default_language)):
        loose = match(forced, lab_encoder, params)
    assert converse_offered(loose) == len(forced) * 2 // 3


def test_known_true_converse_is_no_distractor_and_captions_follow_the_lab_template(
    lab: StudyDefinition, lab_encoder: Path
) -> None:
    """Remapped: on an image where validators confirmed "the shelf underneath the cup", the
    candidate "the cup atop the shelf" says the same and is never a distractor."""
    lang = lab.default_language
    records = lab_records(lab)
    queries = [r for r in records if r.relation in ("flanking", "distant-from")]
    extra = [
        Record(
            id=1000 + q.id,
            image=q.image,
            subj=q.obj,
            relation="underneath",
            obj=q.subj,
            caption=render_concepts(lang, q.obj, "underneath", q.subj),
            label=True,
            votes=(True, True, True),
            origin="adversarial",
        )  # known true, never a query
        for q in queries
    ]
    params = MatchParams(k=2, remap=True, balance=Balance.OFF)
    with study_scope(scope_for(lab)):
        result = match(records + extra, lab_encoder, params)
    by_query = {it.query.id: it for it in result.items}
    assert {q.id for q in queries} <= set(by_query)
    for q in queries:
        assert (q.subj, "atop", q.obj) not in by_query[q.id].distractor_triples
    grammar = grammar_of(lang)
    for it in result.items:
        for caption, (s, r, o) in zip(it.choices, it.triples, strict=True):
            assert caption == render_concepts(lang, s, r, o)
            assert caption.startswith("In this photo, ") and caption.endswith("!")
            back = parse(grammar, caption)
            assert (back.subj, back.relation, back.obj) == (
                concept_name(lang, s),
                r,
                concept_name(lang, o),
            )
    cup_shelf = [c for it in result.items for c in it.choices if "teacup" in c]
    assert "In this photo, teacup sits atop wall shelf!" in cup_shelf
    assert "In this photo, wall shelf cradles teacup!" in cup_shelf  # a verb: no copula


@pytest.mark.skipif(not VSR_VALIDATED.exists(), reason="real VSR data not found")
def test_chinese_distractors_on_real_vsr_captions(tmp_path: Path) -> None:
    zh = load_study(STUDIES / "vsr-zh.toml")
    lang = zh.default_language
    assert table_for_study(zh) is builtin_table()  # VSR's rules: the hand-written table
    assert table_for_study(load_study(STUDIES / "vsr.toml")) is builtin_table()
    # Real VSR Examples as the Chinese study stores them: Chinese caption, relation id.
    records = [
        Record(
            id=r.id,
            image=r.image,
            subj=r.subj,
            relation=r.relation,
            obj=r.obj,
            caption=render_concepts(lang, r.subj, r.relation, r.obj),
            label=r.label,
            votes=r.votes,
        )
        for r in vsr_sample(6)
    ]
    encoder = build_tiny_encoder(tmp_path / "enc", concepts_of(records))
    with study_scope(scope_for(zh)):
        result = match(records, encoder, MatchParams(k=3))
    assert len(result.items) > 100
    grammar = grammar_of(lang)
    for it in result.items:
        assert it.choices[it.answer_index] == it.query.caption
        for caption, (s, r, o) in zip(it.choices, it.triples, strict=True):
            assert caption.endswith("。") and not any("a" <= ch.lower() <= "z" for ch in caption)
            back = parse(grammar, caption)
            assert (back.subj, back.relation, back.obj) == (
                concept_name(lang, s),
                r,
                concept_name(lang, o),
            )
        for d in it.distractor_triples:
            assert not builtin_table().is_implied(it.query.triple, d)
