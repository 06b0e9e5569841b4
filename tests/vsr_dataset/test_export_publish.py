# mypy: disable-error-code="arg-type,operator,index,misc,union-attr,type-var,attr-defined"
"""A dataset a lab can publish: machine negatives apart from the binary data, splits shared
with matching, the study's keep rule, mc_unvalidated/ holding only unjudged items."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.vsr_dataset.test_export import read_jsonl, seed_native
from vsr_core.kept import kept_counts
from vsr_core.models import Example, MatchRun, McItem, Vote, Worker
from vsr_core.studies.settings import save_study_config
from vsr_dataset.export import BuildOptions, build_dataset
from vsr_dataset.match_splits import export_split_mapping
from vsr_dataset.splits import SplitError

BINARY = [
    "all_raw.jsonl",
    "all_validated.jsonl",
    *(f"{s}/{p}.jsonl" for s in ("random", "zeroshot") for p in ("train", "dev", "test")),
]


def _kept_true(session: Session, mapping: dict[int, str]) -> list[Example]:
    return [e for e in session.query(Example).order_by(Example.id) if e.id in mapping and e.label]


def _negative(session: Session, query: Example, other: Example, n: int) -> Example:
    """A machine-made False caption on the query's image (what matching sends to validators)."""
    neg = Example(
        study_id=query.study_id,
        image_id=query.image_id,
        caption=f"{other.caption[:-1]} ({n}).",
        relation=other.relation,
        subj=other.subj,
        obj=other.obj,
        label=False,
        origin="adversarial",
        parent_example_id=query.id,
    )
    session.add(neg)
    session.flush()
    return neg


def _judge(session: Session, ex: Example, values: list[bool], workers: list[Worker]) -> None:
    for value, w in zip(values, workers, strict=False):
        session.add(Vote(example_id=ex.id, worker_id=w.id, value=value))


def _match_run(session: Session, items: list[tuple[Example, str, list[Example]]]) -> MatchRun:
    run = MatchRun(params={"negatives_sent": True, "split_seed": 0, "keep_threshold": 2 / 3})
    session.add(run)
    session.flush()
    for query, split, negs in items:
        session.add(
            McItem(
                run_id=run.id,
                query_example_id=query.id,
                split=split,
                choices=[query.caption, *(n.caption for n in negs)],
                answer_index=0,
                relations=[query.relation, *(n.relation for n in negs)],
                distractor_example_ids=[None, *(None for _ in negs)],
                params={"negative_example_ids": [None, *(n.id for n in negs)]},
            )
        )
    return run


def _seed_with_negatives(engine: Engine, session: Session) -> tuple[dict[int, str], list[int]]:
    """Native data, a matching run over the export's split, and its negatives (not judged)."""
    seed_native(session, n_annotations=60)
    session.close()
    mapping = export_split_mapping(engine, 2 / 3, 0)
    with Session(engine) as s:
        queries = _kept_true(s, mapping)[:20]
        items, negs = [], []
        for i, q in enumerate(queries):
            others = [e for e in queries if e.relation != q.relation][:2]
            ns = [_negative(s, q, o, 10 * i + j) for j, o in enumerate(others)]
            items.append((q, mapping[q.id], ns))
            negs += [int(n.id) for n in ns]
        _match_run(s, items)
        s.commit()
    return mapping, negs


