"""Concurrent resubmits of one vote (docs/security.md): the same answer sent twice at once is
one vote and the same answer twice, on the JSON API and the HTML form, on PostgreSQL where
a request that waited for the lease's row lock reads the rest from an older snapshot."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlmodel import Session, col, func, select

from tests.support.webapp_coco import form_field, make_app, set_study
from tests.webapp.validate.test_routes import seed_examples, start
from vsr_core.db import make_engine
from vsr_core.models import Vote

COPIES = 4
ROUNDS = 6


def _at_once(calls: list[Any]) -> list[Any]:
    """Run the calls in threads released together; their results in order."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(k: int) -> None:
        barrier.wait()
        out[k] = calls[k]()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _site(pg_url: str, coco_dir: Path, tmp_path: Path) -> Any:
    engine = make_engine(pg_url)
    with Session(engine) as s:
        seed_examples(s, coco_dir, n_pairs=8)
    engine.dispose()
    set_study(pg_url, gold_rate=0.0)
    return make_app(pg_url, tmp_path, image_root=coco_dir / "images")


def _vote_count(pg_url: str) -> tuple[int, int]:
    engine = make_engine(pg_url)
    with Session(engine) as s:
        total = s.exec(select(func.count()).select_from(Vote)).one()
        distinct = s.exec(select(func.count(func.distinct(col(Vote.assignment_id))))).one()
    engine.dispose()
    return int(total), int(distinct)


def test_api_resubmits_at_once_are_one_vote_and_the_same_answer(
    pg_url: str, coco_dir: Path, tmp_path: Path
) -> None:
    app = _site(pg_url, coco_dir, tmp_path)
    with TestClient(app, raise_server_exceptions=False) as client:
        start(client, "vrace")
        item = client.get("/api/validate/item").json()["item"]
        for _ in range(ROUNDS):
            body = {"assignment_id": item["assignment_id"], "value": True}

            def post(body: dict[str, Any] = body) -> Any:
                return client.post("/api/validate/votes?next=1", json=body)

            answers = _at_once([post] * COPIES)
            statuses = sorted(r.status_code for r in answers)
            assert statuses == [200] * (COPIES - 1) + [201], [r.text for r in answers]
            outs = [r.json() for r in answers]
            for out in outs:
                out.pop("created")
                if out["next"] is not None:
                    out["next"].pop("seconds_left")
            assert all(out == outs[0] for out in outs), outs
            assert outs[0]["next"]["item"] is not None  # ?next=1 carries the next item
            item = outs[0]["next"]["item"]
    assert _vote_count(pg_url) == (ROUNDS, ROUNDS)


def test_form_resubmits_at_once_all_move_on(pg_url: str, coco_dir: Path, tmp_path: Path) -> None:
    app = _site(pg_url, coco_dir, tmp_path)
    with TestClient(app, raise_server_exceptions=False) as client:
        csrf = start(client, "vform")
        for _ in range(ROUNDS):
            page = client.get("/validate")
            assert page.status_code == 200, page.text
            lease = form_field(page.text, "assignment_id")
            data = {"csrf": csrf, "assignment_id": lease, "answer": "false"}

            def post(data: dict[str, str] = data) -> Any:
                return client.post("/validate", data=data, follow_redirects=False)

            answers = _at_once([post] * COPIES)
            assert [(r.status_code, r.headers.get("location")) for r in answers] == [
                (303, "/validate")
            ] * COPIES, [r.text for r in answers]
    assert _vote_count(pg_url) == (ROUNDS, ROUNDS)


def test_caption_resubmits_at_once_are_one_annotation(
    pg_url: str, coco_dir: Path, tmp_path: Path
) -> None:
    """The caption task has the same shape of race; its submit re-reads after taking the
    lease's lock (webapp.generate.submission._submit), so copies get the first answer."""
    from tests.support.webapp_coco import make_pairs, start_prolific, task
    from vsr_core.models import Annotation

    engine = make_engine(pg_url)
    with Session(engine) as s:
        make_pairs(s, coco_dir, 6)
    app = make_app(pg_url, tmp_path)
    with TestClient(app, raise_server_exceptions=False) as client:
        start_prolific(client, "craces")
        for _ in range(3):
            fields = task(client)
            body = {
                "assignment_id": fields["assignment_id"],
                "client_token": fields["client_token"],
                "relation": "near",
                "ent1": "a",
                "true_image": 1,
            }

            def post(body: dict[str, Any] = body) -> Any:
                return client.post("/api/generate/annotations", json=body)

            answers = _at_once([post] * COPIES)
            assert sorted(r.status_code for r in answers) == [200] * (COPIES - 1) + [201], [
                r.text for r in answers
            ]
            ids = {r.json()["annotation_id"] for r in answers}
            assert len(ids) == 1
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(Annotation)).one() == 3
    engine.dispose()
