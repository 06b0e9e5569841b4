"""`vsr match` end to end on a database: real VSR records imported with `vsr import-vsr`,
matched, stored, negatives sent to validation and filtered by votes (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlmodel import Session
from typer.testing import CliRunner

from matching.option_conflicts import meaning_key
from matching.store import surviving_items
from tests.matching.support import VSR_VALIDATED, build_tiny_encoder, concepts_of, vsr_sample
from tests.support.mc_files import mc_records
from vsr_cli.failure import CliError
from vsr_cli.main import app
from vsr_core.db import make_engine
from vsr_core.models import Example, MatchRun, McItem, Vote, Worker
from vsr_core.tables import EXAMPLE

pytestmark = pytest.mark.skipif(not VSR_VALIDATED.exists(), reason="real VSR data not found")
runner = CliRunner()


@pytest.fixture(scope="module")
def sample_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real lines of the validated release: a stratified sample by relation."""
    keep = {r.id for r in vsr_sample(10)}
    lines = VSR_VALIDATED.read_text().splitlines(keepends=True)
    path = tmp_path_factory.mktemp("vsr") / "sample.jsonl"
    path.write_text("".join(line for i, line in enumerate(lines, start=1) if i in keep))
    return path


@pytest.fixture(scope="module")
def encoder_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_encoder(tmp_path_factory.mktemp("enc"), concepts_of(vsr_sample(10)))


def _suite_from_files(folder: Path, encoder_path: Path) -> dict[str, Any]:
    """The adversary suite on exported mc JSONL files, read here line by line: fitted on
    train and, apart, on dev, scored on test."""
    from matching.diagnostics import measured_suites
    from matching.pipeline import Item
    from matching.records import Record
    from matching.relevance import load_encoder

    items: dict[str, list[Item]] = {}
    for split in ("train", "dev", "test"):
        path = folder / f"{split}.jsonl"
        for line in path.read_text().splitlines() if path.exists() else []:
            rec = json.loads(line)
            rel = rec["relations"][rec["answer"]]
            truth = Record(
                len(items.get(split, [])),  # the files hold no Example id
                rec["image"],
                rec["subj"],
                rel,
                rec["obj"],
                rec["answer_caption"],
                True,
            )
            items.setdefault(split, []).append(
                Item(
                    truth,
                    split,
                    rec["choices"],
                    [(rec["subj"], r, rec["obj"]) for r in rec["relations"]],
                    rec["answer"],
                    [],
                )
            )
    encoder = load_encoder(str(encoder_path))
    return measured_suites(items["train"], items.get("dev", []), items["test"], encoder, 0)


def _match(db_url: str, encoder: Path, *extra: str):  # type: ignore[no-untyped-def]
    return runner.invoke(
        app,
        ["match", "--database-url", db_url, "--model", str(encoder), *extra],
        catch_exceptions=True,
    )


