"""Identities from one address that answer alike: the rate-limit events' addresses group
them, the release's captions and labels give the items, and the worker page shows the
evidence; a person behind the same address and the same agent behind another address are
not matched, and the site-wide count key is no address (both backends)."""

from __future__ import annotations

import random
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bench import authenticity_vsr
from tests.support import platform_work as work
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from vsr_core import authenticity_db
from vsr_core.authenticity import Signal
from vsr_core.authenticity_db import assess_workers
from vsr_core.models import Example, ItemSignal, RateEvent, Vote
from webapp.http import rate_limits

LAB = "203.0.113.7"
HOME = "198.51.100.9"
ITEMS = 120


def test_event_kinds_are_the_sites() -> None:
    assert authenticity_db.ADDRESS_EVENTS == (rate_limits.NEW_WORKER, rate_limits.NEW_BATCH)
    assert authenticity_db.SITE_KEY == rate_limits.STUDY_KEY


def test_identities_from_one_address_answering_alike(
    db_url: str, engine: Engine, tmp_path: Path, vsr_dir: Path
) -> None:
    release = authenticity_vsr._load(vsr_dir / "data" / "data_files" / "all_vsr_raw_data.jsonl")
    rng = random.Random(3)
    rng.shuffle(release)
    agent = authenticity_vsr.CaptionPrior(release[ITEMS:])  # image-blind: captions only
    items = release[:ITEMS]
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
        scene = work.scene(s)
        names = ("twin_a", "twin_b", "person", "elsewhere")
        ids = {n: work.worker(s, n).id or 0 for n in names}
        examples = []
        for r in items:
            e = Example(
                study_id=1,
                image_id=scene.image_id,
                relation=str(r["relation"]),
                subj="a",
                obj="b",
                label=bool(r["label"]),
                caption=str(r["caption"]),
            )
            s.add(e)
            s.flush()
            examples.append((e.id or 0, bool(r["label"]), agent.answer(r)))
        for name, wid in ids.items():
            order = examples[:] if name != "twin_b" else examples[::-1]  # other item order
            for k, (eid, label, blind) in enumerate(order):
                # A person looks at the photo (right 9 times in 10); the others never do.
                value = label != (rng.random() < 0.1) if name == "person" else blind
                vote = Vote(example_id=eid, worker_id=wid, value=value)
                s.add(vote)
                s.flush()
                if k < 20:  # people's answer times: log-normal around 2 s
                    shown = int(rng.lognormvariate(7.6, 0.5))
                    s.add(
                        ItemSignal(
                            study_id=1, worker_id=wid, vote_id=vote.id, shown_ms=shown, key_events=1
                        )
                    )
        for name, wid in ids.items():
            address = HOME if name == "elsewhere" else LAB
            s.add(RateEvent(kind=rate_limits.NEW_WORKER, key=address, worker_id=wid, study_id=1))
            s.add(RateEvent(kind=rate_limits.NEW_WORKER, key=rate_limits.STUDY_KEY, worker_id=wid))
            s.add(RateEvent(kind=rate_limits.NEW_BATCH, key=address, worker_id=wid))
        s.commit()
        found = assess_workers(s, 1, ids.values())
    shared = {n: Signal.shared_pattern in found[w].flags for n, w in ids.items()}
    assert shared == {"twin_a": True, "twin_b": True, "person": False, "elsewhere": False}
    assert f"worker {ids['twin_b']}: same answer on {ITEMS} of {ITEMS} shared items" in " ".join(
        found[ids["twin_a"]].evidence
    )
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(client)
    page = client.get(f"/admin/workers/{ids['twin_b']}").text
    assert "from the same address answered near-identically" in page
    assert f"worker {ids['twin_a']}: same answer on" in page
    calm = client.get(f"/admin/workers/{ids['person']}").text
    assert "same address" not in calm
