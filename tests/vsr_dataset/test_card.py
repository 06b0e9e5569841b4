"""The dataset card's exact text: two cards that between them reach every branch of its prose
(mc/ and mc_unvalidated/, judged negatives in or out of the splits, Parquet or VSR types,
polygons, a citation, split per annotation or per Example), compared byte for byte with
snapshots in card_snapshots/.

The snapshots were rendered by the card code before its prose moved into the template; a
deliberate change of wording re-renders them with ``UPDATE_CARD_SNAPSHOTS=1``.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from vsr_dataset.card import CardInputs, rai_facts, render_card

SNAPSHOTS = Path(__file__).parent / "card_snapshots"
CONSENT = "A study on how people describe where things are.\n\n- **Pay:** {items} items.\n"


def _stats() -> dict[str, Any]:
    return {
        "threshold": "2/3",
        "threshold_source": "study",
        "seed": 0,
        "split_unit": "annotation",
        "n_raw": 1200,
        "n_validated": 970,
        "n_with_votes": 1180,
        "n_unanimous": 770,
        "unanimous_share": 770 / 1180,
        "kept_share": 970 / 1180,
        "n_votes": 3980,
        "n_paired": 1150,
        "n_relations_validated": 7,
        "relations": {
            rel: {"n_validated": n}
            for rel, n in zip(
                ("on", "near", "under", "left of", "inside"), (400, 300, 200, 9, 0), strict=True
            )
        },
        "min_votes": 3,
        "votes_per_example": {"3": 820, "4": 360},
        "labels": {"raw": {"true": 600, "false": 600}, "validated": {"true": 460, "false": 510}},
        "origins": {"human": 1100, "imported": 100},
        "fleiss_kappa": {"raw": 0.5998, "validated": 0.749, "raw_with_label": 0.6121},
        "krippendorff_alpha": {"raw": 0.5955},
        "workers": {"annotators": 12, "validators": 30, "both": 4},
        "machine_negatives": {"judged": 1500, "kept": 1200, "unjudged": 3, "in_splits": True},
        "splits": {
            "random": {"train": 670, "dev": 90, "test": 210},
            "zeroshot": {"train": 360, "dev": 120, "test": 120},
            "zeroshot_excluded": 370,
            "zeroshot_concepts": {"train": ["cat", "dog"], "dev": ["bed"], "test": ["bus"]},
        },
        "label_model": {
            "model": "dawid_skene",
            "n_labelled": 1180,
            "agrees_with_label": 1100,
            "agreement_share": 1100 / 1180,
        },
        "mc": {
            "adversaries": {"p_rel_least": {"accuracy": 0.281}},
            "adversaries_n_test": 210,
            "balance": None,
            "chance": 0.25,
            "items": {"train": 1},
            "items_unvalidated": {"test": 1},
            "k": None,
            "measured_on": "mc",
            "run_id": 1,
            "splits": None,
            "strongest_adversary": {
                "name": "p_rel_least",
                "accuracy": 0.281,
                "ci95": [0.225, 0.344],
            },
            "validation_cost": None,
        },
        "study": {
            "language": "en",
            "name": "Visual Spatial Reasoning (VSR)",
            "sha256": "ef37",
            "slug": "vsr",
            "template": "The ENT1 (is) RELATION the ENT2.",
        },
    }


def _inputs() -> CardInputs:
    return CardInputs(
        title="A test dataset",
        files=[
            "README.md",
            "all_raw.jsonl",
            "instances.jsonl",
            "machine_negatives.jsonl",
            "mc/train.jsonl",
            "random/train.jsonl",
            "zeroshot/train.jsonl",
        ],
        front_matter={"license": "cc-by-4.0", "configs": [{"config_name": "random"}]},
        figure_notes={"relations": "Top 7 relations."},
        mc_counts=(1234, 3, 2),
        collection={
            "batch_settings": {"generate": [200, 80], "validate": [500, 90]},
            "batches": {"generate": {"completed": 12}, "validate": {"completed": 30, "open": 1}},
            "consent_sha256": "68f7",
            "consent_text": CONSENT,
            "first_batch": "2024-05-01",
            "last_batch": "2024-05-09",
            "median_seconds_per_caption": 41.5,
            "median_seconds_per_vote": 6.2,
            "n_timed_captions": 1100,
            "n_timed_votes": 3900,
            "pay": ["prolific: GBP 9.00 an hour"],
            "people_by_source": {"prolific": 40},
            "platforms": ["prolific"],
        },
        researcher={
            "citation": "@misc{ours}",
            "contact": "a@b.c",
            "creators": "Us",
            "ethics_approval": None,
            "funding": None,
            "intended_uses": "research",
            "license": "cc-by-4.0",
            "out_of_scope_uses": None,
            "version": "1.0",
        },
        demographics={
            "n_people": 12,
            "columns": {
                "age": {"n_given": 12, "n_distinct": 9, "values": {}},
                "country": {"n_given": 11, "n_distinct": 2, "values": {"UK": 8}},
            },
        },
        n_paired=1150,
        parquet=True,
    )


def _plain() -> tuple[dict[str, Any], CardInputs]:
    """The other side of every branch: VSR types, per-Example splits, nothing optional."""
    stats = copy.deepcopy(_stats())
    stats.update(
        split_unit="example",
        threshold="3/4",
        threshold_source="option",
        machine_negatives={},
        workers={"annotators": 1, "validators": 1, "both": 1},
    )
    for key in ("label_model", "mc", "study"):
        del stats[key]
    del stats["splits"]["zeroshot"]
    inputs = _inputs()
    inputs.files = ["README.md", "all_raw.jsonl", "random/train.jsonl"]
    inputs.figure_notes, inputs.mc_counts, inputs.collection = None, None, {}
    inputs.researcher = dict.fromkeys(inputs.researcher)
    inputs.demographics = {}
    inputs.vsr_compatible, inputs.parquet = True, False
    return stats, inputs


@pytest.mark.parametrize("name", ["full", "plain"])
def test_card_is_byte_identical_to_its_snapshot(name: str) -> None:
    stats, inputs = (_stats(), _inputs()) if name == "full" else _plain()
    card = render_card(stats, inputs)
    path = SNAPSHOTS / f"{name}.md"
    if os.environ.get("UPDATE_CARD_SNAPSHOTS"):
        path.write_text(card, encoding="utf-8")
    assert card == path.read_text(encoding="utf-8")
    # The datasheet's statements are the card's, word for word, in croissant.json.
    facts = rai_facts(stats, inputs)
    assert f"- **Keep rule:** {facts['dataAnnotationProtocol']}\n" in card
    assert f"- **Task:** {facts['dataCollection']}\n" in card