def test_match_command_end_to_end(
    db_url: str, sample_file: Path, encoder_path: Path, tmp_path: Path
) -> None:
    res = runner.invoke(app, ["import-vsr", str(sample_file), "--database-url", db_url, "-q"])
    assert res.exit_code == 0, res.output

    out_json = tmp_path / "diag.json"
    res = _match(
        db_url,
        encoder_path,
        "--h",
        "1.0",
        "--k",
        "3",
        "--report",
        "--sweep",
        "0,1",
        "--send-negatives-to-validation",
        "--json",
        str(out_json),
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert "answer-only accuracy (test)" in res.output
    assert "validation cost: " in res.output and " votes needed " in res.output
    assert "distractors implied by truth (table) 0\n" in res.output
    assert "text_only" in res.output  # the sweep table
    diag = json.loads(out_json.read_text())
    assert [row["h"] for row in diag["sweep"]] == [0.0, 1.0]

    engine = make_engine(db_url)
    with Session(engine) as s:
        runs = s.exec(select(MatchRun)).scalars().all()  # type: ignore[call-overload]
        assert len(runs) == 1
        run = runs[0]
        assert run.params["h"] == 1.0 and run.params["k"] == 3 and run.params["negatives_sent"]
        assert run.diagnostics["duplicate_choice_items"] == 0
        items = s.exec(select(McItem).order_by(McItem.id)).scalars().all()  # type: ignore[call-overload,arg-type]
        assert len(items) == sum(run.diagnostics["items"].values()) > 50
        n_adv = s.exec(
            select(func.count()).select_from(Example).where(Example.origin == "adversarial")  # type: ignore[arg-type]
        ).scalar_one()  # type: ignore[call-overload]
        assert 0 < n_adv <= 3 * len(items)
        # The queue serves in id order: one query's distractors never follow each other.
        parents = (
            s.execute(
                select(EXAMPLE.c.parent_example_id)
                .where(EXAMPLE.c.origin == "adversarial")
                .order_by(EXAMPLE.c.id)
            )
            .scalars()
            .all()
        )
        assert all(a != b for a, b in zip(parents, parents[1:], strict=False)), parents
        negatives = s.exec(select(Example).where(Example.origin == "adversarial")).scalars().all()  # type: ignore[call-overload,arg-type]
        keys = [(n.image_id, meaning_key((n.subj, n.relation, n.obj))) for n in negatives]
        assert len(set(keys)) == len(keys)  # equivalent negatives share one validation
        cost = run.diagnostics["validation_cost"]
        assert cost["negatives"] == cost["negatives_unjudged"] == n_adv
        assert cost["votes_needed"] == 3 * n_adv and cost["items"] == len(items)
        assert 0 < cost["p_reject"] <= 1 and 0 < cost["expected_items_kept"] <= len(items)
        for it in items:
            query = s.get(Example, it.query_example_id)
            assert query is not None and query.label
            assert it.choices[it.answer_index] == query.caption
            assert len(set(it.choices)) == 4 and len(it.relations) == 4
            assert it.params["k"] == 3 and it.split in ("train", "dev", "test")
            negs = it.params["negative_example_ids"]
            assert negs[it.answer_index] is None
            for i, neg_id in enumerate(negs):
                if i == it.answer_index:
                    continue
                neg = s.get(Example, neg_id)
                assert neg is not None and neg.origin == "adversarial" and not neg.label
                # The distractor, or a caption saying the same (synonym, converse) that
                # another item on this image offered: one validation for both.
                assert meaning_key((neg.subj, neg.relation, neg.obj)) == meaning_key(
                    (query.subj, it.relations[i], query.obj)
                )
                assert neg.image_id == query.image_id
                assert neg.parent_example_id is not None and neg.queue_open
        # Nothing validated yet: no item may be exported.
        assert surviving_items(s, run.id) == []

        # Validators reject every distractor of the first item: it survives, the rest do not.
        first = items[0]
        workers = [
            Worker(source="invite", external_id=f"val-{i}", roles=["validate"]) for i in range(3)
        ]
        s.add_all(workers)
        s.flush()
        for neg_id in (n for n in first.params["negative_example_ids"] if n):
            for w in workers:
                assert w.id is not None
                s.add(Vote(example_id=neg_id, worker_id=w.id, value=False))
        s.commit()
        assert [it.id for it in surviving_items(s, run.id)] == [first.id]

    # build-dataset publishes only that surviving item: the others still wait for votes.
    out = tmp_path / "export"
    res = runner.invoke(
        app,
        ["build", "--database-url", db_url, "--out", str(out), "--only", "mc", "--with-provenance"],
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    exported = mc_records(out, "mc")
    assert [rec["answer_example_id"] for rec in exported] == [first.query_example_id]
    assert not (out / "mc_unvalidated").exists()
    # Asked for, the items validators have not cleared are written apart and say so.
    res = runner.invoke(
        app,
        [
            *("build", "--database-url", db_url, "--out", str(out), "--only", "mc"),
            *("--unvalidated-mc", "--with-provenance", "--overwrite"),
        ],
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    pending = mc_records(out, "mc_unvalidated")
    assert all(r["validated"] is False for r in pending)
    assert len(pending) <= len(items) - 1
    assert first.query_example_id not in {r["answer_example_id"] for r in pending}

    # A second identical run reuses the negatives instead of duplicating them.
    res = _match(db_url, encoder_path, "--send-negatives-to-validation")
    assert res.exit_code == 0, res.output
    with Session(engine) as s:
        again = s.exec(
            select(func.count()).select_from(Example).where(Example.origin == "adversarial")  # type: ignore[arg-type]
        ).scalar_one()  # type: ignore[call-overload]
        assert again == n_adv
        assert s.exec(select(func.count()).select_from(MatchRun)).scalar_one() == 2  # type: ignore[call-overload]

    # Validators find a distractor of the second item TRUE: the next run never uses that
    # caption on that image again (it is now known true).
    second = items[1]
    bad_i = next(i for i in range(4) if i != second.answer_index)
    bad_caption, bad_neg = second.choices[bad_i], second.params["negative_example_ids"][bad_i]
    with Session(engine) as s:
        for w in s.exec(select(Worker).where(Worker.source == "invite")).scalars():  # type: ignore[call-overload,arg-type]
            s.add(Vote(example_id=bad_neg, worker_id=w.id, value=True))
        s.commit()
    res = _match(db_url, encoder_path)
    assert res.exit_code == 0, res.output
    with Session(engine) as s:
        run3 = s.exec(select(func.max(MatchRun.id))).scalar_one()  # type: ignore[call-overload]
        # Sending the negatives to validators is the default (docs/matching.md).
        assert s.get(MatchRun, run3).params["negatives_sent"]  # type: ignore[union-attr]
        redo = s.exec(select(McItem).where(McItem.run_id == run3)).scalars().all()  # type: ignore[call-overload]
        assert second.query_example_id in {it.query_example_id for it in redo}
        query = s.get(Example, second.query_example_id)
        assert query is not None
        for it in redo:
            q = s.get(Example, it.query_example_id)
            if q is not None and q.image_id == query.image_id:
                assert bad_caption not in it.choices

    # Matching on build-dataset's own random split, as a dry run, writes nothing.
    res = _match(db_url, encoder_path, "--splits", "export", "--dry-run", "--no-remap")
    assert res.exit_code == 0, res.output
    assert "dry run" in res.output
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(MatchRun)).scalar_one() == 3  # type: ignore[call-overload]

    # A run that did not send its negatives has no validated item: mc/ stays empty, and the
    # items appear only on request, in mc_unvalidated/, which the card says are unchecked.
    res = _match(db_url, encoder_path, "--no-send-negatives-to-validation")
    assert res.exit_code == 0, res.output
    out2 = tmp_path / "export2"
    res = runner.invoke(
        app, ["build", "--database-url", db_url, "--out", str(out2), "--unvalidated-mc"]
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert not list((out2 / "mc").glob("*.jsonl"))
    assert list((out2 / "mc_unvalidated").glob("*.jsonl"))
    assert "`mc_unvalidated/` holds" in (out2 / "README.md").read_text()
    engine.dispose()


def test_bad_options_are_clear_errors(sqlite_url: str, encoder_path: Path) -> None:
    for args, msg in [
        (["--sweep", "0,abc"], "--sweep"),
        (["--k", "0"], "k (distractors"),
        (["--h", "-1"], "h must be"),
        (["--rake-rounds", "-1"], "rake_rounds must be"),
        (["--method", "magic"], "--method"),
        (["--splits", "zeroshot"], "--splits"),
        (["--workers", "-1"], "--workers"),
        (["--suite-sample", "-5"], "--suite-sample"),
        (["--fold-size", "-1"], "fold_size"),
        ([], "kept True Examples"),  # an empty database
    ]:
        res = _match(sqlite_url, encoder_path, *args)
        assert res.exit_code != 0
        assert isinstance(res.exception, CliError) and msg in str(res.exception), args


def test_models_that_cannot_be_loaded_are_clear_errors(
    sqlite_url: str, sample_file: Path, encoder_path: Path, tmp_path: Path
) -> None:
    res = runner.invoke(app, ["import-vsr", str(sample_file), "--database-url", sqlite_url, "-q"])
    assert res.exit_code == 0, res.output
    for args in (
        ["--model", str(tmp_path / "no-such-model")],
        ["--model", str(encoder_path), "--similarity", str(tmp_path / "no-nli")],
    ):
        res = runner.invoke(app, ["match", "--database-url", sqlite_url, *args])
        assert res.exit_code != 0
        assert isinstance(res.exception, CliError), repr(res.exception)
        assert "cannot load model" in str(res.exception)


def test_cli_error_is_one_line(sqlite_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vsr_cli.main", "match", "--database-url", sqlite_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "kept True" in lines[0]


def test_mc_follows_the_exported_random_split_by_default(
    db_url: str, sample_file: Path, encoder_path: Path, tmp_path: Path
) -> None:
    """`vsr match` (defaults) then `build-dataset`: no mc/test truth is in random/train, and
    every mc item sits in the random part of its query Example."""
    res = runner.invoke(app, ["import-vsr", str(sample_file), "--database-url", db_url, "-q"])
    assert res.exit_code == 0, res.output
    diag_file = tmp_path / "diag.json"
    res = _match(db_url, encoder_path, "--report", "--json", str(diag_file))
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert "STRONGEST answer-only adversary" in res.output
    assert "the items of mc_unvalidated/, not validated" in res.output
    out = tmp_path / "export"
    # Nobody has voted on the negatives yet, so the items are in mc_unvalidated/ (mc/ holds
    # only items validators cleared); they follow the same split.
    res = runner.invoke(
        app,
        [
            "build",
            "--database-url",
            db_url,
            "--out",
            str(out),
            "--only",
            "mc",
            "--only",
            "random",
            "--only",
            "stats",
            "--only",
            "card",
            "--unvalidated-mc",
            "--with-provenance",
        ],
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    # One figure: the suite recomputed here from the exported files is what stats.json, the
    # card and `vsr match --report` say.
    recomputed = _suite_from_files(out / "mc_unvalidated", encoder_path)
    stats = json.loads((out / "stats.json").read_text())["mc"]
    assert stats["measured_on"] == "mc_unvalidated"
    assert stats["adversaries"] == recomputed["adversaries"]
    assert stats["strongest_adversary"] == recomputed["strongest"]
    reported = json.loads(diag_file.read_text())["answer_only_adversaries"]
    assert reported["adversaries"] == recomputed["adversaries"]
    best = recomputed["strongest"]
    card = (out / "README.md").read_text()
    assert f"{best['name']} {best['accuracy']:.3f}" in card
    assert f"scored on the {recomputed['n_test']:,} items of mc_unvalidated/test" in card
    part_of = {
        json.loads(line)["example_id"]: p
        for p in ("train", "dev", "test")
        for line in (out / "random" / f"{p}.jsonl").read_text().splitlines()
    }
    mc: dict[str, list[int]] = {}
    for rec in mc_records(out, "mc_unvalidated"):
        mc.setdefault(rec["split"], []).append(rec["answer_example_id"])
    assert mc.get("test"), mc
    for p, ids in mc.items():
        assert {part_of[i] for i in ids} == {p}, p


def test_match_in_the_chinese_study_writes_chinese_distractors(
    db_url: str, sample_file: Path, encoder_path: Path
) -> None:
    """`vsr match --study vsr-zh`: real VSR Examples stored as the Chinese study stores them
    (Chinese caption, relation id); every choice and every negative sent to validators is a
    Chinese caption of the study's template, in the study, and the English study is untouched."""
    from sqlalchemy import update

    from tests.webapp.http.test_studies import ZH_FILE
    from vsr_core.caption_language import concept_name, grammar_of, parse, render_concepts
    from vsr_core.models import Study
    from vsr_core.studies.definition import load_study

    res = runner.invoke(app, ["import-vsr", str(sample_file), "--database-url", db_url, "-q"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["study", "create", "--file", str(ZH_FILE), "--database-url", db_url])
    assert res.exit_code == 0, res.output
    lang = load_study(ZH_FILE).default_language
    engine = make_engine(db_url)
    with Session(engine) as s:
        zh_id: int = s.exec(select(Study.id).where(Study.slug == "vsr-zh")).scalar_one()  # type: ignore[call-overload]
        examples = s.exec(select(Example).order_by(Example.id)).scalars().all()  # type: ignore[call-overload,arg-type]
        for ex in examples[: len(examples) // 2 * 2 : 2]:  # every other one moves to vsr-zh
            s.execute(
                update(Example)
                .where(Example.id == ex.id)
                .values(study_id=zh_id, caption=render_concepts(lang, ex.subj, ex.relation, ex.obj))
            )
        s.commit()

    res = _match(db_url, encoder_path, "--study", "vsr-zh", "--send-negatives-to-validation")
    assert res.exit_code == 0, res.output + repr(res.exception)
    grammar = grammar_of(lang)
    with Session(engine) as s:
        (run,) = s.exec(select(MatchRun)).scalars().all()  # type: ignore[call-overload]
        assert run.study_id == zh_id
        items = s.exec(select(McItem)).scalars().all()  # type: ignore[call-overload]
        assert len(items) > 20
        for it in items:
            query = s.get(Example, it.query_example_id)
            assert query is not None and query.study_id == zh_id
            assert it.choices[it.answer_index] == query.caption
            for i, caption in enumerate(it.choices):
                back = parse(grammar, caption)
                assert back.relation == it.relations[i]
                assert (back.subj, back.obj) == (
                    concept_name(lang, query.subj),
                    concept_name(lang, query.obj),
                )
                assert caption.endswith("。") and not any("a" <= c.lower() <= "z" for c in caption)
        negatives = s.exec(select(Example).where(Example.origin == "adversarial")).scalars().all()  # type: ignore[call-overload,arg-type]
        assert negatives and {n.study_id for n in negatives} == {zh_id}
        for n in negatives:
            assert n.caption == render_concepts(lang, n.subj, n.relation, n.obj)
        english = s.exec(select(Example).where(Example.study_id == 1)).scalars().all()  # type: ignore[call-overload,arg-type]
        assert english and all(e.caption.startswith("The ") for e in english)
    engine.dispose()
