"""Every export is in the audit trail (docs/dashboard.md, "Audit trail"): a viewer's
`build-dataset` at the CLI, a dashboard build job and a viewer's zip download each leave a
record with the actor, the study and the SHA-256 of each file, computed here from the files
themselves. Real COCO pairs, the `build-dataset` entry point, SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from tests.webapp.http.test_studies import make_two_studies
from vsr_cli.admin_jobs import run_job
from vsr_core import audit
from vsr_core.models import AdminRole, Example, Job, JobKind, JobStatus, Vote, Worker
from webapp.admin import jobs
from webapp.admin.auth import create_admin

BUILD = str(Path(sys.executable).parent / "build-dataset")


def _exports(engine: Engine, kind: str) -> list[dict[str, Any]]:
    return [e for e in audit.stream(engine) if e["kind"] == kind]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _judge_right(engine: Engine, study_id: int) -> None:
    """Three validators judge each of the study's Examples right: all are kept (an export
    with nothing kept is refused)."""
    with Session(engine) as s:
        judges = [
            Worker(source="invite", external_id=f"judge-{i}", roles=["validate"]) for i in range(3)
        ]
        s.add_all(judges)
        s.flush()
        for ex in s.exec(select(Example).where(Example.study_id == study_id)):
            for judge in judges:
                s.add(Vote(example_id=ex.id, worker_id=judge.id, value=ex.label))  # type: ignore[arg-type]
        s.commit()


def test_builds_and_downloads_are_recorded(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    zh = make_two_studies(engine, coco_dir)
    _judge_right(engine, zh)
    with Session(engine) as s:
        viewer = create_admin(s, "viewer", PASSWORD, grants={zh: AdminRole.viewer})
        researcher = create_admin(s, "res", PASSWORD, grants={zh: AdminRole.researcher})
        viewer_id, researcher_id = viewer.id, researcher.id
    # The CLI, as the study's viewer (proven by their password).
    out = tmp_path / "out"
    env = {**os.environ, "DATABASE_URL": db_url, "VSR_ADMIN": "viewer"}
    env["VSR_ADMIN_SECRET"] = PASSWORD
    done = subprocess.run(
        [BUILD, "--out", str(out), "--study", "vsr-zh", "--zip", str(tmp_path / "d.zip")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    (cli,) = _exports(engine, "dataset_export")
    assert (cli["actor"], cli["actor_id"], cli["study_id"], cli["via"]) == (
        "viewer",
        viewer_id,
        zh,
        "cli",
    )
    on_disk = {str(p.relative_to(out)): _sha(p) for p in out.rglob("*") if p.is_file()}
    on_disk[str(tmp_path / "d.zip")] = _sha(tmp_path / "d.zip")
    assert cli["change"]["files"] == on_disk and len(on_disk) > 3
    # No role in the study: refused in one line, nothing exported, nothing recorded.
    refused = subprocess.run(
        [BUILD, "--out", str(tmp_path / "no"), "--study", "vsr"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode != 0 and "has no role" in refused.stderr
    assert not (tmp_path / "no").exists() and len(_exports(engine, "dataset_export")) == 1

    # A dashboard build job, started by the researcher, then downloaded by the viewer.
    app = make_admin_app(db_url, engine, tmp_path)
    settings = app.state.settings
    with Session(engine) as s:
        job = Job(
            study_id=zh,
            kind=JobKind.build,
            params={
                "seed": 0,
                "zip": str(jobs.export_dir(settings) / "vsr-dataset-job-t.zip"),
                "_actor": "res",
                "_actor_id": researcher_id,
            },
        )
        s.add(job)
        s.commit()
        job_id = job.id
    assert job_id is not None
    assert run_job(engine, job_id).status == JobStatus.succeeded
    (_, built) = _exports(engine, "dataset_export")
    zipped = jobs.export_dir(settings) / "vsr-dataset-job-t.zip"
    assert (built["actor"], built["actor_id"], built["study_id"]) == ("res", researcher_id, zh)
    assert built["change"]["zip_sha256"] == _sha(zipped)
    client = TestClient(app)
    login(client, "viewer")
    r = client.get(f"/admin/jobs/{job_id}/download?study=vsr-zh")
    assert r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == _sha(zipped)
    (got,) = _exports(engine, "download")
    assert (got["actor"], got["actor_id"], got["study_id"], got["target"]) == (
        "viewer",
        viewer_id,
        zh,
        f"job {job_id}",
    )
    assert got["change"]["sha256"] == _sha(zipped)
