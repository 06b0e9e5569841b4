"""The dashboard with two studies: a switcher on every page, the choice remembered, and no
page or JSON API of one study showing the other's figures (real COCO pairs, both backends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from tests.webapp.http.test_studies import make_two_studies
from vsr_core.models import Example
from vsr_core.studies.settings import load_study_config

PAGES = (
    "/admin",
    "/admin/quality",
    "/admin/workers",
    "/admin/data",
    "/admin/settings",
    "/admin/pipeline",
    "/admin/revalidation",
    "/admin/bursts",
)


@pytest.fixture
def dashboard(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> tuple[TestClient, str, int]:
    zh_id = make_two_studies(engine, coco_dir)
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
        # Tell the studies apart by their sizes: one more pair-less Example in the default.
        first = s.exec(select(Example).where(Example.study_id == 1)).first()
        assert first is not None
        extra = Example(**first.model_dump(exclude={"id", "annotation_id", "source_key"}))
        s.add(extra)
        s.commit()
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    return client, login(client), zh_id


def _overview(client: TestClient, query: str = "") -> dict[str, Any]:
    r = client.get(f"/admin/api/overview.json{query}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_switcher_scopes_every_page_and_api(dashboard: tuple[TestClient, str, int]) -> None:
    client, _, _ = dashboard
    default = _overview(client)
    assert (default["examples"], default["pairs_total"]) == (9, 4)

    zh = _overview(client, "?study=vsr-zh")
    assert (zh["examples"], zh["pairs_total"]) == (8, 4)
    assert _overview(client)["examples"] == 8  # remembered for the next request
    for path in PAGES:
        page = client.get(path)
        assert page.status_code == 200, path
        assert 'id="study-select"' in page.text
        assert '<option value="vsr-zh" selected>' in page.text, path
        assert '<option value="vsr">' in page.text
    data = client.get("/admin/data").text
    with Session(client.app.state.engine) as s:  # type: ignore[attr-defined]
        zh_caption = s.exec(select(Example.id).where(Example.study_id != 1)).first()
        vsr_ids = list(
            s.exec(select(Example.id).where(Example.study_id == 1).order_by(col(Example.id)))
        )
    assert zh_caption is not None and f'href="/admin/examples/{zh_caption}"' in data
    assert not any(f'href="/admin/examples/{i}"' in data for i in vsr_ids)
    other = client.get(f"/admin/examples/{vsr_ids[0]}")
    assert other.status_code == 404 and "belongs to the study vsr" in other.text

    back = _overview(client, "?study=vsr")
    assert back["examples"] == 9
    unknown = client.get("/admin?study=nope")
    assert unknown.status_code == 200 and "There is no study nope" in unknown.text


def test_settings_are_per_study(dashboard: tuple[TestClient, str, int], engine: Engine) -> None:
    client, token, zh_id = dashboard
    client.get("/admin?study=vsr-zh")
    page = client.get("/admin/settings")
    from tests.webapp.admin.test_admin import csrf_of

    r = client.post(
        "/admin/settings",
        data={
            "csrf_token": csrf_of(page.text),
            "completion_code": "ZHDONE",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        assert load_study_config(s, zh_id).completion_code == "ZHDONE"
        assert load_study_config(s, 1).completion_code not in ("ZHDONE", "VSRDONE", "")


def test_a_dashboard_job_runs_in_the_chosen_study(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    from tests.webapp.admin.test_admin import wait_job
    from tests.webapp.http.test_studies import ZH_FILE
    from vsr_core.models import ImagePair, Job
    from vsr_core.studies.store import create_study

    with Session(engine) as s:
        zh = create_study(s, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
        s.commit()
        zh_id = zh.id
        create_owner(s, "alice", PASSWORD)
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    token = login(client)
    client.get("/admin/pipeline?study=vsr-zh")
    files = str(coco_dir / "annotations" / "instances_val2017_subset.json")
    r = client.post(
        "/admin/jobs/sample",
        data={
            "csrf_token": token,
            "n_pairs": "4",
            "seed": "1",
            "coco_files": files,
        },
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        (job,) = s.exec(select(Job)).all()
        assert job.study_id == zh_id
    done = wait_job(client, job.id)  # type: ignore[arg-type]
    assert done["status"] == "succeeded", done
    with Session(engine) as s:
        pairs = s.exec(select(ImagePair)).all()
        assert pairs and {p.study_id for p in pairs} == {zh_id}
    assert f'data-job="{job.id}"' in client.get("/admin/pipeline").text
    assert f'data-job="{job.id}"' not in client.get("/admin/pipeline?study=vsr").text


def test_workers_page_counts_only_the_chosen_studys_work(
    dashboard: tuple[TestClient, str, int], engine: Engine
) -> None:
    """The workers table, a worker's page and the overview's KPI count the chosen study's
    members and their work only; blocking stays per person, across studies."""
    from vsr_core.models import Vote, Worker

    client, token, zh_id = dashboard
    with Session(engine) as s:
        en_ex = list(
            s.exec(select(Example.id).where(Example.study_id == 1).order_by(col(Example.id)))
        )
        zh_ex = list(
            s.exec(select(Example.id).where(Example.study_id == zh_id).order_by(col(Example.id)))
        )
        only_en = Worker(source="invite", external_id="only-en", roles=["validate"])
        only_zh = Worker(source="invite", external_id="only-zh", roles=["validate"])
        both = Worker(source="invite", external_id="both", roles=["validate"])
        s.add_all([only_en, only_zh, both])
        s.flush()
        votes = [(only_en, en_ex[:3]), (only_zh, zh_ex[:2]), (both, en_ex[:1] + zh_ex[:4])]
        for w, voted in votes:
            for i in voted:
                s.add(Vote(example_id=i, worker_id=w.id, value=True))  # type: ignore[arg-type]
        s.commit()
        ids = {w.external_id: w.id for w in (only_en, only_zh, both)}

    def table(study: str) -> dict[str, int]:
        r = client.get(f"/admin/api/workers.json?study={study}")
        assert r.status_code == 200, r.text
        body = r.json()
        rows = {w["external_id"]: w["votes"] for w in body["workers"]}
        assert body["total"] == len(rows)
        return rows

    # seed_examples wrote authors author0-3 in the default study, author4-7 in vsr-zh.
    zh = table("vsr-zh")
    assert zh == {"only-zh": 2, "both": 4} | {f"author{k}": 0 for k in range(4, 8)}
    en = table("vsr")
    assert en == {"only-en": 3, "both": 1} | {f"author{k}": 0 for k in range(4)}
    assert _overview(client, "?study=vsr-zh")["workers"] == 6
    assert _overview(client, "?study=vsr")["workers"] == 6

    # One worker's page speaks for the chosen study: its votes, its Examples.
    client.get("/admin?study=vsr-zh")
    page = client.get(f"/admin/workers/{ids['both']}").text
    assert '<h2>Votes</h2><p class="big">4</p>' in page
    assert all(f'href="/admin/examples/{i}"' in page for i in zh_ex[:4])
    assert f'href="/admin/examples/{en_ex[0]}"' not in page
    page = client.get(f"/admin/workers/{ids['both']}?study=vsr").text
    assert '<h2>Votes</h2><p class="big">1</p>' in page
    assert f'href="/admin/examples/{en_ex[0]}"' in page
    assert not any(f'href="/admin/examples/{i}"' in page for i in zh_ex)

    # A block is the chosen study's: blocked in vsr-zh, the same worker still works in vsr.
    client.get("/admin?study=vsr-zh")
    r = client.post(
        f"/admin/workers/{ids['both']}/block",
        data={"csrf_token": token, "reason": "test"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    assert _overview(client, "?study=vsr-zh")["workers_blocked"] == 1
    assert _overview(client, "?study=vsr")["workers_blocked"] == 0
    client.get("/admin?study=vsr-zh")
    client.post(
        f"/admin/workers/{ids['only-zh']}/block",
        data={"csrf_token": token, "reason": "test"},
        follow_redirects=False,
    )
    assert _overview(client, "?study=vsr")["workers_blocked"] == 0
    assert _overview(client, "?study=vsr-zh")["workers_blocked"] == 2


def test_jobs_and_revalidation_stay_in_the_chosen_study(
    dashboard: tuple[TestClient, str, int], engine: Engine
) -> None:
    """The job list, a job's status, its download and cancelling it answer only in the
    job's own study (they used to ignore the switcher); re-validation, whose imported data
    lives in the default study, neither reads nor writes it from another study."""
    from vsr_core.models import Job
    from webapp.admin.jobs import export_dir

    client, token, zh_id = dashboard
    settings = client.app.state.settings  # type: ignore[attr-defined]
    zipped = export_dir(settings) / "vsr-dataset-job-zh.zip"
    zipped.parent.mkdir(parents=True, exist_ok=True)
    zipped.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    with Session(engine) as s:
        built = Job(
            study_id=zh_id, kind="build", status="succeeded", params={"seed": 0, "zip": str(zipped)}
        )
        queued = Job(study_id=zh_id, kind="match", status="queued", params={})
        s.add(built)
        s.add(queued)
        s.commit()
        built_id, queued_id = built.id, queued.id
    client.get("/admin?study=vsr")
    assert client.get("/admin/api/jobs").json() == []
    for path in (f"/admin/api/jobs/{built_id}", f"/admin/jobs/{built_id}/download"):
        r = client.get(path)
        assert r.status_code == 404 and "belongs to the study vsr-zh" in r.text, path
    r = client.post(
        f"/admin/jobs/{queued_id}/cancel", data={"csrf_token": token}, follow_redirects=False
    )
    assert r.status_code == 404 and "belongs to the study vsr-zh" in r.text
    with Session(engine) as s:
        job = s.get(Job, queued_id)
        assert job is not None and job.status != "cancelled"
    client.get("/admin?study=vsr-zh")
    assert {j["id"] for j in client.get("/admin/api/jobs").json()} == {built_id, queued_id}
    assert client.get(f"/admin/jobs/{built_id}/download").status_code == 200

    with Session(engine) as s:
        before = len(s.exec(select(Example)).all())
    r = client.post("/admin/revalidation", data={"csrf_token": token, "sample": "2"})
    assert r.status_code == 422 and "default study" in r.text
    assert client.get("/admin/api/revalidation.json").json()["rounds"] == []
    with Session(engine) as s:
        assert len(s.exec(select(Example)).all()) == before
