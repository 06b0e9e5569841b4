"""The audit trail as admins meet it (docs/dashboard.md, "Audit trail"): every action done
through the dashboard or the `vsr` command leaves its record (actor, study, target, what
changed); nothing can change a record; /admin/audit filters and pages it by id; it exports
to JSONL over HTTP and at the CLI. Both backends."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, select

from tests.support.admins import create_owner
from tests.support.audit_session import CLI_ACTOR, Context, run
from tests.support.fake_prolific import TOKEN, State, running
from tests.webapp.admin.test_admin import PASSWORD, _walk, login, make_admin_app
from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    AdminRole,
    AdminUser,
    AuditEvent,
    AuditKind,
    StudyRoleGrant,
)
from vsr_core.studies.store import create_study
from webapp.admin.auth import create_admin

ZH_FILE = Path(__file__).resolve().parents[3] / "studies" / "vsr-zh.toml"
VSR_BIN = Path(sys.executable).parent / "vsr"
# `vsr match` loads the matching models: its record is checked by tests/vsr_cli/
# test_first_use_round2.py, where the command is run anyway.
# Recorded and checked by their own tests: exports and downloads
# (tests/webapp/admin/test_exports_recorded.py), CLI tokens (tests/vsr_cli/test_admin_roles.py),
# a reviewed worker's approval (tests/webapp/admin/test_authenticity.py), an owner's
# override of a measured duration (tests/webapp/platforms/test_drafts.py and
# tests/vsr_cli/test_platform.py: it needs five measured workers).
NOT_IN_SESSION = {
    AuditKind.platform_override,
    AuditKind.authenticity_approve,
    AuditKind.match_run,
    AuditKind.dataset_export,
    AuditKind.download,
    AuditKind.token_create,
    AuditKind.token_revoke,
}


def _subset(want: Any, got: Any) -> bool:
    """``want`` is ``got`` or, for dicts, every key of ``want`` is in ``got`` with a
    matching value."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(
            k in got and _subset(v, got[k]) for k, v in want.items()
        )
    return bool(want == got)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, State]]:
    with running() as (url, state):
        monkeypatch.setenv("PROLIFIC_API_TOKEN", TOKEN)
        monkeypatch.setenv("PROLIFIC_BASE_URL", url)
        yield url, state


def test_every_action_leaves_its_record(
    db_url: str,
    engine: Engine,
    tmp_path: Path,
    coco_dir: Path,
    vsr_dir: Path,
    fake: tuple[str, State],
) -> None:
    url, state = fake
    ctx = Context(db_url, engine, tmp_path, coco_dir, vsr_dir, url, TOKEN, state)
    expected = run(ctx)
    got = list(audit.stream(engine))
    with Session(engine) as s:
        alice = s.exec(select(AdminUser).where(AdminUser.username == "alice")).one()
    lines = [f"{r['kind']} {r['actor']} {r['study_id']} {r['target']}" for r in got]
    assert len(got) == len(expected), "\n".join(lines)
    for want, row in zip(expected, got, strict=True):
        where = f"{want.kind.value} (record #{row['id']}: {row})"
        assert row["kind"] == want.kind.value, where
        assert row["actor"] == want.actor, where
        assert row["study_id"] == want.study_id, where
        assert row["target"] == want.target, where
        assert row["via"] == want.via, where
        assert _subset(want.change, row["change"]), f"{where}\nwanted {want.change}"
        # The account acting, by id as well as by name; a failed login and the machine's
        # operator have none.
        named = want.actor == "alice"
        assert row["actor_id"] == (alice.id if named else None), where
    assert {e.kind for e in expected} == set(AuditKind) - NOT_IN_SESSION
    assert {e.via for e in expected} == {"dashboard", "cli"}
    assert any(e.actor == CLI_ACTOR for e in expected)
    # The CLI export wrote the trail as it stood, the export's own record last.
    exported = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in exported] == got[: len(exported)]
    assert json.loads(exported[-1])["kind"] == "audit_export"


def test_a_refused_action_leaves_no_record(db_url: str, engine: Engine, tmp_path: Path) -> None:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    token = login(client)
    before = len(list(audit.stream(engine)))
    r = client.post("/admin/settings", data={"csrf_token": token, "votes_per_example": "0"})
    assert r.status_code == 422  # nothing saved: nothing recorded
    r = client.post("/admin/workers/999999/block", data={"csrf_token": token})
    assert r.status_code == 404
    r = client.post("/admin/settings", data={"votes_per_example": "4"})  # no CSRF token
    assert r.status_code == 403
    assert len(list(audit.stream(engine))) == before


