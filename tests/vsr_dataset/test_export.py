# mypy: disable-error-code="arg-type,operator,index,misc"
# (SQLModel ids are Optional until flushed; the seeding code flushes before use.)
"""`build-dataset` on collected (native) data: grouped splits, ids, --only, stdout, mc, errors."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.mc_files import mc_records
from vsr_core.models import (
    Annotation,
    Example,
    Image,
    ImagePair,
    Instance,
    MatchRun,
    McItem,
    Vote,
    Worker,
)
from vsr_core.studies.store import create_study
from vsr_dataset.export import BuildOptions, ExportError, build_dataset, stream_part, zip_export
from vsr_dataset.splits import SplitError, SplitItem, check_zeroshot

CONCEPTS = [
    "cat",
    "dog",
    "teddy bear",
    "dining table",
    "hot dog",
    "cell phone",
    "bed",
    "couch",
    "pizza",
    "person",
    "car",
    "bus",
    "oven",
    "cake",
    "bench",
    "train",
    "horse",
    "sink",
    "laptop",
    "book",
]
ZH_FILE = Path(__file__).resolve().parents[2] / "studies" / "vsr-zh.toml"
RELATIONS = ["on", "under", "left of", "contains", "at the right side of", "near", "behind"]


def seed_native(session: Session, n_annotations: int = 120, seed: int = 1) -> dict[str, int]:
    """Annotations of real shape: a pair of images, a caption True for one and False for the
    other (two Examples), and 3-4 validator votes per Example (some disagreeing)."""
    rng = random.Random(seed)
    author = Worker(source="prolific", external_id="PID-author", roles=["annotator"])
    validators = [
        Worker(source="prolific", external_id=f"PID-v{i}", roles=["validator"]) for i in range(6)
    ]
    session.add(author)
    session.add_all(validators)
    session.flush()
    n_ex = 0
    for k in range(n_annotations):
        a, b = sorted(rng.sample(CONCEPTS, 2))
        imgs, inst = [], []
        for j in range(2):
            img = Image(
                coco_id=100_000 + 2 * k + j,
                file_name=f"{100_000 + 2 * k + j:012d}.jpg",
                coco_split="val2017",
                width=640,
                height=480,
            )
            session.add(img)
            session.flush()
            pair_inst = [
                Instance(
                    coco_ann_id=10 * (2 * k + j) + n,
                    image_id=img.id,
                    category_id=n + 1,
                    category=c,
                    bbox=[0, 0, 10, 10],
                    area=40_000.0,
                )
                for n, c in enumerate((a, b))
            ]
            session.add_all(pair_inst)
            session.flush()
            imgs.append(img)
            inst.append(pair_inst)
        pair = ImagePair(
            concept_a=a,
            concept_b=b,
            image1_id=imgs[0].id,
            image1_a_id=inst[0][0].id,
            image1_b_id=inst[0][1].id,
            image2_id=imgs[1].id,
            image2_a_id=inst[1][0].id,
            image2_b_id=inst[1][1].id,
            status="annotated",
        )
        session.add(pair)
        session.flush()
        rel = rng.choice(RELATIONS)
        subj, obj = (a, b) if rng.random() < 0.5 else (b, a)
        ann = Annotation(
            pair_id=pair.id,
            worker_id=author.id,
            relation=rel,
            subj=subj,
            obj=obj,
            true_image_id=imgs[0].id,
        )
        session.add(ann)
        session.flush()
        from vsr_core.captions import render_caption

        caption = render_caption(subj, rel, obj)
        for img, label in ((imgs[0], True), (imgs[1], False)):
            ex = Example(
                image_id=img.id,
                caption=caption,
                relation=rel,
                subj=subj,
                obj=obj,
                label=label,
                origin="human",
                annotation_id=ann.id,
                author_id=author.id,
                reference_frame="relative" if k % 7 == 0 else None,
            )
            session.add(ex)
            session.flush()
            n_ex += 1
            p_agree = rng.choice([1.0, 0.9, 0.6])
            for v in rng.sample(validators, rng.choice([3, 3, 4])):
                value = label if rng.random() < p_agree else not label
                session.add(Vote(example_id=ex.id, worker_id=v.id, value=value))
    session.commit()
    return {"examples": n_ex}


def read_jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_build_native_dataset(engine: Engine, session: Session, tmp_path: Path) -> None:
    seed_native(session)
    session.close()
    out = tmp_path / "out"
    summary = build_dataset(engine, out)
    raw = read_jsonl(out / "all_raw.jsonl")
    validated = read_jsonl(out / "all_validated.jsonl")
    assert len(raw) == 240 and summary.n_raw == 240
    assert 0 < len(validated) < 240 and summary.n_validated == len(validated)

    # VSR field names and types, plus the added fields.
    r0 = raw[0]
    assert list(r0)[:10] == [
        "image",
        "image_link",
        "caption",
        "label",
        "relation",
        "subj",
        "obj",
        "annotator_id",
        "vote_true_validator_id",
        "vote_false_validator_id",
    ]
    assert r0["image_link"] == f"http://images.cocodataset.org/val2017/{r0['image']}"
    for r in raw:
        assert r["label"] in (0, 1)
        assert isinstance(r["annotator_id"], int)
        votes = r["vote_true_validator_id"] + r["vote_false_validator_id"]
        assert all(isinstance(v, int) for v in votes)
        assert r["relation_category"] and r["origin"] == "human"
        agree = len(r["vote_true_validator_id" if r["label"] else "vote_false_validator_id"])
        assert r["agreement"] == round(agree / len(votes), 4)
    # One type per field (Hub-native): the writer's frame is text, null when not known.
    assert {r["reference_frame"] for r in raw} == {"relative", None}
    # No platform ids are published: workers are numbered by their database id.
    assert "PID" not in (out / "all_raw.jsonl").read_text()

    # Validated = the keep rule applied to each record.
    def kept(r: dict[str, object]) -> bool:
        t, f = len(r["vote_true_validator_id"]), len(r["vote_false_validator_id"])
        return 3 * (t if r["label"] else f) >= 2 * (t + f)

    assert [r["example_id"] for r in validated] == [r["example_id"] for r in raw if kept(r)]

    # Random split: 70/10/20 of the validated set, disjoint, grouped by annotation.
    parts = {p: read_jsonl(out / "random" / f"{p}.jsonl") for p in ("train", "dev", "test")}
    ids = {p: {r["example_id"] for r in rs} for p, rs in parts.items()}
    assert sum(len(v) for v in ids.values()) == len(validated)
    assert not (ids["train"] & ids["dev"] or ids["train"] & ids["test"] or ids["dev"] & ids["test"])
    part_of_caption_image: dict[tuple[object, object], str] = {}
    with Session(engine) as s:
        ann_of = {e.id: e.annotation_id for e in s.query(Example)}
    seen_ann: dict[object, str] = {}
    for p, rs in parts.items():
        for r in rs:
            ann = ann_of[r["example_id"]]
            assert seen_ann.setdefault(ann, p) == p, "the halves of one annotation were split"
            part_of_caption_image[(r["caption"], r["image"])] = p
    n = len(validated)
    assert abs(len(ids["train"]) - 0.7 * n) <= 2 and abs(len(ids["dev"]) - 0.1 * n) <= 2

    # Zero-shot: no concept in two parts.
    zs = {p: read_jsonl(out / "zeroshot" / f"{p}.jsonl") for p in ("train", "dev", "test")}
    concepts = {p: {c for r in rs for c in (r["subj"], r["obj"])} for p, rs in zs.items()}
    assert not (
        concepts["train"] & concepts["dev"]
        or concepts["train"] & concepts["test"]
        or concepts["dev"] & concepts["test"]
    )

    stats = json.loads((out / "stats.json").read_text())
    assert stats["n_raw"] == 240 and stats["n_validated"] == len(validated)
    assert stats["labels"]["raw"] == {"true": 120, "false": 120}
    assert stats["splits"]["random"] == {p: len(v) for p, v in ids.items()}
    assert set(stats["relations"]) <= set(RELATIONS)
    assert -1 <= stats["fleiss_kappa"]["raw"] <= 1
    assert stats["workers"] == {"annotators": 1, "validators": 6, "both": 0}
    card = (out / "README.md").read_text()
    assert "figures/relations.png" in card and f"{stats['n_validated']:,}" in card
    for fig in ("relations", "concepts", "disagreement"):
        png = (out / "figures" / f"{fig}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 5_000
    assert not (out / "meta_data.csv").exists()  # nobody has demographics
    assert not (out / "mc").exists()  # matching never ran


def test_per_example_split_and_determinism(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    seed_native(session, n_annotations=60)
    session.close()
    opts = BuildOptions(split_unit="example", seed=3)
    a = build_dataset(engine, tmp_path / "a", opts)
    build_dataset(engine, tmp_path / "b", opts)
    for rel in a.files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    n = a.n_validated
    assert a.splits["random"] == {
        "train": int(0.7 * n),
        "dev": int(0.1 * n),
        "test": n - int(0.7 * n) - int(0.1 * n),
    }
    c = build_dataset(engine, tmp_path / "c", BuildOptions(split_unit="example", seed=4))
    assert (tmp_path / "c" / "random" / "train.jsonl").read_bytes() != (
        tmp_path / "a" / "random" / "train.jsonl"
    ).read_bytes()
    zip_export(tmp_path / "a", tmp_path / "a.zip")
    zip_export(tmp_path / "b", tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    assert c.n_validated == n


def test_only_and_stdout(engine: Engine, session: Session, tmp_path: Path) -> None:
    seed_native(session, n_annotations=40)
    session.close()
    full = build_dataset(engine, tmp_path / "full")
    only = build_dataset(engine, tmp_path / "only", BuildOptions(only=frozenset({"validated"})))
    assert only.files == ["all_validated.jsonl"]
    assert sorted(p.name for p in (tmp_path / "only").iterdir()) == ["all_validated.jsonl"]
    import io

    buf = io.BytesIO()
    n = stream_part(engine, "zeroshot/test", buf)
    assert buf.getvalue() == (tmp_path / "full" / "zeroshot" / "test.jsonl").read_bytes()
    assert n == full.splits["zeroshot"]["test"]
    with pytest.raises(ExportError):
        stream_part(engine, "stats", io.BytesIO())
    with pytest.raises(ExportError, match="not empty"):
        build_dataset(engine, tmp_path / "full")
    with pytest.raises(ExportError, match="unknown part"):
        build_dataset(engine, tmp_path / "x", BuildOptions(only=frozenset({"everything"})))


def test_cli_stdout_and_errors(
    db_url: str, engine: Engine, session: Session, tmp_path: Path
) -> None:
    seed_native(session, n_annotations=30)
    session.close()
    cmd = [sys.executable, "-c", "from vsr_cli.main import build_dataset_main as m; m()"]
    proc = subprocess.run(
        cmd + ["--out", "-", "--only", "validated", "--database-url", db_url],
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    build_dataset(engine, tmp_path / "ref", BuildOptions(only=frozenset({"validated"})))
    assert proc.stdout == (tmp_path / "ref" / "all_validated.jsonl").read_bytes()
    for bad_args, message, code in (
        (["--out", str(tmp_path / "ref")], "not empty", 1),
        # a bad option value: exit 2, as for every usage error
        (["--out", str(tmp_path / "z"), "--threshold", "1.5"], "threshold", 2),
        (["--out", str(tmp_path / "z"), "--random-ratios", "70/30"], "three parts", 2),
        (["--out", str(tmp_path / "z"), "--label-model", "oracle"], "label-model", 2),
    ):
        bad = subprocess.run(
            cmd + bad_args + ["--database-url", db_url, "-q"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert bad.returncode == code, bad_args
        lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and message in lines[0], bad.stderr
    assert not (tmp_path / "z").exists()


def test_mc_export_and_label_model(engine: Engine, session: Session, tmp_path: Path) -> None:
    from vsr_dataset.match_splits import export_split_mapping

    seed_native(session, n_annotations=30)
    # Items in the part build-dataset's split gives their truth, as matching makes them.
    mapping = export_split_mapping(engine, 2 / 3, 0)
    exs = [e for e in session.query(Example).order_by(Example.id) if e.id in mapping]
    old = MatchRun(params={"h": 0.5})
    session.add(old)
    session.flush()
    run = MatchRun(params={"h": 1.0})
    session.add(run)
    session.flush()
    for run_id in (old.id, run.id):
        for ex in exs[:6]:
            others = [e for e in exs if e.relation != ex.relation][:3]
            session.add(
                McItem(
                    run_id=run_id,
                    query_example_id=ex.id,
                    split=mapping[ex.id],
                    choices=[ex.caption] + [o.caption for o in others],
                    answer_index=0,
                    relations=[ex.relation] + [o.relation for o in others],
                    distractor_example_ids=[o.id for o in others],
                )
            )
    session.commit()
    run_id, query_ids = run.id, {e.id for e in exs[:6]}
    session.close()
    out = tmp_path / "out"
    build_dataset(
        engine,
        out,
        BuildOptions(label_model="dawid-skene", unvalidated_mc=True, with_provenance=True),
    )
    # These runs never sent their distractors to validators: nothing reaches mc/ (docs/matching.md);
    # asked for, the items are written apart in mc_unvalidated/ and marked.
    assert not list((out / "mc").glob("*.jsonl"))
    public = {p.stem: read_jsonl(p) for p in (out / "mc_unvalidated").glob("*.jsonl")}
    left_out = json.loads((out / "stats.json").read_text())["mc"]["left_out_for_alignment"]
    assert sum(len(v) for v in public.values()) + left_out.get("mc_unvalidated", 0) == 6
    assert all(it["validated"] is False for v in public.values() for it in v)
    assert "not** cleared" in (out / "README.md").read_text()
    # Nothing but the answer fields points at the answer: no Example id, no source ids.
    for recs in public.values():
        for it in recs:
            assert not {"caption", "example_id", "answer_example_id", "distractor_example_ids"} & (
                set(it)
            )
    # Provenance (on request) says where each item came from.
    mc = mc_records(out, "mc_unvalidated")
    assert {it["answer_example_id"] for it in mc} <= query_ids and mc
    item = mc[0]
    assert item["run_id"] == run_id  # the latest run only
    assert item["choices"][item["answer"]] == item["answer_caption"]
    assert len(item["relations"]) == 4
    ids: list[int] = item["distractor_example_ids"]
    assert ids == sorted(ids) and None not in ids
    raw = read_jsonl(out / "all_raw.jsonl")
    assert all(r["aggregate_label"] in (0, 1) for r in raw)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["label_model"]["model"] == "dawid-skene"
    assert stats["label_model"]["n_labelled"] == len(raw)
    assert stats["mc"]["run_id"] == run_id
    # A later matching run of another study is not this study's figure.
    with Session(engine) as s:
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        s.add(MatchRun(study_id=zh.id or 0, params={"h": 2.0}))
        s.commit()
    build_dataset(engine, tmp_path / "again", BuildOptions(unvalidated_mc=True))
    again = json.loads((tmp_path / "again" / "stats.json").read_text())
    assert again["mc"]["run_id"] == run_id


def test_cli_prints_the_exported_mc_figure(db_url: str, engine: Engine, tmp_path: Path) -> None:
    # What the dashboard points command-line users to: the figure of the files written.
    from tests.support.mc_run import unvalidated_run

    unvalidated_run(engine)
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "from vsr_cli.main import build_dataset_main as m; m()"]
    proc = subprocess.run(
        cmd
        + [
            "--out",
            str(out),
            "--unvalidated-mc",
            "--only",
            "mc",
            "--only",
            "stats",
            "--database-url",
            db_url,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    mc = json.loads((out / "stats.json").read_text())["mc"]
    best = mc["strongest_adversary"]
    lo, hi = best["ci95"]
    assert (
        f"strongest answer-only adversary {best['name']} {best['accuracy']:.3f} (95 % CI "
        f"{lo:.3f}-{hi:.3f}) on the {mc['adversaries_n_test']:,} test items of "
        f"mc_unvalidated/ (not validated)"
    ) in proc.stdout


def test_worker_ids_of_mixed_sources_never_collide(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    from vsr_dataset.import_vsr import import_vsr_file

    seed_native(session, n_annotations=5)
    session.close()
    rec = {
        "image": "000000419052.jpg",
        "image_link": "http://images.cocodataset.org/train2017/000000419052.jpg",
        "caption": "The cat is on the bed.",
        "label": 1,
        "relation": "on",
        "annotator_id": 40,
        "vote_true_validator_id": [7, 3],
        "vote_false_validator_id": [7],
    }
    (tmp_path / "r.jsonl").write_text(json.dumps(rec) + "\n")
    import_vsr_file(engine, tmp_path / "r.jsonl")
    build_dataset(engine, tmp_path / "out")
    raw = read_jsonl(tmp_path / "out" / "all_raw.jsonl")
    imported = [r for r in raw if r["origin"] == "imported"]
    assert len(imported) == 1
    assert imported[0]["annotator_id"] == 40
    assert imported[0]["vote_true_validator_id"] == [7, 3]
    assert imported[0]["vote_false_validator_id"] == [7]  # the repeat "7#2" is 7 again
    with Session(engine) as s:
        native = {w.id for w in s.query(Worker).filter(Worker.source == "prolific")}
    native_ids = {
        i
        for r in raw
        if r["origin"] == "human"
        for i in [r["annotator_id"], *r["vote_true_validator_id"], *r["vote_false_validator_id"]]
    }
    assert native_ids <= {40 + w for w in native}  # numbered after the largest VSR id
    assert min(native_ids) > 40


def test_empty_database_is_an_error(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no Examples"):
        build_dataset(engine, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_zeroshot_leak_is_caught() -> None:
    items = [SplitItem(1, 1, "cat", "dog"), SplitItem(2, 2, "dog", "bed")]
    with pytest.raises(SplitError, match="concept 'dog'"):
        check_zeroshot(items, {"train": [1], "dev": [2], "test": []})
    check_zeroshot(items, {"train": [1, 2], "dev": [], "test": []})
