"""Adjudication and label models in the loop, the way an admin uses them: settle one Example
from its page and many from the data browser, see every count (overview, quality, data
browser, stats.json, the card) follow, export the decision with the votes unchanged, fit
Dawid-Skene and MACE, preview a switch of keep rule and make it; on both backends, with
real VSR release records (docs/dashboard.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.admin_seed import Seeded, read_raw, seed
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from vsr_core.agreement import is_kept
from vsr_core.models import Adjudication, AuditEvent, Example, Vote

BUILD = [sys.executable, "-c", "from vsr_cli.main import build_dataset_main as m; m()"]
VSR = [sys.executable, "-c", "from vsr_cli.main import main; main()"]


@pytest.fixture(scope="module")
def records(vsr_dir: Path) -> list[dict[str, Any]]:
    # Every 40th raw record: 321 real records with ~1,000 real votes.
    return read_raw(vsr_dir, every=40)


@pytest.fixture
def seeded(engine: Engine, records: list[dict[str, Any]]) -> Seeded:
    return seed(engine, records)


@pytest.fixture
def dash(db_url: str, engine: Engine, tmp_path: Path, seeded: Seeded) -> tuple[TestClient, str]:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    return client, login(client)


def _json(client: TestClient, url: str) -> dict[str, Any]:
    r = client.get(url)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _counts(client: TestClient) -> dict[str, int]:
    o = _json(client, "/admin/api/overview.json")
    q = _json(client, "/admin/api/quality.json")
    keys = ("kept", "rejected", "excluded", "adjudicated")
    assert {k: q[k] for k in keys} == {k: o[k] for k in keys}, "overview and quality disagree"
    return {k: int(o[k]) for k in (*keys, "examples", "by_model")}


def _by_votes(seeded: Seeded) -> tuple[list[int], list[int]]:
    """(kept, rejected) Example ids by the VSR rule on their real votes."""
    kept: list[int] = []
    rejected: list[int] = []
    for eid, rec in zip(seeded.example_ids, seeded.records, strict=True):
        votes = [True] * len(rec["vote_true_validator_id"]) + [False] * len(
            rec["vote_false_validator_id"]
        )
        if votes:
            (kept if is_kept(bool(rec["label"]), votes) else rejected).append(eid)
    return kept, rejected


def _settle(
    client: TestClient, token: str, eid: int, decision: str, reason: str = "checked the photo"
) -> Any:
    return client.post(
        f"/admin/examples/{eid}/adjudicate",
        data={"csrf_token": token, "decision": decision, "reason": reason},
        follow_redirects=False,
    )


def _build(db_url: str, out: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [*BUILD, "--out", str(out), "--database-url", db_url, "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "stats.json").read_text())  # type: ignore[no-any-return]


def _jsonl(path: Path) -> dict[int, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {int(r["example_id"]): r for r in rows}


def test_settle_one_example_from_its_page(
    dash: tuple[TestClient, str], engine: Engine, seeded: Seeded
) -> None:
    client, token = dash
    kept, rejected = _by_votes(seeded)
    before = _counts(client)
    assert (before["kept"], before["rejected"], before["adjudicated"]) == (
        len(kept),
        len(rejected),
        0,
    )
    eid = rejected[0]

    # A reason is required, and has a length limit: a 400 in plain words, nothing written.
    for reason, words in (("", "reason"), ("  ", "reason"), ("x" * 501, "too long")):
        r = _settle(client, token, eid, "true", reason)
        assert r.status_code == 400 and words in r.text, r.text
    assert _settle(client, token, eid, "maybe").status_code == 422
    with Session(engine) as s:
        assert s.exec(select(Adjudication)).all() == []
        assert s.exec(select(AuditEvent).where(AuditEvent.kind == "adjudicate")).all() == []

    r = _settle(client, token, eid, "true", "the cup is plainly on the table")
    assert r.status_code == 303, r.text
    page = client.get(f"/admin/examples/{eid}")
    assert "final label True" in page.text and "the cup is plainly on the table" in page.text
    after = _counts(client)
    assert (after["kept"], after["rejected"], after["adjudicated"]) == (
        before["kept"] + 1,
        before["rejected"] - 1,
        1,
    )
    with Session(engine) as s:
        row = s.get(Adjudication, eid)
        assert row is not None and (row.decision, row.admin_name) == ("true", "alice")
        ex = s.get(Example, eid)
        assert ex is not None and ex.queue_open is False  # the queue stops asking
        (event,) = s.exec(select(AuditEvent).where(AuditEvent.kind == "adjudicate")).all()
        assert event.target == f"example {eid}" and event.actor == "alice"
        assert event.change == {
            "before": None,
            "after": {"decision": "true"},
            "reason": "the cup is plainly on the table",
        }
    # Re-queueing a settled Example is refused: votes no longer decide it.
    rq = client.post(
        f"/admin/examples/{eid}/requeue", data={"csrf_token": token}, follow_redirects=False
    )
    assert rq.status_code == 409 and "adjudicated" in rq.text

    # Excluding a kept one: neither kept nor rejected any more.
    assert (
        _settle(client, token, kept[0], "excluded", "a duplicate of another caption").status_code
        == 303
    )
    now = _counts(client)
    assert (now["kept"], now["rejected"], now["excluded"], now["adjudicated"]) == (
        before["kept"],
        before["rejected"] - 1,
        1,
        2,
    )
    data = client.get("/admin/data?agreement=adjudicated")
    assert "2 matching Examples" in data.text
    # Withdrawn: its votes decide again, and the trail holds the whole history.
    assert _settle(client, token, eid, "withdraw", "asked the writer: not sure").status_code == 303
    final = _counts(client)
    assert (final["kept"], final["rejected"], final["adjudicated"]) == (
        before["kept"] - 1,
        before["rejected"],
        1,
    )
    with Session(engine) as s:
        assert s.get(Adjudication, eid) is None
        events = s.exec(
            select(AuditEvent).where(AuditEvent.kind == "adjudicate").order_by(col(AuditEvent.id))
        ).all()
        assert [e.change["after"] for e in events] == [
            {"decision": "true"},
            {"decision": "excluded"},
            None,
        ]
        assert events[-1].change["before"] == {
            "decision": "true",
            "reason": "the cup is plainly on the table",
        }


def test_bulk_from_the_data_browser(
    dash: tuple[TestClient, str], engine: Engine, seeded: Seeded
) -> None:
    client, token = dash
    kept, rejected = _by_votes(seeded)
    before = _counts(client)
    ticked = rejected[:3]
    r = client.post(
        "/admin/data/adjudicate",
        data={
            "csrf_token": token,
            "scope": "ids",
            "ids": [str(i) for i in ticked],
            "decision": "excluded",
            "reason": "ambiguous photo",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    mid = _counts(client)
    assert (mid["rejected"], mid["excluded"], mid["adjudicated"]) == (
        before["rejected"] - 3,
        3,
        3,
    )
    # Everything matching a filter: the count the admin confirmed must still hold.
    with Session(engine) as s:
        relation = s.exec(select(Example.relation).where(col(Example.id) == kept[0])).one()
        same = s.exec(select(Example).where(Example.relation == relation)).all()
        matching = [int(e.id or 0) for e in same]
    page = client.get(f"/admin/data?relation={relation}")
    assert f"Settle all {len(matching)} matching this filter" in page.text
    form = {
        "csrf_token": token,
        "scope": "filter",
        "relation": relation,
        "decision": "false",
        "reason": "this relation was misread by the writers",
    }
    wrong = client.post("/admin/data/adjudicate", data=form | {"expected": str(len(matching) + 1)})
    assert wrong.status_code == 409 and "nothing was settled" in wrong.text
    assert _counts(client) == mid
    ok = client.post(
        "/admin/data/adjudicate",
        data=form | {"expected": str(len(matching))},
        follow_redirects=False,
    )
    assert ok.status_code == 303, ok.text
    with Session(engine) as s:
        settled = {a.example_id: a.decision for a in s.exec(select(Adjudication)).all()}
        n_events = len(s.exec(select(AuditEvent).where(AuditEvent.kind == "adjudicate")).all())
    assert all(settled[i] == "false" for i in matching if i not in ticked)
    assert n_events == 3 + len([i for i in matching if i not in ticked])
    assert _counts(client)["adjudicated"] == len(settled)
    # A tick of nothing, or a non-number, is a plain 400.
    bads: list[dict[str, list[str]]] = [{"ids": []}, {"ids": ["x1"]}]
    for bad in bads:
        r = client.post(
            "/admin/data/adjudicate",
            data={"csrf_token": token, "scope": "ids", "decision": "true", "reason": "why"} | bad,
        )
        assert r.status_code == 400, r.text


def test_an_example_of_another_study_is_refused(
    dash: tuple[TestClient, str], engine: Engine, seeded: Seeded
) -> None:
    from tests.webapp.http.test_studies import ZH_FILE
    from vsr_core.studies.store import create_study

    client, token = dash
    with Session(engine) as s:
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        s.commit()
        first = s.get(Example, seeded.example_ids[0])
        assert first is not None
        other = Example(
            **first.model_dump(exclude={"id", "source_key", "study_id"}), study_id=int(zh.id or 0)
        )
        s.add(other)
        s.commit()
        other_id = other.id
    r = _settle(client, token, other_id, "true")  # type: ignore[arg-type]
    assert r.status_code == 404 and "vsr-zh" in r.text
    bulk = client.post(
        "/admin/data/adjudicate",
        data={
            "csrf_token": token,
            "scope": "ids",
            "ids": [str(seeded.example_ids[1]), str(other_id)],
            "decision": "true",
            "reason": "checked",
        },
    )
    assert bulk.status_code == 404 and "nothing was settled" in bulk.text
    with Session(engine) as s:
        assert s.exec(select(Adjudication)).all() == []
        assert s.exec(select(AuditEvent).where(AuditEvent.kind == "adjudicate")).all() == []


def test_export_carries_the_adjudication_and_the_votes_unchanged(
    dash: tuple[TestClient, str], engine: Engine, seeded: Seeded, db_url: str, tmp_path: Path
) -> None:
    client, token = dash
    kept, rejected = _by_votes(seeded)
    plain = _build(db_url, tmp_path / "before")
    raw_before = _jsonl(tmp_path / "before" / "all_raw.jsonl")
    flipped, dropped = rejected[0], kept[0]
    writer_label = raw_before[flipped]["label"]
    decision = "false" if writer_label else "true"
    assert (
        _settle(client, token, flipped, decision, "the writer picked the wrong image").status_code
        == 303
    )
    assert (
        _settle(client, token, dropped, "excluded", "a person is identifiable").status_code == 303
    )
    stats = _build(db_url, tmp_path / "after")
    raw = _jsonl(tmp_path / "after" / "all_raw.jsonl")
    validated = _jsonl(tmp_path / "after" / "all_validated.jsonl")
    overview = _counts(client)
    # stats.json counts as the dashboard does, and says how many were adjudicated.
    assert stats["n_validated"] == overview["kept"] == plain["n_validated"]
    assert (stats["n_adjudicated"], stats["n_excluded"]) == (2, 1)
    assert stats["adjudications"] == {decision: 1, "excluded": 1}
    card = (tmp_path / "after" / "README.md").read_text()
    assert "2 Examples were adjudicated" in card and "1 excluded" in card
    assert "No Example was adjudicated" in (tmp_path / "before" / "README.md").read_text()
    # The record: the final label, the settlement, and the very same votes.
    rec = raw[flipped]
    assert rec["label"] == int(decision == "true") != writer_label
    assert rec["adjudication"]["decision"] == decision
    assert rec["adjudication"]["reason"] == "the writer picked the wrong image"
    assert rec["adjudication"]["by"] == "alice" and rec["adjudication"]["at"]
    assert rec["adjudication"]["label_before"] == writer_label
    assert rec["verdict"] == "kept" and rec["decided_by"] == "adjudication"
    for eid in raw:
        for key in ("vote_true_validator_id", "vote_false_validator_id", "votes"):
            assert raw[eid].get(key) == raw_before[eid].get(key), (eid, key)
    assert flipped in validated and dropped not in validated
    assert raw[dropped]["verdict"] == "excluded"
    for split in ("random", "zeroshot"):
        for part in ("train", "dev", "test"):
            ids = _jsonl(tmp_path / "after" / split / f"{part}.jsonl")
            assert dropped not in ids
    untouched = next(i for i in kept[1:] if raw[i]["adjudication"] is None)
    assert raw[untouched]["decided_by"] == "agreement"


def _preview(html: str) -> dict[str, dict[str, int]]:
    out = {}
    for rule, row in re.findall(r'<tr data-rule="([a-z-]+)">(.*?)</tr>', html, re.S):
        nums = [int(n) for n in re.findall(r'<td class="n[^"]*">(\d+)</td>', row)]
        out[rule] = dict(zip(("kept_now", "kept_after", "k2r", "r2k"), nums, strict=True))
    return out


def test_keep_rule_switch_follows_its_preview_everywhere(
    dash: tuple[TestClient, str], engine: Engine, seeded: Seeded, db_url: str, tmp_path: Path
) -> None:
    client, token = dash
    _, rejected = _by_votes(seeded)
    # One adjudication: it outranks every keep rule, so it never flips.
    assert _settle(client, token, rejected[0], "true", "checked the photo").status_code == 303
    settings = client.get("/admin/settings")
    assert "never" in settings.text and "not fitted" in settings.text
    fit = client.post("/admin/label-models/fit", data={"csrf_token": token}, follow_redirects=False)
    assert fit.status_code == 303, fit.text
    with Session(engine) as s:
        (fitted,) = s.exec(select(AuditEvent).where(AuditEvent.kind == "label_fit")).all()
        assert fitted.actor == "alice" and fitted.target == "dawid-skene, mace"
    settings = client.get("/admin/settings")
    preview = _preview(settings.text)
    assert set(preview) == {"dawid-skene", "mace"}
    before = _counts(client)
    assert before["by_model"] == 0
    ds = preview["dawid-skene"]
    assert ds["k2r"] + ds["r2k"] > 0, "the sample must hold Examples the model decides otherwise"
    assert ds["kept_now"] == before["kept"]
    assert ds["kept_after"] == ds["kept_now"] - ds["k2r"] + ds["r2k"]
    # The worker page shows each model's estimate next to gold accuracy.
    workers = _json(client, "/admin/api/workers.json")["workers"]
    rated = [w for w in workers if w["votes"]]
    assert rated and all(set(w["model_skill"]) == {"dawid-skene", "mace"} for w in rated)
    assert all(0.0 <= v <= 1.0 for w in rated for v in w["model_skill"].values())
    assert "D-S accuracy" in client.get("/admin/workers").text

    r = client.post(
        "/admin/settings",
        data={"csrf_token": token, "keep_rule": "dawid-skene"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    after = _counts(client)
    assert after["kept"] == ds["kept_after"]
    assert after["rejected"] == before["rejected"] + ds["k2r"] - ds["r2k"]
    assert after["adjudicated"] == 1 and after["by_model"] == after["examples"] - 1
    # The data browser lists exactly the Examples that flipped (against the old rule).
    flips = client.get("/admin/data?flips=agreement")
    assert f"{ds['k2r'] + ds['r2k']} matching Examples" in flips.text
    # ... and the export keeps the same ones.
    stats = _build(db_url, tmp_path / "ds")
    assert stats["keep_rule"] == "dawid-skene"
    assert stats["n_validated"] == after["kept"]
    assert stats["n_decided_by_label_model"] == after["by_model"]
    assert "Dawid-Skene label model" in (tmp_path / "ds" / "README.md").read_text()
    # Back from the model, the preview of returning is the mirror image.
    back = _preview(client.get("/admin/settings").text)["agreement"]
    assert (back["k2r"], back["r2k"]) == (ds["r2k"], ds["k2r"])

    # A new vote makes the fit stale, and the pages say so.
    with Session(engine) as s:
        ex_id = seeded.example_ids[5]
        voted = {v.worker_id for v in s.exec(select(Vote).where(Vote.example_id == ex_id))}
        other = next(w for w in seeded.worker_ids.values() if w not in voted)
        s.add(Vote(example_id=ex_id, worker_id=other, value=True))
        s.commit()
    assert "stale: 1 votes since" in client.get("/admin/settings").text
    assert _json(client, "/admin/api/overview.json")["fit"]["new_votes"] == 1


def test_label_models_cli_fits_and_previews(db_url: str, engine: Engine, seeded: Seeded) -> None:
    fit = subprocess.run(
        [*VSR, "label-models", "fit", "--database-url", db_url],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert fit.returncode == 0, fit.stderr
    assert "dawid-skene: labelled" in fit.stdout and "mace: labelled" in fit.stdout
    with Session(engine) as s:
        (fitted,) = s.exec(select(AuditEvent).where(AuditEvent.kind == "label_fit")).all()
        assert fitted.via == "cli" and fitted.actor.startswith("cli:")
    shown = subprocess.run(
        [*VSR, "label-models", "preview", "--json", "--database-url", db_url],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert shown.returncode == 0, shown.stderr
    preview = json.loads(shown.stdout)["preview"]
    kept, _ = _by_votes(seeded)
    assert preview["mace"]["kept_now"] == len(kept)
    bad = subprocess.run(
        [*VSR, "label-models", "fit", "--model", "oracle", "--database-url", db_url],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.returncode != 0 and len(lines) == 1 and "oracle" in lines[0], bad.stderr


def test_parallel_adjudications_of_one_example_answer_without_5xx(
    dash: tuple[TestClient, str], engine: Engine, seeded: Seeded
) -> None:
    """Eight admins' tabs settle one Example at the same instant, each its own way: every
    request is answered (303, no 5xx), one settlement stands, and it is the last one the
    audit trail records."""
    import threading

    client, token = dash
    eid = seeded.example_ids[0]
    decisions = ["true", "false", "excluded"]
    barrier = threading.Barrier(8)
    codes: list[int] = []

    def tab(i: int) -> None:
        mine = TestClient(client.app)
        mine.cookies.update(client.cookies)
        barrier.wait()
        r = _settle(mine, token, eid, decisions[i % 3], f"looked again, tab {i}")
        codes.append(r.status_code)

    tabs = [threading.Thread(target=tab, args=(i,)) for i in range(8)]
    for t in tabs:
        t.start()
    for t in tabs:
        t.join(60)
    assert sorted(codes) == [303] * 8, codes
    with Session(engine) as s:
        (row,) = s.exec(select(Adjudication).where(Adjudication.example_id == eid)).all()
        trail = s.exec(
            select(AuditEvent).where(AuditEvent.kind == "adjudicate").order_by(col(AuditEvent.id))
        ).all()
    assert trail and trail[-1].change["reason"] == row.reason
    assert trail[-1].change["after"] == {"decision": row.decision}
