"""Invented identities cannot drain the pool (docs/security.md). New identities and new batches
are limited per client address and per study, counted in the database (every server process
sees the same counts), and the dashboard shows the burst and cuts it off."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.admins import create_owner
from tests.support.webapp_coco import begin, enter, make_app, make_pairs, task
from tests.webapp.admin.test_admin import PASSWORD, login
from vsr_core.models import Assignment, ImagePair, LeaseStatus, PairStatus, Worker
from vsr_core.standing import standing

ATTACKER = "198.51.100.7"
LIMITS = {"new_workers_per_address": 5, "new_workers_per_study": 0, "new_batches_per_address": 0}


def _client(app: Any, address: str) -> TestClient:
    return TestClient(app, client=(address, 40000), raise_server_exceptions=False)


def _invent(app: Any, k: int) -> int:
    """One invented Prolific id from the attacker's address: enter, consent, begin, lease."""
    client = _client(app, ATTACKER)
    first = client.get(
        f"/start/generate?PROLIFIC_PID=fake{k:04d}&STUDY_ID=s&SESSION_ID=s", follow_redirects=False
    )
    if first.status_code != 303:
        assert first.status_code == 429 and "Too many new participants" in first.text
        return 429
    csrf = enter(client, f"PROLIFIC_PID=fake{k:04d}&STUDY_ID=s&SESSION_ID=s")
    assert begin(client, csrf).status_code == 303
    task(client)  # takes a lease
    return 303


def _active_leases(engine: Engine) -> int:
    with Session(engine) as s:
        return len(s.exec(select(Assignment).where(Assignment.status == LeaseStatus.active)).all())


def test_invented_pids_cannot_drain_the_pool(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        make_pairs(s, coco_dir, 12)
        create_owner(s, "alice", PASSWORD)
    app = make_app(db_url, tmp_path, image_root=coco_dir / "images", **LIMITS)
    # A second app on the same database stands for a second server process.
    other = make_app(db_url, tmp_path, image_root=coco_dir / "images", **LIMITS)
    codes = [_invent(app if k % 2 else other, k) for k in range(40)]
    assert codes.count(303) == 5 and codes.count(429) == 35, codes
    assert _active_leases(engine) == 5
    with Session(engine) as s:
        assert len(s.exec(select(Worker)).all()) == 5
    # A returning invented worker is not a new identity: it is let back in.
    again = _client(app, ATTACKER).get(
        "/start/generate?PROLIFIC_PID=fake0000&STUDY_ID=s&SESSION_ID=s", follow_redirects=False
    )
    assert again.status_code == 303
    # A real worker elsewhere still gets work.
    real = _client(app, "203.0.113.20")
    csrf = enter(real, "PROLIFIC_PID=realworker&STUDY_ID=s&SESSION_ID=s")
    assert begin(real, csrf).status_code == 303
    assert task(real)["assignment_id"]

    # The dashboard shows the burst and cuts it: blocked, leases back in the pool.
    admin = TestClient(app)
    login(admin)
    page = admin.get("/admin/bursts")
    assert page.status_code == 200 and f'data-address="{ATTACKER}"' in page.text
    row = page.text.split(f'data-address="{ATTACKER}"', 1)[1].split("</tr>", 1)[0]
    assert re.search(r'class="n">5<', row)  # five new workers from that address
    assert "203.0.113.20" not in page.text  # one identity is not a burst
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token
    cut = admin.post(
        "/admin/bursts/cut",
        data={"csrf_token": token.group(1), "address": ATTACKER},
        follow_redirects=False,
    )
    assert cut.status_code == 303
    assert "5 worker(s) first seen from" in admin.get(cut.headers["location"]).text
    with Session(engine) as s:
        fakes = s.exec(select(Worker).where(col(Worker.external_id).startswith("fake"))).all()
        assert len(fakes) == 5 and all(standing(s, w, 1).blocked for w in fakes)
        real_row = s.exec(select(Worker).where(Worker.external_id == "realworker")).one()
        assert not standing(s, real_row, 1).blocked
        leased = s.exec(select(ImagePair).where(ImagePair.status == PairStatus.leased)).all()
    assert _active_leases(engine) == 1 and len(leased) == 1  # only the real worker's
    # Forged cut without the CSRF token does nothing.
    assert admin.post("/admin/bursts/cut", data={"address": "203.0.113.20"}).status_code == 403


def test_site_wide_limit_and_new_batches_per_address(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        make_pairs(s, coco_dir, 6)
    app = make_app(
        db_url,
        tmp_path,
        image_root=coco_dir / "images",
        new_workers_per_address=0,
        new_workers_per_study=3,
        new_batches_per_address=2,
    )
    codes = [
        _client(app, f"192.0.2.{k}")
        .get(
            f"/start/generate?PROLIFIC_PID=spread{k}&STUDY_ID=s&SESSION_ID=s",
            follow_redirects=False,
        )
        .status_code
        for k in range(5)
    ]
    assert codes == [303, 303, 303, 429, 429]  # addresses spread out: the study-wide cap
    # Batches: two from one address, the third waits (existing identities, new batches).
    app2 = make_app(
        db_url,
        tmp_path,
        image_root=coco_dir / "images",
        new_workers_per_address=0,
        new_workers_per_study=0,
        new_batches_per_address=2,
    )
    outcomes = []
    for k in range(3):
        client = _client(app2, "192.0.2.99")
        csrf = enter(client, f"PROLIFIC_PID=batch{k}&STUDY_ID=s&SESSION_ID=s")
        outcomes.append(begin(client, csrf).status_code)
    assert outcomes == [303, 303, 429]
