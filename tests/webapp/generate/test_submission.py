"""The contrastive caption task: what a submission stores, and every way it can go wrong."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.webapp_coco import (
    answer,
    client_for,
    lease_id_of,
    set_study,
    start_prolific,
    task,
)
from vsr_core.models import Annotation, Assignment, Batch, Example, ImagePair
from vsr_core.types import utcnow


def _rows(engine: Engine) -> tuple[Sequence[Annotation], Sequence[Example]]:
    with Session(engine) as s:
        return (
            s.exec(select(Annotation)).all(),
            s.exec(select(Example).order_by(Example.id)).all(),  # type: ignore[arg-type]
        )


def _pair_of(engine, assignment_id: str) -> ImagePair:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        lease = s.get(Assignment, lease_id_of(assignment_id))
        assert lease is not None
        pair = s.get(ImagePair, lease.pair_id)
        assert pair is not None
        return pair


def test_submit_stores_one_annotation_and_two_examples(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    start_prolific(client, "gen1")
    fields = task(client)
    pair = _pair_of(engine, fields["assignment_id"])
    r = client.post(
        "/generate",
        data=answer(fields, relation="on top of", ent1="b", true_image="2", duration_ms="4200"),
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/generate"
    (ann,), examples = _rows(engine)
    assert (ann.relation, ann.subj, ann.obj) == ("on top of", pair.concept_b, pair.concept_a)
    assert ann.true_image_id == pair.image2_id and ann.duration_ms == 4200
    caption = f"The {pair.concept_b} is on top of the {pair.concept_a}."
    assert sorted((e.image_id, e.label, e.caption) for e in examples) == sorted(
        [
            (pair.image2_id, True, caption),
            (pair.image1_id, False, caption),
        ]
    )
    assert all(e.annotation_id == ann.id and e.origin == "human" for e in examples)
    assert all(e.author_id == ann.worker_id for e in examples)
    with Session(engine) as s:
        assert s.get(ImagePair, pair.id).status == "annotated"  # type: ignore[union-attr]
        assert s.get(Assignment, lease_id_of(fields["assignment_id"])).status == "done"  # type: ignore[union-attr]
    # the next page shows the next pair
    assert task(client)["assignment_id"] != fields["assignment_id"]


def test_verbs_take_no_copula(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    start_prolific(client, "gen2")
    fields = task(client)
    pair = _pair_of(engine, fields["assignment_id"])
    client.post("/generate", data=answer(fields, relation="contains", ent1="a"))
    _, examples = _rows(engine)
    assert examples[0].caption == f"The {pair.concept_a} contains the {pair.concept_b}."


def test_page_previews_exactly_the_stored_captions(site, engine) -> None:  # type: ignore[no-untyped-def]
    import json
    import re

    client = client_for(site)
    start_prolific(client, "gen3")
    page = client.get("/generate").text
    table = json.loads(re.search(r'id="captions-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert len(table) == 65  # 70 distinct names of Table 1 less the 5 unused
    assert "up" not in table and "deep down" not in table
    fields = task(client)
    client.post("/generate", data=answer(fields, relation="has as a part", ent1="b"))
    _, examples = _rows(engine)
    assert examples[0].caption == table["has as a part"]["b"]
    # all 7 categories are shown
    for cat in (
        "Adjacency",
        "Directional",
        "Orientation",
        "Projective",
        "Proximity",
        "Topological",
        "Unallocated",
    ):
        assert f'data-category="{cat}"' in page
    assert page.count('value="among"') == 1  # offered once, though in two categories


def test_skip_with_a_reason(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    start_prolific(client, "gen4")
    fields = task(client)
    data = dict(fields, action="skip", skip_reason="unidentifiable", skip_comment="too dark")
    assert client.post("/generate", data=data, follow_redirects=False).status_code == 303
    (ann,), examples = _rows(engine)
    assert examples == [] and ann.skip_reason == "unidentifiable" and ann.skip_comment == "too dark"
    assert ann.relation is None
    assert _pair_of(engine, fields["assignment_id"]).status == "skipped"
    # skipping without a reason is refused and stores nothing
    fields = task(client)
    r = client.post("/generate", data=dict(fields, action="skip"))
    assert r.status_code == 422 and "say why" in r.text
    assert len(_rows(engine)[0]) == 1


def test_double_submit_and_retries_never_duplicate(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    start_prolific(client, "gen5")
    fields = task(client)
    data = answer(fields)
    for _ in range(3):  # a double click and a browser "resubmit form"
        assert client.post("/generate", data=data, follow_redirects=False).status_code == 303
    # a retry of the same lease with a new token (the page was reloaded from cache)
    again = dict(data, client_token="another-token-1", relation="under")
    assert client.post("/generate", data=again, follow_redirects=False).status_code == 303
    # the JSON API gives back the first answer with 200
    r = client.post(
        "/api/generate/annotations",
        json={
            "assignment_id": fields["assignment_id"],
            "client_token": fields["client_token"],
            "relation": "near",
            "ent1": "b",
            "true_image": 2,
        },
    )
    assert r.status_code == 200 and r.json()["created"] is False
    assert r.json()["relation"] == "on top of"
    anns, examples = _rows(engine)
    assert len(anns) == 1 and len(examples) == 2 and anns[0].relation == "on top of"
    with Session(engine) as s:  # the batch counted its one finished lease once
        from webapp.validate.audit import audit_counters

        assert audit_counters(s) == []
        assert s.exec(select(Batch)).one().done_count == 1


@pytest.mark.parametrize(
    "overrides, status, message",
    [
        ({"relation": "flying over"}, 422, "not one of the relations"),
        ({"relation": "up"}, 422, "not one of the relations"),  # Table 1 but unused
        ({"relation": "congruent"}, 422, "not one of the relations"),  # import-only
        ({"relation": ""}, 422, "missing: relation"),
        ({"ent1": "c"}, 422, "ent1"),
        ({"true_image": "3"}, 422, "true_image"),
        ({"assignment_id": "abc"}, 403, "not assigned to you"),
        ({"assignment_id": "x" * 40}, 422, "assignment_id"),
        ({"client_token": "x"}, 422, "client_token"),
        ({"action": "delete"}, 422, "action"),
    ],
)
def test_bad_answers_get_4xx_and_change_nothing(  # type: ignore[no-untyped-def]
    site, engine, overrides: dict[str, str], status: int, message: str
) -> None:
    client = client_for(site)
    start_prolific(client, "gen6")
    fields = task(client)
    r = client.post("/generate", data=answer(fields, **overrides))
    assert r.status_code == status and message in r.text
    assert "Traceback" not in r.text
    assert _rows(engine) == ([], [])
    with Session(engine) as s:
        assert s.get(Assignment, lease_id_of(fields["assignment_id"])).status == "active"  # type: ignore[union-attr]


def test_relations_follow_the_study_setting(site, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    set_study(db_url, relations_enabled=["left of", "right of", "up"])
    client = client_for(site)
    start_prolific(client, "gen7")
    assert [r["name"] for r in client.get("/api/relations").json()] == ["up", "left of", "right of"]
    fields = task(client)
    r = client.post("/generate", data=answer(fields, relation="on top of"))
    assert r.status_code == 422
    r = client.post("/generate", data=answer(fields, relation="up"), follow_redirects=False)
    assert r.status_code == 303
    assert _rows(engine)[1][0].caption.endswith("is up the " + _rows(engine)[0][0].obj + ".")  # type: ignore[operator]


def test_expired_lease_returns_the_pair_to_the_pool(site, engine) -> None:  # type: ignore[no-untyped-def]
    slow, fast = client_for(site), client_for(site)
    start_prolific(slow, "slowpoke")
    fields = task(slow)
    with Session(engine) as s:
        lease = s.get(Assignment, lease_id_of(fields["assignment_id"]))
        assert lease is not None
        lease.lease_expires_at = utcnow() - timedelta(seconds=1)
        s.add(lease)
        s.commit()
        pair_id = lease.pair_id
    start_prolific(fast, "speedy")
    taken = task(fast)
    assert _pair_of(engine, taken["assignment_id"]).id == pair_id  # oldest free pair again
    with Session(engine) as s:
        assert s.get(Assignment, lease_id_of(fields["assignment_id"])).status == "expired"  # type: ignore[union-attr]
    # the late answer is turned away (the worker is sent on to a new pair) and stores nothing
    r = slow.post("/generate", data=answer(fields), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/generate?notice=expired"
    assert "ran out" in slow.get("/generate?notice=expired").text
    r = slow.post(
        "/api/generate/annotations",
        json={
            "assignment_id": fields["assignment_id"],
            "client_token": "late-token-1",
            "relation": "on",
            "ent1": "a",
            "true_image": 1,
        },
    )
    assert r.status_code == 409
    assert _rows(engine) == ([], [])


def test_batch_completes_after_n_pairs_with_the_code(site, engine, db_url: str) -> None:  # type: ignore[no-untyped-def]
    set_study(db_url, generate_batch_size=2, completion_code="C0DE-42")
    client = client_for(site)
    start_prolific(client, "gen8")
    client.post("/generate", data=answer(task(client)))
    client.post("/generate", data=answer(task(client), relation="below", true_image="2"))
    page = client.get("/generate")
    assert page.url.path == "/done/generate" and "C0DE-42" in page.text
    assert "https://app.prolific.com/submissions/complete?cc=C0DE-42" in page.text
    anns, examples = _rows(engine)
    assert len(anns) == 2 and len(examples) == 4
    with Session(engine) as s:
        assert sorted(p.status for p in s.exec(select(ImagePair))).count("leased") == 0


def test_json_task_api(site, engine) -> None:  # type: ignore[no-untyped-def]
    client = client_for(site)
    start_prolific(client, "gen9")
    t = client.get("/api/generate/task").json()
    with Session(engine) as s:  # the study says 200; the batch holds the pairs there are
        free = len(s.exec(select(ImagePair)).all())
    assert t["batch_size"] == free < 200 and t["done"] == 0 and len(t["images"]) == 2
    assert "left of" in t["relations"] and "up" not in t["relations"]
    r = client.post(
        "/api/generate/annotations",
        json={
            "assignment_id": t["assignment_id"],
            "client_token": "json-token-1",
            "relation": "left of",
            "ent1": "a",
            "true_image": 1,
        },
    )
    assert r.status_code == 201
    body = r.json()
    caption = f"The {t['concept_a']} is left of the {t['concept_b']}."
    assert body["created"] is True and body["captions"] == [caption, caption]
    assert client.get("/api/generate/task").json()["done"] == 1


@pytest.mark.parametrize("coin", [0, 1])
def test_id_order_of_the_two_examples_does_not_follow_the_label(  # type: ignore[no-untyped-def]
    site, engine, monkeypatch, coin: int
) -> None:
    # The validation queue serves Examples in id order, so the True one must not
    # always come first. The coin (secrets.randbelow) decides; both outcomes are written.
    # webapp.generate.submission draws from the standard secrets module: patch it there.
    monkeypatch.setattr(secrets, "randbelow", lambda n: coin)
    client = client_for(site)
    start_prolific(client, f"gen-order-{coin}")
    fields = task(client)
    r = client.post(
        "/generate",
        data=answer(fields, relation="on top of", true_image="1"),
        follow_redirects=False,
    )
    assert r.status_code == 303
    _, examples = _rows(engine)
    assert [e.label for e in examples] == ([True, False] if coin == 0 else [False, True])


def test_caption_signals_stored_with_the_caption_and_checked(site, engine) -> None:  # type: ignore[no-untyped-def]
    from vsr_core.models import ItemSignal

    client = client_for(site)
    start_prolific(client, "gen9")
    fields = task(client)
    bad = client.post(
        "/generate",
        data=answer(fields, relation="near", ent1="a", true_image="1", signals="paste=1"),
    )
    assert bad.status_code == 422 and "not understood" in bad.text
    assert _rows(engine) == ([], [])
    good = "shown=5100;focus=2;pointer=40;keys=3;canary=0;paste=1"
    r = client.post(
        "/generate",
        data=answer(fields, relation="near", ent1="a", true_image="1", signals=good),
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    (ann,), _ = _rows(engine)
    with Session(engine) as s:
        (row,) = s.exec(select(ItemSignal)).all()
    assert (row.annotation_id, row.vote_id, row.worker_id) == (ann.id, None, ann.worker_id)
    assert (row.pasted, row.focus_changes, row.shown_ms) == (True, 2, 5100)