# --- nothing changes a record ---------------------------------------------------------------


def test_no_route_changes_a_record(db_url: str, engine: Engine, tmp_path: Path) -> None:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    app = make_admin_app(db_url, engine, tmp_path)
    client = TestClient(app)
    token = login(client)
    # Every route of the app that names the trail only reads it.
    audit_routes = {p: m for p, m in _walk(app.router) if "audit" in p}
    assert audit_routes == {"/admin/audit": {"GET"}, "/admin/audit.jsonl": {"GET"}}
    trail = list(audit.stream(engine))  # the owner's grant, then the login
    login_row = trail[-1]
    assert login_row["kind"] == "login"
    for path in ("/admin/audit", "/admin/audit.jsonl", f"/admin/audit/{login_row['id']}"):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            r = client.request(method, path, data={"csrf_token": token})
            assert r.status_code in (404, 405), (method, path, r.status_code)
    page = client.get("/admin/audit?scope=all").text
    assert f'data-id="{login_row["id"]}"' in page
    # The page offers filters and an export, never a form that writes.
    assert re.findall(r'<form[^>]*method="(\w+)"[^>]*id="audit-filters"', page) == ["get"]
    body = page.split('<table class="grid audit">', 1)[1].split("</table>", 1)[0]
    assert "<form" not in body and "<button" not in body
    assert list(audit.stream(engine)) == trail


