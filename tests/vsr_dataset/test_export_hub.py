# mypy: disable-error-code="arg-type,operator,index,misc,union-attr,call-overload,attr-defined"
"""The export as the ecosystem reads it: every config with `datasets`, croissant.json with
`mlcroissant`, Parquet copies; every collected signal in the records; the datasheet card
filled from the database and the study file's [card]; --vsr-compatible types."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.vsr_dataset.test_export import read_jsonl, seed_native
from tests.vsr_dataset.test_export_publish import _judge, _match_run, _negative
from vsr_core.models import Annotation, Example, ImagePair, Instance, Study, Vote, Worker
from vsr_core.studies.store import definition_hash
from vsr_dataset.export import BuildOptions, build_dataset
from vsr_dataset.match_splits import export_split_mapping

datasets = pytest.importorskip("datasets")


def _front_matter(out: Path) -> dict[str, Any]:
    text = (out / "README.md").read_text()
    assert text.startswith("---\n")
    front: dict[str, Any] = yaml.safe_load(text.split("---\n", 2)[1])
    return front


def _seed_all_parts(engine: Engine, session: Session) -> None:
    """Native data with timed votes and frame answers, demographics, a matching run with
    cleared, rejected and unjudged items: every part of an export is present."""
    seed_native(session, n_annotations=60)
    for i, v in enumerate(session.query(Vote).order_by(Vote.id)):
        v.reference_frame = ("intrinsic", "relative", "both", None)[i % 4]
        v.duration_ms = 1000 + 10 * i
        session.add(v)
    for i, w in enumerate(session.query(Worker).order_by(Worker.id)):
        w.demographics = {"age": str(20 + i), "country": "UK"}
        session.add(w)
    session.commit()
    session.close()
    mapping = export_split_mapping(engine, 2 / 3, 0)
    with Session(engine) as s:
        queries = [e for e in s.query(Example).order_by(Example.id) if e.id in mapping and e.label][
            :9
        ]
        workers = s.query(Worker).filter(Worker.source == "prolific").all()[1:4]
        items = []
        for i, q in enumerate(queries):
            negs = [_negative(s, q, queries[(i + 1 + j) % 9], 10 * i + j) for j in range(2)]
            if i % 3 != 2:  # the third of each three stays unjudged
                _judge(s, negs[0], [False, False, False], workers)
                _judge(s, negs[1], [False, False, i % 3 == 1], workers)
            items.append((q, mapping[q.id], negs))
        _match_run(s, items)
        s.commit()


def test_every_config_loads_with_datasets_and_croissant(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    _seed_all_parts(engine, session)
    out = tmp_path / "out"
    summary = build_dataset(engine, out, BuildOptions(unvalidated_mc=True, parquet=True))
    meta = _front_matter(out)
    assert meta["annotations_creators"] == ["crowdsourced"]
    assert meta["license"] == "unknown" and meta["language"] == ["en"]
    assert meta["size_categories"] == ["n<1K"] and meta["source_datasets"]
    names = [c["config_name"] for c in meta["configs"]]
    assert names == [
        "random",
        "zeroshot",
        "validated",
        "raw",
        "machine_negatives",
        "mc",
        "mc_unvalidated",
        "mc_zeroshot",
        "mc_zeroshot_unvalidated",
    ]
    assert {i["config_name"] for i in meta["dataset_info"]} == set(names)
    expected = {
        "random": summary.splits["random"],
        "zeroshot": summary.splits["zeroshot"],
        "validated": {"train": summary.n_validated},
        "raw": {"train": summary.n_raw},
        "machine_negatives": {"train": summary.n_negatives},
    }
    for c in meta["configs"]:
        name = c["config_name"]
        loaded = datasets.load_dataset(str(out), name, cache_dir=str(tmp_path / "hf"))
        counts = {split: len(ds) for split, ds in loaded.items()}
        from_jsonl = {
            f["split"]: len(read_jsonl(out / f["path"].replace(".parquet", ".jsonl")))
            for f in c["data_files"]
        }
        assert counts == from_jsonl, name
        if name in expected:
            assert counts == expected[name], name
        # The Parquet copies hold the same records as the JSONL files.
        first = c["data_files"][0]
        assert loaded[first["split"]][0] == {
            k: v
            for k, v in read_jsonl(out / first["path"].replace(".parquet", ".jsonl"))[0].items()
        }
    # 6 judged items x 2 distractors; those of dev/test multiple-choice items only in provenance
    held = json.loads((out / "stats.json").read_text())["machine_negatives"]
    assert summary.n_negatives + held["held_back_as_mc_distractors"] == 12
    assert held["held_back_as_mc_distractors"] > 0
    # The default config is the random split (what the Hub shows first).
    default = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf"))
    assert {k: len(v) for k, v in default.items()} == summary.splits["random"]

    mlc = pytest.importorskip("mlcroissant")
    logging.getLogger("absl").setLevel(logging.ERROR)
    ds = mlc.Dataset(jsonld=out / "croissant.json")  # raises on any validation error
    doc = json.loads((out / "croissant.json").read_text())
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.1"
    # Croissant 1.1's required creator and date, as mlcroissant reads them: no [card]
    # creators here, so a placeholder naming the study; the date is the newest vote's.
    assert [c.name for c in ds.metadata.creators] == [
        "Researchers of the study Visual Spatial Reasoning (VSR) (creators not stated)"
    ]
    with Session(engine) as s:
        newest = max(v.created_at for v in s.query(Vote))
    assert ds.metadata.date_published.date() == newest.date()
    assert not ds.metadata.ctx.issues.warnings, ds.metadata.ctx.issues.report()
    # Machine-made distractors are marked on every multiple-choice record set.
    mc_sets = [r for r in doc["recordSet"] if r["name"].startswith("mc")]
    assert {r["name"].rsplit("_", 1)[0] for r in mc_sets} == {n for n in names if "mc" in n}
    for rs in mc_sets:
        assert rs["prov:wasGeneratedBy"] == {"@id": "#adversarial-matching"}
        assert "distractors) are machine-made" in rs["description"]
        judged = "validators judged every distractor" in rs["description"]
        assert judged == (not rs["name"].rsplit("_", 1)[0].endswith("_unvalidated")), rs["name"]
    assert {a["@id"] for a in doc["prov:wasGeneratedBy"]} == {
        "#crowdsourcing",
        "#adversarial-matching",
    }
    for key in (
        "rai:dataCollection",
        "rai:dataAnnotationProtocol",
        "rai:annotatorDemographics",
        "rai:dataLimitations",
        "rai:personalSensitiveInformation",
    ):
        assert doc[key], key
    for rs in ds.metadata.record_sets:
        name, split = rs.name.rsplit("_", 1)
        n = sum(1 for _ in ds.records(rs.name))
        cfg = next(c for c in meta["configs"] if c["config_name"] == name)
        path = next(f["path"] for f in cfg["data_files"] if f["split"] == split)
        assert n == len(read_jsonl(out / path.replace(".parquet", ".jsonl"))), rs.name


def test_every_collected_signal_is_in_the_records(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    _seed_all_parts(engine, session)
    with Session(engine) as s:  # polygons as COCO has them
        for inst in s.query(Instance):
            inst.segmentation = [[1.0, 2.0, 30.0, 2.0, 30.0, 40.0 + inst.id]]
            s.add(inst)
        s.commit()
    out = tmp_path / "out"
    build_dataset(engine, out, BuildOptions(polygons=True))
    raw = read_jsonl(out / "all_raw.jsonl")
    shapes = {i["instance_id"]: i for i in read_jsonl(out / "instances.jsonl")}
    assert set(shapes) == {r[k] for r in raw for k in ("subj_instance_id", "obj_instance_id")}
    by_id = {r["example_id"]: r for r in raw}
    with Session(engine) as s:
        for r in raw:
            ex = s.get(Example, r["example_id"])
            other = by_id[r["pair_example_id"]]
            assert other["pair_example_id"] == r["example_id"]
            assert other["pair_id"] == r["pair_id"] == min(r["example_id"], other["example_id"])
            assert other["caption"] == r["caption"] and other["label"] != r["label"]
            img = ex_image = s.get(Example, r["example_id"]).image_id
            from vsr_core.models import Image

            img = s.get(Image, ex_image)
            assert (r["coco_image_id"], r["image_width"], r["image_height"]) == (
                img.coco_id,
                img.width,
                img.height,
            )
            assert "image_license_id" in r
            pair = s.get(ImagePair, s.get(Annotation, ex.annotation_id).pair_id)
            first = pair.image1_id == ex.image_id
            inst = {
                c: s.get(Instance, i)
                for c, i in zip(
                    (pair.concept_a, pair.concept_b),
                    (pair.image1_a_id, pair.image1_b_id)
                    if first
                    else (pair.image2_a_id, pair.image2_b_id),
                    strict=True,
                )
            }
            assert r["subj_instance_id"] == inst[ex.subj].coco_ann_id
            assert r["obj_instance_id"] == inst[ex.obj].coco_ann_id
            assert r["subj_bbox"] == inst[ex.subj].bbox
            shape = shapes[r["obj_instance_id"]]
            assert shape["segmentation"] == inst[ex.obj].segmentation
            assert (shape["coco_image_id"], shape["category"]) == (img.coco_id, ex.obj)
            votes = s.query(Vote).filter(Vote.example_id == ex.id).order_by(Vote.id).all()
            assert [(v["label"], v["reference_frame"], v["duration_ms"]) for v in r["votes"]] == [
                (int(v.value), v.reference_frame, v.duration_ms) for v in votes
            ]
    # One type per column: pandas reads the ids as integers, never floats with NaN.
    frame = pd.read_json(out / "all_raw.jsonl", lines=True)
    assert str(frame["annotator_id"].dtype) == "int64"
    # The split files carry the pair fields too, but not the per-vote detail.
    assert all(
        "pair_id" in r and "votes" not in r for r in read_jsonl(out / "random" / "test.jsonl")
    )


def test_datasheet_from_the_database_and_the_study_file(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    _seed_all_parts(engine, session)
    with Session(engine) as s:
        study = s.query(Study).filter(Study.is_default).one()
        study.definition += (
            '\n[card]\nlicense = "cc-by-4.0"\n'
            'ethics_approval = "Example University, ref. 2026/042"\n'
            'contact = "lab@example.edu"\n'
            'creators = "Jane Doe; Example University"\n'
        )
        study.definition_hash = definition_hash(study.definition)
        s.add(study)
        s.commit()
    out = tmp_path / "out"
    build_dataset(engine, out)
    card = (out / "README.md").read_text()
    assert _front_matter(out)["license"] == "cc-by-4.0"
    headings = [ln for ln in card.splitlines() if ln.startswith("## ")]
    for h in (
        "## Motivation",
        "## Composition",
        "## Collection process",
        "## Preprocessing, cleaning, labelling",
        "## Uses",
        "## Distribution",
        "## Maintenance",
    ):
        assert h in headings, h
    assert "**Ethics approval:** Example University, ref. 2026/042" in card
    assert "**Contact:** lab@example.edu" in card
    assert "**Funding:** not stated" in card and "**Intended uses:** not stated" in card
    # Facts the database holds: people by source, measured time, consent and its hash.
    assert "people by source: prolific 7" in card
    assert "median 1.2 s per vote" in card or "s per vote" in card
    assert "SHA-256 `" in card and "This is a research study" in card
    # meta_data.csv is described, with what it holds.
    assert "`meta_data.csv` publishes self-reported demographics of 7 people" in card
    assert "`country` (7 given: UK 7)" in card
    assert "`age` (7 given, 7 distinct values)" in card
    doc = json.loads((out / "croissant.json").read_text())
    assert doc["license"] == "cc-by-4.0"
    assert "meta_data.csv" in doc["rai:annotatorDemographics"]
    assert [c["name"] for c in doc["creator"]] == ["Jane Doe", "Example University"]
    # The Hub template's section, with this export's own figures.
    assert "## Bias, Risks, and Limitations" in headings
    bias = card.split("## Bias, Risks, and Limitations\n", 1)[1].split("\n## ", 1)[0]
    stats = json.loads((out / "stats.json").read_text())
    w = stats["workers"]
    writers = "1 person" if w["annotators"] == 1 else f"{w['annotators']} people"
    assert (
        f"English only (`language` en), written by {writers} and judged by "
        f"{w['validators']} validators ({w['both']} did both; people by source: prolific 7)"
    ) in bias
    validated = {n: r["n_validated"] for n, r in stats["relations"].items() if r["n_validated"]}
    top, n_top = max(validated.items(), key=lambda kv: (kv[1], kv[0]))
    share = 100 * n_top / sum(validated.values())
    assert f"Of {len(validated)} relations in the validated set" in bias
    assert f"the most frequent are `{top}` {n_top:,} ({share:.1f}%)" in bias
    n_mc = sum(len(read_jsonl(p)) for p in (out / "mc").glob("*.jsonl"))
    assert n_mc and f"by a person: {n_mc:,} items have all distractors judged False" in bias
    assert "None" not in bias
    strongest = stats["mc"]["strongest_adversary"]
    if strongest:
        assert f"({strongest['name']}, options only) scores {strongest['accuracy']:.3f}" in bias
    assert "Flickr licence (`image_license_id`" in bias and "### Recommendations" in bias


def test_vsr_compatible_writes_the_release_types(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    from vsr_dataset.import_vsr import import_vsr_file

    rec = {
        "image": "000000419052.jpg",
        "image_link": "http://images.cocodataset.org/train2017/000000419052.jpg",
        "caption": "The cat is on the bed.",
        "label": 1,
        "relation": "on",
        "annotator_id": 4,
        "vote_true_validator_id": [7, 3, 2],
        "vote_false_validator_id": [],
    }
    (tmp_path / "raw.jsonl").write_text(json.dumps(rec) + "\n")
    import_vsr_file(engine, tmp_path / "raw.jsonl")  # only the raw file: no reference_frame
    build_dataset(engine, tmp_path / "compat", BuildOptions(vsr_compatible=True))
    build_dataset(engine, tmp_path / "hub")
    compat = read_jsonl(tmp_path / "compat" / "all_validated.jsonl")[0]
    assert compat["vote_true_validator_id"] == "[7, 3, 2]"  # as the release's split files
    assert json.loads(compat["vote_true_validator_id"]) == [7, 3, 2]
    assert compat["vote_false_validator_id"] == "[]"
    assert "reference_frame" in compat and compat["reference_frame"] is None
    raw = read_jsonl(tmp_path / "compat" / "all_raw.jsonl")[0]
    assert raw["vote_true_validator_id"] == [7, 3, 2]  # the raw file has arrays
    hub = read_jsonl(tmp_path / "hub" / "all_validated.jsonl")[0]
    assert hub["vote_true_validator_id"] == [7, 3, 2]
    # Fields null throughout an imported release keep their type in the features.
    raw_info = next(
        i for i in _front_matter(tmp_path / "hub")["dataset_info"] if i["config_name"] == "raw"
    )
    feats = {f["name"]: f for f in raw_info["features"]}
    assert hub["image_width"] is None and feats["image_width"] == {
        "name": "image_width",
        "dtype": "int64",
    }
    assert feats["subj_bbox"] == {"name": "subj_bbox", "list": "float64"}
    assert {"name": "duration_ms", "dtype": "int64"} in feats["votes"]["list"]
    assert "--vsr-compatible" in (tmp_path / "compat" / "README.md").read_text()
    # VSR's numeric frame codes come back as numbers.
    rec2 = {
        **rec,
        "caption": "The cat is left of the bed.",
        "relation": "left of",
        "reference_frame": 1.0,
        "vote_true_validator_id": "[7, 3]",
        "vote_false_validator_id": "[]",
    }
    (tmp_path / "val.jsonl").write_text(json.dumps(rec2) + "\n")
    import_vsr_file(engine, tmp_path / "val.jsonl")
    build_dataset(engine, tmp_path / "compat2", BuildOptions(vsr_compatible=True))
    frames = {
        r["caption"]: r["reference_frame"]
        for r in read_jsonl(tmp_path / "compat2" / "all_validated.jsonl")
    }
    assert frames == {"The cat is on the bed.": None, "The cat is left of the bed.": 1.0}