def test_judging_negatives_changes_no_binary_file(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    mapping, negs = _seed_with_negatives(engine, session)
    before = tmp_path / "before"
    build_dataset(engine, before)
    # Validators judge every negative, most False (kept), some True (rejected).
    with Session(engine) as s:
        workers = s.query(Worker).filter(Worker.source == "prolific").all()[1:4]
        for i, nid in enumerate(negs):
            _judge(
                s,
                s.get(Example, nid),
                [i % 5 == 0, False, False] if i % 7 else [True, True, False],
                workers,
            )
        s.commit()
    after = tmp_path / "after"
    summary = build_dataset(engine, after, BuildOptions(with_provenance=True))
    for rel in BINARY:
        assert (before / rel).read_bytes() == (after / rel).read_bytes(), rel
    assert all(r["origin"] == "human" for r in read_jsonl(after / "all_raw.jsonl"))
    # The negatives are written apart, each with its query and the validators' verdict;
    # the distractors of dev/test items only in provenance/ (they would name the answer).
    neg = read_jsonl(after / "machine_negatives.jsonl")
    held = read_jsonl(after / "provenance" / "machine_negatives.jsonl")
    assert summary.n_negatives == len(neg) and len(neg) + len(held) == len(negs)
    assert {r["example_id"] for r in neg} | {r["example_id"] for r in held} == set(negs)
    assert neg and held
    for r in neg:
        assert mapping[r["query_example_id"]] == "train" and "query_caption" not in r
    for r in held:
        assert mapping[r["query_example_id"]] in ("dev", "test") and r["not_for_evaluation"]
    for r in neg + held:
        assert r["origin"] == "adversarial" and r["label"] == 0
        assert r["query_random_split"] == mapping[r["query_example_id"]]
        agree = len(r["vote_false_validator_id"])
        assert r["kept"] == (3 * agree >= 2 * (agree + len(r["vote_true_validator_id"])))
    assert 0 < sum(r["kept"] for r in neg + held) < len(neg + held)
    assert [r["example_id"] for r in neg] != sorted(r["example_id"] for r in neg)
    stats = json.loads((after / "stats.json").read_text())
    assert stats["machine_negatives"]["judged"] == len(negs)
    assert stats["machine_negatives"]["held_back_as_mc_distractors"] == len(held)
    assert stats["machine_negatives"]["in_splits"] is False
    # A partial build writes the same machine_negatives.jsonl (no distractor of dev/test).
    raw_only = tmp_path / "raw_only"
    build_dataset(engine, raw_only, BuildOptions(only=frozenset({"raw"})))
    partial = read_jsonl(raw_only / "machine_negatives.jsonl")
    assert [r["example_id"] for r in partial] == [r["example_id"] for r in neg]
    # A look-up of the options of mc/ dev and test in machine_negatives.jsonl finds nothing.
    shown = {(r["image"], r["caption"]) for r in neg}
    for p in ("dev", "test"):
        for item in (
            read_jsonl(after / "mc" / f"{p}.jsonl")
            if (after / "mc" / f"{p}.jsonl").exists()
            else []
        ):
            assert not {(item["image"], c) for c in item["choices"]} & shown

    # Asked for, kept negatives join the splits in their query's part (but the distractors
    # of dev/test items); no human moves.
    joined = tmp_path / "joined"
    build_dataset(engine, joined, BuildOptions(with_negatives=True))
    kept_negs = {r["example_id"]: r for r in neg if r["kept"]}
    for p in ("train", "dev", "test"):
        old = read_jsonl(after / "random" / f"{p}.jsonl")
        new = read_jsonl(joined / "random" / f"{p}.jsonl")
        assert [r for r in new if r["origin"] == "human"] == old
        for r in new:
            if r["origin"] == "adversarial":
                assert r["example_id"] in kept_negs
                assert mapping[kept_negs[r["example_id"]]["query_example_id"]] == p
        zs_old = read_jsonl(after / "zeroshot" / f"{p}.jsonl")
        zs_new = read_jsonl(joined / "zeroshot" / f"{p}.jsonl")
        assert [r for r in zs_new if r["origin"] == "human"] == zs_old
    n_joined = sum(
        1
        for p in ("train", "dev", "test")
        for r in read_jsonl(joined / "random" / f"{p}.jsonl")
        if r["origin"] == "adversarial"
    )
    assert n_joined == len(kept_negs)


def test_an_mc_truth_that_would_move_fails_the_export(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    _seed_with_negatives(engine, session)
    build_dataset(engine, tmp_path / "same")  # the run's seed and keep rule: no truth moves
    with pytest.raises(
        SplitError,
        match=r"multiple-choice truth\(s\) of matching run \d+ "
        r"would move to another random part",
    ):
        build_dataset(engine, tmp_path / "other", BuildOptions(seed=1))
    assert not (tmp_path / "other").exists()


def test_export_uses_the_study_keep_rule(
    engine: Engine, session: Session, tmp_path: Path, db_url: str
) -> None:
    seed_native(session, n_annotations=60)
    save_study_config(session, {"keep_threshold": 0.8})
    session.close()
    raw = read_jsonl_from_build(engine, tmp_path / "a")
    strict = kept_counts(((_agree(r), _n(r), 1) for r in raw), Fraction(4, 5)).kept
    loose = kept_counts(((_agree(r), _n(r), 1) for r in raw), Fraction(2, 3)).kept
    assert strict != loose
    validated = read_jsonl(tmp_path / "a" / "all_validated.jsonl")
    assert len(validated) == strict
    card = (tmp_path / "a" / "README.md").read_text()
    assert "at least 4/5 of its votes" in card and "the study's setting" in card
    # Told otherwise, it says so.
    build_dataset(engine, tmp_path / "b", BuildOptions(threshold=Fraction(2, 3)))
    assert len(read_jsonl(tmp_path / "b" / "all_validated.jsonl")) == loose
    assert "not the study's setting" in (tmp_path / "b" / "README.md").read_text()
    # The CLI says which rule it used.
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from vsr_cli.main import build_dataset_main as m; m()",
            "--out",
            str(tmp_path / "c"),
            "-q",
            "--database-url",
            db_url,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    assert f"{strict:,} validated (keep rule 4/5 (the study's setting))" in out
    # So does the dashboard's Build job.
    from vsr_cli.admin_jobs import run_build

    result = run_build(engine, {"zip": str(tmp_path / "d.zip")}, lambda f, m: None, 1)
    assert result["validated"] == strict and result["keep_rule"].startswith("keep rule 4/5")


def read_jsonl_from_build(engine: Engine, out: Path) -> list[dict[str, object]]:
    build_dataset(engine, out)
    return read_jsonl(out / "all_raw.jsonl")


def _agree(r: dict[str, object]) -> int:
    return len(r["vote_true_validator_id" if r["label"] else "vote_false_validator_id"])


def _n(r: dict[str, object]) -> int:
    return len(r["vote_true_validator_id"]) + len(r["vote_false_validator_id"])


def test_mc_unvalidated_holds_only_unjudged_items(
    engine: Engine, session: Session, tmp_path: Path
) -> None:
    seed_native(session, n_annotations=60)
    session.close()
    mapping = export_split_mapping(engine, 2 / 3, 0)
    with Session(engine) as s:
        # Train items: a dev/test item whose truth is in zeroshot/train is left out of mc*/.
        q = [e for e in _kept_true(s, mapping) if mapping[e.id] == "train"][:3]
        workers = s.query(Worker).filter(Worker.source == "prolific").all()[1:4]
        negs = [
            [_negative(s, x, q[(i + 1) % 3], 10 * i + j) for j in range(2)] for i, x in enumerate(q)
        ]
        for n in negs[0]:
            _judge(s, n, [False, False, False], workers)  # cleared
        _judge(s, negs[1][0], [False, False, False], workers)
        _judge(s, negs[1][1], [True, True, False], workers)  # judged true: rejected
        _judge(s, negs[2][0], [False, False, False], workers)  # negs[2][1]: nobody judged it
        _match_run(s, [(x, mapping[x.id], negs[i]) for i, x in enumerate(q)])
        s.commit()
        captions = [x.caption for x in q]
    out = tmp_path / "out"
    build_dataset(engine, out, BuildOptions(unvalidated_mc=True))
    mc = [r for p in (out / "mc").glob("*.jsonl") for r in read_jsonl(p)]
    pending = [r for p in (out / "mc_unvalidated").glob("*.jsonl") for r in read_jsonl(p)]
    assert [r["answer_caption"] for r in mc] == [captions[0]]
    assert [r["answer_caption"] for r in pending] == [captions[2]]
    card = (out / "README.md").read_text()
    assert "1 items are left out of both: validators judged one of their distractors true" in card
    assert "nobody has judged yet" in card
