"""The relation-semantics table (vsr_core.relation_semantics): vocabulary, reasoning, checks."""

from __future__ import annotations

import itertools

import pytest

from vsr_core import relation_semantics as rs
from vsr_core.relations import all_relations, get_relation

NAMES = [r.name for r in all_relations(include_import_only=True)]


def test_every_entry_names_known_relations_and_gives_its_reasoning() -> None:
    entries = rs.table_entries()
    assert len(entries) > 50
    for kind, a, b, reason in entries:
        get_relation(a, allow_import_only=True)  # raises on a typo
        get_relation(b, allow_import_only=True)
        assert len(reason.split()) >= 3, (kind, a, b, reason)
    for _, _, p, _ in rs.CONTRADICTIONS + rs.OVERLAPS:
        assert 0.0 <= p < 1.0


def test_the_issue_examples() -> None:
    # equivalents
    assert rs.link("on", "on top of").kind == "equivalent"
    assert rs.link("on top of", "on").kind == "equivalent"
    # converses: "A above B" says "B below A"
    assert rs.link("above", "below", swapped=True).kind == "equivalent"
    assert rs.link("above", "below").kind == "contradicts"
    # entailment is one-way: on => touching, touching does not entail on
    assert rs.link("on", "touching").kind == "entails"
    assert rs.link("touching", "on").kind != "entails"
    assert rs.link("touching", "on").p < 1.0
    # contradictions, with the reference-frame caveat for left/right
    left_right = rs.link("left of", "right of")
    assert left_right.kind == "contradicts" and 0 < left_right.p < 0.5
    assert "frame" in left_right.reason


def test_derived_entries_explain_their_chain() -> None:
    link = rs.link("on", "near")  # on = on top of => touching => near
    assert link.kind == "entails" and link.p == 1.0
    assert "touching" in link.reason and "near" in link.reason
    # containment read from the other object: "A contains B" = "B is inside A"
    assert rs.link("contains", "in", swapped=True).kind == "equivalent"
    assert rs.link("contains", "inside").kind == "contradicts"


def test_no_relation_implies_both_sides_of_a_contradiction() -> None:
    """Consistency: otherwise a relation would entail something and its opposite."""
    for name in NAMES:
        for swapped in (False, True):
            implied = rs.implied_literals((name, swapped))
            for x, y, _, _ in rs.CONTRADICTIONS:
                for sw in (False, True):
                    both = (x, sw) in implied and (y, sw) in implied
                    assert not both, f"{name} (swapped={swapped}) implies {x} and {y}"


def test_every_pair_has_a_probability_and_a_reason() -> None:
    for a, b in itertools.product(NAMES, NAMES):
        for swapped in (False, True):
            link = rs.link(a, b, swapped)
            assert 0.0 <= link.p <= 1.0 and link.reason
            if link.kind in ("same", "equivalent", "entails"):
                assert link.p == 1.0
    # equivalence is symmetric, entailment is not required to be
    for a, b in itertools.product(NAMES, NAMES):
        if rs.link(a, b).kind == "equivalent":
            assert rs.link(b, a).kind == "equivalent"


def test_triples_same_swapped_and_other_objects() -> None:
    truth = ("cat", "on", "bed")
    assert rs.is_implied(truth, ("cat", "touching", "bed"))
    assert rs.is_implied(truth, ("bed", "under", "cat"))  # converse with swapped objects
    assert not rs.is_implied(truth, ("cat", "under", "bed"))
    assert rs.sim_probability(truth, ("cat", "under", "bed")) == 0.0
    other = rs.triple_link(truth, ("dog", "on", "sofa"))
    assert other.kind == "unrelated" and other.p == rs.OTHER_OBJECTS_P
    assert rs.is_equivalent(("cup", "beneath", "lamp"), ("cup", "under", "lamp"))
    assert not rs.is_equivalent(("cup", "on", "table"), ("cup", "touching", "table"))


def test_unknown_relation_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown relation"):
        rs.link("levitating above", "on")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("into", "in"),
        ("into", "inside"),
        ("away from", "far from"),
        ("away from", "far away from"),
        ("alongside", "next to"),
        ("alongside", "beside"),
        ("ahead of", "in front of"),
    ],
)
def test_vsr_usage_synonyms_are_equivalent(a: str, b: str) -> None:
    # VSR's writers use these interchangeably ("The cat is into the suitcase." for
    # a cat inside it), so one may never be a distractor for the other.
    assert rs.link(a, b).kind == "equivalent" and rs.link(b, a).kind == "equivalent"
    assert rs.is_implied(("cat", a, "suitcase"), ("cat", b, "suitcase"))
    # "ahead of" inherits the converse of "in front of": the swapped "behind" says the same.
    if a == "ahead of":
        assert rs.link(a, "behind", swapped=True).kind == "equivalent"
