"""Pass rates of the qualification check on the dashboard (quality page, its JSON, the
workers table's marker) and who passed in the export (`build-dataset`'s qualification.csv,
listed in the card), after three workers walked the check over HTTP, both backends."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.admins import create_owner
from tests.support.data_dictionary import check_export
from tests.support.qualification import PREFIX, known_answers, make_study, try_check
from tests.support.webapp_coco import client_for, form_field
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from vsr_core.models import Worker
from vsr_dataset.export_rows import worker_export_ids


@pytest.fixture
def walked(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> Any:
    """p1 passes at once, p2 at the second try, p3 fails both; p4 failed once so far."""
    with Session(engine) as s:
        study = make_study(s, coco_dir)
        known = known_answers(s, study)
        create_owner(s, "alice", PASSWORD)
    app = make_admin_app(db_url, engine, tmp_path, image_root=coco_dir / "images")
    for pid, tries in (
        ("p1", [True]),
        ("p2", [False, True]),
        ("p3", [False, False]),
        ("p4", [False]),
    ):
        client = client_for(app)
        client.get(f"{PREFIX}/start/generate?PROLIFIC_PID={pid}&SESSION_ID=s{pid}")
        csrf = form_field(client.get(f"{PREFIX}/consent/generate").text, "csrf")
        client.post(f"{PREFIX}/consent/generate", data={"decision": "agree", "csrf": csrf})
        for right in tries:
            try_check(client, "generate", known, right)
    return app


def test_pass_rates_on_the_quality_page_and_markers_in_the_workers_table(
    walked: Any, engine: Engine
) -> None:
    client = TestClient(walked)
    login(client)
    q = client.get("/admin/api/quality.json?study=lab").json()
    by_kind = {r["kind"]: r for r in q["qualification"]}
    assert by_kind["generate"] == {
        "kind": "generate",
        "required": True,
        "attempts": 6,
        "workers": 4,
        "passed": 2,
        "failed": 1,
        "pending": 1,
        "pass_rate": pytest.approx(2 / 3),
        "first_try": 1,
    }
    # The validation check exists in the file; nobody took it yet.
    assert by_kind["validate"]["attempts"] == 0 and by_kind["validate"]["pass_rate"] is None
    page = client.get("/admin/quality?study=lab").text
    assert 'id="qualification"' in page and '<td class="n pass-rate">66.7%</td>' in page
    # Every one of them is a member of the study (a try is taking part), with a marker.
    workers = client.get("/admin/workers?study=lab").text
    with Session(engine) as s:
        ids = {w.external_id: w.id for w in s.exec(select(Worker))}
    marks = {
        "p1": "generate ✓",
        "p2": "generate ✓",
        "p3": "generate ✗",
        "p4": "generate …",
    }
    for pid, mark in marks.items():
        row = workers.split(f'data-worker="{ids[pid]}"', 1)[1].split("</tr>", 1)[0]
        assert mark in row, (pid, row)
    # The default study has no check: an empty table that says so.
    assert "asks for no qualification check" in client.get("/admin/quality?study=vsr").text


def test_export_records_who_passed(
    walked: Any, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    out = tmp_path / "export"
    r = subprocess.run(
        [
            str(Path(sys.executable).parent / "build-dataset"),
            "--study",
            "lab",
            "--out",
            str(out),
            # Nothing is validated in this walk: the full build refuses (no empty splits), the
            # people's parts are still written.
            "--only",
            "raw",
            "--only",
            "meta",
            "--only",
            "card",
            "--database-url",
            db_url,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    with (out / "qualification.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    with Session(engine) as s:
        ids = {w.external_id: w.id or 0 for w in s.exec(select(Worker))}
        export_id = worker_export_ids(s.connection())
    got = {r["worker_id"]: (r["task"], r["tries"], r["passed"], r["outcome"]) for r in rows}
    assert got == {
        str(export_id[ids["p1"]]): ("generate", "1", "1", "passed"),
        str(export_id[ids["p2"]]): ("generate", "2", "1", "passed"),
        str(export_id[ids["p3"]]): ("generate", "2", "0", "failed"),
        str(export_id[ids["p4"]]): ("generate", "1", "0", "pending"),
    }
    card = (out / "README.md").read_text()
    assert "  - `qualification.csv`" in card and "`qualification.csv` says who took" in card
    assert "qualification.csv" in check_export(out)  # every column described