def test_no_code_updates_or_deletes_a_record() -> None:
    """No module of the app or the CLI writes an UPDATE or DELETE of the trail (the database
    refuses them anyway; this names the code that would try)."""
    root = Path(__file__).resolve().parents[3]
    pattern = re.compile(
        r"(AUDIT_EVENT\.(update|delete)\b|(update|delete)\(\s*(AUDIT_EVENT|AuditEvent)\b"
        r"|(UPDATE|DELETE\s+FROM|TRUNCATE)\s+\"?auditevent)",
        re.IGNORECASE,
    )
    offenders = [
        f"{path.relative_to(root)}: {m[0]}"
        for package in ("vsr_core", "webapp", "vsr_cli", "collection", "vsr_dataset", "matching")
        for path in sorted((root / package).rglob("*.py"))
        for m in pattern.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_orm_cannot_change_or_remove_a_record(engine: Engine) -> None:
    with Session(engine) as s:
        event = audit.record(
            s, Actor("alice", None), AuditKind.worker_block, study_id=1, target="worker 1"
        )
        s.commit()
        event_id = event.id
    with Session(engine) as s:
        row = s.get(AuditEvent, event_id)
        assert row is not None
        row.actor = "mallory"
        s.add(row)
        with pytest.raises(DBAPIError, match="append-only"):
            s.commit()
    with Session(engine) as s:
        row = s.get(AuditEvent, event_id)
        assert row is not None
        s.delete(row)
        with pytest.raises(DBAPIError, match="append-only"):
            s.commit()
    (kept,) = list(audit.stream(engine))
    assert kept["actor"] == "alice" and kept["target"] == "worker 1"


# --- the page: filters and pages ------------------------------------------------------------

DAY = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _trail(engine: Engine) -> dict[str, int]:
    """130 records: alice (owner of the default study, viewer of vsr-zh) and bob act in
    both studies over three days, plus logins (no study) and one study nobody granted."""
    with Session(engine) as s:
        alice = create_admin(s, "alice", PASSWORD)
        bob = create_admin(s, "bob", "bob's long password 1")
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        third = create_study(
            s,
            ZH_FILE.read_text(encoding="utf-8").replace('slug = "vsr-zh"', 'slug = "vsr-other"'),
            "other.toml",
        )
        s.add(StudyRoleGrant(admin_id=alice.id or 0, study_id=1, role=AdminRole.owner))
        s.add(StudyRoleGrant(admin_id=alice.id or 0, study_id=zh.id or 0, role=AdminRole.viewer))
        s.add(StudyRoleGrant(admin_id=bob.id or 0, study_id=zh.id or 0, role=AdminRole.viewer))
        s.commit()
        ids = {"alice": alice.id or 0, "bob": bob.id or 0, "zh": zh.id or 0, "other": third.id or 0}
    kinds = [AuditKind.worker_block, AuditKind.gold_mark, AuditKind.settings_change]
    with Session(engine) as s:
        for i in range(120):
            who = ("alice", "bob")[i % 2]
            event = audit.record(
                s,
                Actor(who, ids[who]),
                kinds[i % 3],
                study_id=(1, ids["zh"])[(i // 2) % 2],
                target=f"thing {i}",
                change=audit.changed({"votes_per_example": i}, {"votes_per_example": i + 1}),
            )
            event.at = DAY + timedelta(days=i // 40, minutes=i)
        for i in range(8):
            event = audit.record(
                s, Actor("alice", ids["alice"]), AuditKind.login, study_id=None, target="alice"
            )
            event.at = DAY + timedelta(minutes=i)
        for _ in range(2):
            event = audit.record(
                s, Actor("carol", None), AuditKind.study_update, study_id=ids["other"], target="x"
            )
            event.at = DAY
        s.commit()
    return ids


def _ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-kind="\w+" data-id="(\d+)"', page)]


def _all_pages(client: TestClient, url: str) -> list[int]:
    """Follow the "older" links to the end; every id on the way, in order."""
    seen: list[int] = []
    while True:
        page = client.get(url)
        assert page.status_code == 200, page.text
        seen += _ids(page.text)
        older = re.search(r'href="(/admin/audit\?[^"]*before=\d+[^"]*)" rel="next"', page.text)
        if older is None:
            return seen
        url = older[1].replace("&amp;", "&")


def _expected(engine: Engine, keep: Any) -> list[int]:
    return sorted((r["id"] for r in audit.stream(engine) if keep(r)), reverse=True)


def test_page_filters_and_keyset_pages(db_url: str, engine: Engine, tmp_path: Path) -> None:
    ids = _trail(engine)
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(client)  # one more record: alice's login (no study)
    # The chosen study only, newest first, 50 a page, to the end by id.
    default = _all_pages(client, "/admin/audit")
    assert default == _expected(engine, lambda r: r["study_id"] == DEFAULT_STUDY_ID)
    assert len(default) == 60 and len(set(default)) == 60
    first = client.get("/admin/audit").text
    assert len(_ids(first)) == 50 and "older →" in first and "← newest" not in first
    # Each record's change, readable: before -> after.
    newest = _expected(engine, lambda r: r["study_id"] == DEFAULT_STUDY_ID)[0]
    (row,) = [r for r in audit.stream(engine) if r["id"] == newest]
    n = row["change"]["before"]["votes_per_example"]
    assert f"votes_per_example: {n} → {n + 1}" in first
    # The switcher's study is the default filter.
    zh_page = _all_pages(client, "/admin/audit?study=vsr-zh")
    assert zh_page == _expected(engine, lambda r: r["study_id"] == ids["zh"])
    client.get("/admin/audit?study=default")  # back to the default study
    # All studies alice can see: hers (owner, viewer) and, as an owner, those of no
    # study; never the study she holds no role in.
    everything = _all_pages(client, "/admin/audit?scope=all")
    assert everything == _expected(engine, lambda r: r["study_id"] != ids["other"])
    # Actor, kind, time.
    bob = _all_pages(client, "/admin/audit?scope=all&actor=bob&kind=gold_mark")
    assert (
        bob == _expected(engine, lambda r: r["actor"] == "bob" and r["kind"] == "gold_mark") and bob
    )
    day2 = _all_pages(client, "/admin/audit?scope=all&since=2026-03-02&until=2026-03-02")
    assert day2 == _expected(
        engine,
        lambda r: r["study_id"] != ids["other"] and r["at"].startswith("2026-03-02"),
    )
    assert len(day2) == 40
    later = _all_pages(client, "/admin/audit?scope=all&since=2026-03-03&kind=worker_block")
    assert (
        later
        == _expected(
            engine,
            lambda r: r["kind"] == "worker_block" and r["at"] >= "2026-03-03",
        )
        and later
    )
    # Filters travel with the "older" link.
    assert _all_pages(client, "/admin/audit?scope=all&actor=alice") == _expected(
        engine, lambda r: r["actor"] == "alice" and r["study_id"] != ids["other"]
    )
    # Bad filters: a plain 4xx, in words.
    for query, words in (
        ("since=2026-02-30", "not a date"),
        ("since=2026-03-02&until=2026-03-01", "before"),
        ("kind=drop_table", ""),
        ("before=0", ""),
        ("actor=" + "x" * 129, ""),
    ):
        r = client.get(f"/admin/audit?{query}")
        assert r.status_code == 422, query
        assert words in r.text
    # bob, a viewer of vsr-zh only: no records of no study (logins), nor the default
    # study's unless it is the study he chose.
    other = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(other, "bob", "bob's long password 1")
    seen = _all_pages(other, "/admin/audit?scope=all&study=vsr-zh")
    assert seen == _expected(engine, lambda r: r["study_id"] == ids["zh"])


# --- the export ------------------------------------------------------------------------------


def test_jsonl_export_over_http(db_url: str, engine: Engine, tmp_path: Path) -> None:
    ids = _trail(engine)
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(client)
    r = client.get("/admin/audit.jsonl?scope=all&actor=bob&since=2026-03-02")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-ndjson")
    assert 'filename="audit-all.jsonl"' in r.headers["content-disposition"]
    rows = [json.loads(line) for line in r.text.splitlines()]
    assert [x["id"] for x in rows] == sorted(
        x["id"]
        for x in audit.stream(engine)
        if x["actor"] == "bob" and x["at"] >= "2026-03-02" and x["kind"] != "audit_export"
    )
    assert set(rows[0]) == {
        "id",
        "at",
        "actor",
        "actor_id",
        "via",
        "os_login",
        "study_id",
        "kind",
        "target",
        "change",
    }
    # The export is itself recorded, with its filters (before the first line was read).
    (export,) = [x for x in audit.stream(engine) if x["kind"] == "audit_export"]
    assert export["actor"] == "alice" and export["study_id"] is None
    assert export["change"]["filters"]["actor"] == "bob"
    assert export["change"]["filters"]["since"].startswith("2026-03-02")
    # The chosen study by default.
    default = [json.loads(line) for line in client.get("/admin/audit.jsonl").text.splitlines()]
    assert {x["study_id"] for x in default} == {DEFAULT_STUDY_ID}
    assert ids["zh"] not in {x["study_id"] for x in default}
    assert client.get("/admin/audit.jsonl?kind=nope").status_code == 422
    anonymous = TestClient(make_admin_app(db_url, engine, tmp_path))
    assert anonymous.get("/admin/audit.jsonl").status_code == 403


def _vsr(db_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    full.pop("VSR_DEBUG", None)
    full.pop("VSR_ADMIN", None)
    full["VSR_ADMIN_SECRET"] = PASSWORD  # proves VSR_ADMIN when a call names one
    full.update(env)
    return subprocess.run(
        [str(VSR_BIN), "admin", "audit-export", *args, "--database-url", db_url],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


def test_jsonl_export_at_the_cli(db_url: str, engine: Engine, tmp_path: Path) -> None:
    ids = _trail(engine)
    done = _vsr(db_url, "--study", "vsr-zh", "--actor", "alice", "--kind", "gold_mark")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows and [x["id"] for x in rows] == [
        x["id"]
        for x in audit.stream(engine)
        if x["study_id"] == ids["zh"] and x["actor"] == "alice" and x["kind"] == "gold_mark"
    ]
    out = tmp_path / "trail.jsonl"
    done = _vsr(db_url, "--since", "2026-03-03", "--out", str(out), VSR_ADMIN="alice")
    assert done.returncode == 0, done.stderr
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [x["id"] for x in written] == [
        x["id"] for x in audit.stream(engine) if x["at"] >= "2026-03-03"
    ]
    assert written[-1]["kind"] == "audit_export" and written[-1]["actor"] == "alice"
    assert f"{len(written)} audit records written to {out}" in done.stderr
    assert not out.with_name(out.name + ".part").exists()
    exports = [x for x in audit.stream(engine) if x["kind"] == "audit_export"]
    assert [(x["actor"], x["via"], x["target"]) for x in exports] == [
        (CLI_ACTOR, "cli", "stdout"),
        ("alice", "cli", str(out)),
    ]
    # Bad input: one line, a non-zero exit, nothing recorded.
    for args, words in (
        (["--kind", "drop_table"], "--kind takes one of"),
        (["--since", "yesterday"], "--since takes a date"),
        (["--study", "nope"], "nope"),
        (["--out", str(tmp_path / "no" / "such" / "dir.jsonl")], "does not exist"),
    ):
        bad = _vsr(db_url, *args)
        assert bad.returncode != 0 and words in bad.stderr, (args, bad.stderr)
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    bad = _vsr(db_url, "--study", "vsr-other", VSR_ADMIN="alice")  # no role there
    assert bad.returncode == 1 and "has no role" in bad.stderr
    assert len([x for x in audit.stream(engine) if x["kind"] == "audit_export"]) == 2
