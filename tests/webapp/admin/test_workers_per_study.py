"""Workers seen through studies (docs/dashboard.md, "Workers"): an admin sees and acts on a
worker only through the studies they hold a role in; a block, flag and their reasons hold in
one study; a block in every study is the act of an admin who owns every study, recorded in
each study's trail. Asked on the dashboard as an admin would, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from tests.webapp.http.test_studies import make_two_studies
from vsr_core import audit
from vsr_core.models import AdminRole, Batch, BatchKind, BatchStatus, RateEvent, Worker
from vsr_core.standing import standing
from vsr_core.types import utcnow
from webapp.admin.auth import create_admin
from webapp.http.rate_limits import NEW_WORKER
from webapp.validate.statements import run_prebuilt, statements_for

BURST_ADDRESS = "203.0.113.9"


def _worker(s: Session, name: str, studies: list[int]) -> int:
    worker = Worker(source="prolific", external_id=name, roles=["validate"])
    s.add(worker)
    s.commit()
    assert worker.id is not None
    for study_id in studies:
        s.add(
            Batch(
                study_id=study_id,
                worker_id=worker.id,
                kind=BatchKind.validate.value,
                size=10,
                deadline=utcnow() + timedelta(hours=1),
            )
        )
    s.commit()
    return worker.id


@pytest.fixture
def world(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> dict[str, Any]:
    zh = make_two_studies(engine, coco_dir)
    with Session(engine) as s:
        create_admin(s, "root", PASSWORD, grants={1: AdminRole.owner, zh: AdminRole.owner})
        create_admin(s, "res-a", PASSWORD, grants={1: AdminRole.researcher})
        create_admin(s, "res-zh", PASSWORD, grants={zh: AdminRole.researcher})
        create_admin(s, "view-zh", PASSWORD, grants={zh: AdminRole.viewer})
        ids = {
            "only_zh": _worker(s, "only-zh", [zh]),
            "both": _worker(s, "both", [1, zh]),
            "only_a": _worker(s, "only-a", [1]),
        }
        # A burst of three identities made from one address that entered vsr-zh only.
        burst = [_worker(s, f"burst-{n}", [zh]) for n in range(3)]
        for wid in burst:
            s.add(RateEvent(kind=NEW_WORKER, key=BURST_ADDRESS, worker_id=wid))
        s.commit()
    return {
        "app": make_admin_app(db_url, engine, tmp_path),
        "zh": zh,
        "ids": ids,
        "burst": burst,
        "engine": engine,
    }


def _client(app: Any, username: str) -> tuple[TestClient, str]:
    client = TestClient(app)
    return client, login(client, username)


def _open_batches(engine: Engine, worker_id: int, study_id: int) -> int:
    with Session(engine) as s:
        return len(
            s.exec(
                select(Batch).where(
                    Batch.worker_id == worker_id,
                    Batch.study_id == study_id,
                    Batch.status == BatchStatus.open,
                )
            ).all()
        )


def _blocked_for_votes(engine: Engine, worker_id: int, study_id: int) -> bool:
    """What the vote's own statement reads of the worker in the study (webapp.validate)."""
    with Session(engine) as s:
        prebuilt = statements_for(engine.dialect.name)
        row = run_prebuilt(
            s, prebuilt.batch_state, {"q_worker": worker_id, "q_study": study_id}
        ).first()
        assert row is not None
        return bool(row.blocked)


def test_a_researcher_of_one_study_cannot_reach_another_studys_worker(
    world: dict[str, Any],
) -> None:
    app, zh, ids, engine = world["app"], world["zh"], world["ids"], world["engine"]
    client, token = _client(app, "res-a")
    only_zh = ids["only_zh"]
    page = client.get(f"/admin/workers/{only_zh}?study=vsr", headers={"accept": "text/html"})
    assert page.status_code == 404 and f"no worker #{only_zh} in the study vsr" in page.text
    for action, extra in (("block", {"reason": "x"}), ("flag", {"reason": "x"}), ("unblock", {})):
        r = client.post(
            f"/admin/workers/{only_zh}/{action}?study=vsr",
            data={"csrf_token": token, **extra},
            follow_redirects=False,
        )
        assert r.status_code == 404, (action, r.status_code, r.text[:200])
    assert _open_batches(engine, only_zh, zh) == 1
    assert not _blocked_for_votes(engine, only_zh, zh)
    with Session(engine) as s:
        worker = s.get(Worker, only_zh)
        assert worker is not None
        assert standing(s, worker, zh) == standing(s, worker, 1)
        assert not standing(s, worker, zh).blocked and not standing(s, worker, zh).flagged
    kinds = [e["kind"] for e in audit.stream(engine) if e["target"] == f"worker {only_zh}"]
    assert kinds == []


