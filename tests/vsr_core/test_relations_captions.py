"""The relation vocabulary of VSR Table 1 and the caption render/parse pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsr_core.captions import CaptionParseError, parse_caption, render_caption
from vsr_core.relations import (
    CATEGORIES,
    TABLE_1,
    UNUSED,
    UnknownRelationError,
    all_relations,
    category_of,
    enabled_relations,
    get_relation,
    relations_by_category,
)

COCO_CATEGORIES = [
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
]


def test_table_1_has_71_entries_in_7_categories() -> None:
    assert len(TABLE_1) == 71
    assert {c for c, _ in TABLE_1} == set(CATEGORIES)
    counts = {c: sum(1 for cat, _ in TABLE_1 if cat == c) for c in CATEGORIES}
    assert counts == {
        "Adjacency": 10,
        "Directional": 16,
        "Orientation": 4,
        "Projective": 12,
        "Proximity": 5,
        "Topological": 18,
        "Unallocated": 6,
    }
    # "among" is listed twice, so 70 distinct names.
    assert len(all_relations()) == 70
    assert get_relation("among").categories == ("Topological", "Unallocated")


def test_unused_relations_are_switched_off() -> None:
    assert {"deep down", "up", "from", "to", "after"} == UNUSED
    enabled = {r.name for r in enabled_relations()}
    assert len(enabled) == 65 and not enabled & UNUSED
    assert all("deep down" not in rels for rels in relations_by_category().values())
    assert "deep down" in relations_by_category(only_enabled=False)["Directional"]


def test_congruent_is_import_only() -> None:
    with pytest.raises(UnknownRelationError):
        get_relation("congruent")
    assert get_relation("congruent", allow_import_only=True).import_only
    assert category_of("congruent") == "Unallocated"


def test_matches_vsr_meta_category_file(vsr_dir: Path) -> None:
    lines = (vsr_dir / "analysis_scripts" / "rel_meta_category_dict.txt").read_text().splitlines()
    from_file = {
        (cat.strip(), rel.strip())
        for line in lines
        if line.strip()
        for cat, rels in [line.split(":", 1)]
        for rel in rels.split(",")
    }
    assert from_file == set(TABLE_1)


def test_copula_rule() -> None:
    assert render_caption("oven", "contains", "cake") == "The oven contains the cake."
    assert render_caption("cake", "has as a part", "dog") == "The cake has as a part the dog."
    assert render_caption("cake", "consists of", "apple") == "The cake consists of the apple."
    assert render_caption("cat", "on", "bed") == "The cat is on the bed."


@pytest.mark.parametrize("relation", [r.name for r in all_relations(include_import_only=True)])
def test_round_trip_every_relation_and_category(relation: str) -> None:
    for subj in COCO_CATEGORIES:
        for obj in ("dining table", "hot dog", "person", "cell phone", subj):
            cap = render_caption(subj, relation, obj)
            assert parse_caption(cap) == parse_caption(cap, relation)
            parsed = parse_caption(cap, relation)
            assert (parsed.subj, parsed.relation, parsed.obj) == (subj, relation, obj)


def test_round_trip_real_vsr_captions(vsr_dir: Path) -> None:
    path = vsr_dir / "data" / "data_files" / "all_vsr_raw_data.jsonl"
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        p = parse_caption(rec["caption"], rec["relation"])
        assert p == parse_caption(rec["caption"])
        assert render_caption(p.subj, p.relation, p.obj) == rec["caption"]


@pytest.mark.parametrize(
    "bad",
    ["", "The cat.", "A cat is on the bed.", "The cat is on the bed", "The cat is foo the bed."],
)
def test_parse_rejects_non_template(bad: str) -> None:
    with pytest.raises(CaptionParseError):
        parse_caption(bad)


def test_parse_rejects_wrong_copula() -> None:
    with pytest.raises(CaptionParseError):
        parse_caption("The oven is contains the cake.", "contains")
    with pytest.raises(CaptionParseError):
        parse_caption("The cat on the bed.", "on")


@given(
    st.sampled_from(COCO_CATEGORIES),
    st.sampled_from([r.name for r in all_relations()]),
    st.sampled_from(COCO_CATEGORIES),
)
def test_round_trip_property(subj: str, relation: str, obj: str) -> None:
    p = parse_caption(render_caption(subj, relation, obj))
    assert (p.subj, p.relation, p.obj) == (subj, relation, obj)
