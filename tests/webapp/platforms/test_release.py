"""Sync gives a gone participant's leased pair back at once: the participant entered the
real site from a Prolific link and holds a lease in their open batch; when Prolific reports
them RETURNED, TIMED-OUT or REJECTED, sync releases that lease (the pair is free for the next
worker before the lease would have expired). A participant still working keeps theirs."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from tests.support.fake_prolific import TOKEN, State
from tests.support.webapp_coco import client_for, start_prolific
from vsr_core.models import (
    Assignment,
    ImagePair,
    LeaseStatus,
    PairStatus,
    PlatformStudy,
    Worker,
)
from webapp.crowd.leases import PairStrategy
from webapp.platforms.engine import sync
from webapp.platforms.prolific import ProlificPlatform
from webapp.validate.strategy import ExampleStrategy


def _lease_of(engine: Engine, pid: str) -> Assignment:
    with Session(engine) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == pid)).one()
        return s.exec(select(Assignment).where(Assignment.worker_id == worker.id)).one()


@pytest.mark.parametrize("gone", ["RETURNED", "TIMED-OUT", "REJECTED"])
def test_sync_releases_the_leases_of_gone_participants(
    site: Any, engine: Engine, fake: tuple[str, State], gone: str
) -> None:
    url, state = fake
    for pid in ("aa1", "bb2"):  # each opens the task page: a real batch and lease
        client = client_for(site)
        start_prolific(client, pid)
        assert client.get("/generate").status_code == 200
    left, stays = _lease_of(engine, "aa1"), _lease_of(engine, "bb2")
    assert left.status == stays.status == LeaseStatus.active
    state.studies["st1"] = {"id": "st1", "status": "ACTIVE"}
    state.add_submission("st1", "s1", "aa1", gone)
    state.add_submission("st1", "s2", "bb2", "ACTIVE")
    with Session(engine) as session:
        study = PlatformStudy(platform="prolific", external_id="st1")
        session.add(study)
        session.commit()
        released = sync(
            session,
            ProlificPlatform(base_url=url, token=TOKEN),
            study,
            {"generate": PairStrategy(), "validate": ExampleStrategy()},
        )
    assert released == 1
    with Session(engine) as s:
        lease = s.get(Assignment, left.id)
        assert lease is not None and lease.status == LeaseStatus.released
        pair = s.get(ImagePair, left.pair_id)
        assert pair is not None and pair.status == PairStatus.available
        kept = s.get(Assignment, stays.id)
        assert kept is not None and kept.status == LeaseStatus.active
    # The next worker gets the released pair (the oldest free one) at once.
    client = client_for(site)
    start_prolific(client, "cc3")
    assert client.get("/generate").status_code == 200
    assert _lease_of(engine, "cc3").pair_id == left.pair_id