def test_a_block_and_its_reason_hold_in_one_study(world: dict[str, Any]) -> None:
    app, zh, ids, engine = world["app"], world["zh"], world["ids"], world["engine"]
    both = ids["both"]
    client, token = _client(app, "res-a")
    r = client.post(
        f"/admin/workers/{both}/block?study=vsr",
        data={"csrf_token": token, "reason": "copied answers in vsr"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    # Blocked in vsr: its batch there is returned and the vote's statement refuses them.
    assert _open_batches(engine, both, 1) == 0 and _blocked_for_votes(engine, both, 1)
    # Still working in vsr-zh: the batch there stays open and votes are taken.
    assert _open_batches(engine, both, zh) == 1 and not _blocked_for_votes(engine, both, zh)
    # vsr-zh's researcher sees no block and none of vsr's reason.
    zh_client, zh_token = _client(app, "res-zh")
    page = zh_client.get(f"/admin/workers/{both}?study=vsr-zh", headers={"accept": "text/html"})
    assert page.status_code == 200
    assert "copied answers in vsr" not in page.text and "tag bad" not in page.text
    # A flag with a reason in vsr-zh stays there too.
    r = zh_client.post(
        f"/admin/workers/{both}/flag?study=vsr-zh",
        data={"csrf_token": zh_token, "flagged": "true", "reason": "slow in zh"},
        follow_redirects=False,
    )
    assert r.status_code == 303
    page = client.get(f"/admin/workers/{both}?study=vsr", headers={"accept": "text/html"})
    assert "slow in zh" not in page.text and "copied answers in vsr" in page.text
    table = client.get("/admin/api/workers.json?study=vsr").json()["workers"]
    mine = next(w for w in table if w["id"] == both)
    assert mine["blocked"] and mine["flag_reason"] == "copied answers in vsr"
    table = zh_client.get("/admin/api/workers.json?study=vsr-zh").json()["workers"]
    theirs = next(w for w in table if w["id"] == both)
    assert not theirs["blocked"] and theirs["flag_reason"] == "slow in zh"
    # Unblocking in vsr-zh changes nothing in vsr.
    r = zh_client.post(
        f"/admin/workers/{both}/unblock?study=vsr-zh",
        data={"csrf_token": zh_token},
        follow_redirects=False,
    )
    assert r.status_code == 303 and _blocked_for_votes(engine, both, 1)
    # Each study's trail holds its own acts only.
    rows = [e for e in audit.stream(engine) if e["target"] == f"worker {both}"]
    assert [(e["kind"], e["study_id"]) for e in rows] == [
        ("worker_block", 1),
        ("worker_flag", zh),
        ("worker_unblock", zh),
    ]


def test_a_block_in_every_study_needs_every_studys_owner(world: dict[str, Any]) -> None:
    app, zh, ids, engine = world["app"], world["zh"], world["ids"], world["engine"]
    both = ids["both"]
    client, token = _client(app, "res-a")
    r = client.post(
        f"/admin/workers/{both}/everywhere?study=vsr",
        data={"csrf_token": token, "blocked": "true"},
        follow_redirects=False,
    )
    assert r.status_code == 403 and "owner role in every study" in r.text
    assert not _blocked_for_votes(engine, both, zh)
    page = client.get(f"/admin/workers/{both}?study=vsr", headers={"accept": "text/html"})
    assert "/everywhere" not in page.text
    root, root_token = _client(app, "root")
    page = root.get(f"/admin/workers/{both}?study=vsr", headers={"accept": "text/html"})
    assert "Block in every study" in page.text
    r = root.post(
        f"/admin/workers/{both}/everywhere?study=vsr",
        data={"csrf_token": root_token, "blocked": "true", "reason": "fraud"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    assert _blocked_for_votes(engine, both, 1) and _blocked_for_votes(engine, both, zh)
    assert _open_batches(engine, both, zh) == 0
    # Recorded in the trail of each study the worker took part in.
    rows = [e for e in audit.stream(engine) if e["target"] == f"worker {both}"]
    assert sorted((e["kind"], e["study_id"]) for e in rows) == [
        ("worker_block", 1),
        ("worker_block", zh),
    ]
    assert all(e["change"]["scope"] == "every study" for e in rows)


def test_bursts_show_and_cut_only_the_studys_own_identities(world: dict[str, Any]) -> None:
    app, zh, engine, burst = world["app"], world["zh"], world["engine"], world["burst"]
    client, token = _client(app, "res-a")
    page = client.get("/admin/bursts?study=vsr", headers={"accept": "text/html"})
    assert page.status_code == 200 and BURST_ADDRESS not in page.text
    r = client.post(
        "/admin/bursts/cut?study=vsr",
        data={"csrf_token": token, "address": BURST_ADDRESS},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert all(not _blocked_for_votes(engine, w, zh) for w in burst)
    assert all(_open_batches(engine, w, zh) == 1 for w in burst)
    # vsr-zh's viewer sees the burst; its researcher cuts it, in vsr-zh only.
    viewer, _ = _client(app, "view-zh")
    page = viewer.get("/admin/bursts?study=vsr-zh", headers={"accept": "text/html"})
    assert BURST_ADDRESS in page.text
    zh_client, zh_token = _client(app, "res-zh")
    r = zh_client.post(
        "/admin/bursts/cut?study=vsr-zh",
        data={"csrf_token": zh_token, "address": BURST_ADDRESS},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert all(_blocked_for_votes(engine, w, zh) for w in burst)
    assert all(not _blocked_for_votes(engine, w, 1) for w in burst)
    with Session(engine) as s:
        assert not s.exec(select(Worker).where(col(Worker.blocked))).all()
