"""The task page's measurements of each answer reach the item-signal table with the answer,
on both backends, through the form and the JSON API; hostile values are refused in plain
words and store nothing (docs/quality.md)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.webapp_coco import client_for, form_field
from tests.webapp.validate.test_routes import site, start  # noqa: F401 - the fixture
from vsr_core.models import ItemSignal, Vote

GOOD = "shown=2310;focus=1;pointer=14;keys=2;canary=0"
HOSTILE = [
    "shown=2310;focus=1;pointer=14;keys=2",  # incomplete
    "shown=-5;focus=0;pointer=0;keys=0;canary=0",  # negative
    "shown=123456789;focus=0;pointer=0;keys=0;canary=0",  # nine digits
    "shown=1;focus=0;pointer=0;keys=0;canary=2",
    "shown=1;focus=0;pointer=0;keys=0;canary=0;" + "x" * 200,  # oversized
    "shown=１２;focus=0;pointer=0;keys=0;canary=0",  # fullwidth digits pass str.isdigit()
    "shown=1;focus=0;pointer=0;keys=0;canary=0\n",
]


def test_form_vote_stores_its_signals_once(site: Any, engine: Engine) -> None:  # noqa: F811
    client = client_for(site)
    start(client, "sig1")
    page = client.get("/validate")
    assert 'name="signals"' in page.text
    # The canary is hidden from people: off screen, aria-hidden, inert, not focusable.
    assert 'class="v-canary" aria-hidden="true" inert' in page.text
    assert 'id="v-canary-btn" tabindex="-1"' in page.text
    fields = {k: form_field(page.text, k) for k in ("csrf", "assignment_id")}
    for bad in HOSTILE:
        r = client.post("/validate", data=fields | {"answer": "true", "signals": bad})
        assert r.status_code == 422, (bad, r.status_code)
        assert "Traceback" not in r.text
    with Session(engine) as s:
        assert s.exec(select(Vote)).all() == [] and s.exec(select(ItemSignal)).all() == []
    r = client.post(
        "/validate", data=fields | {"answer": "true", "signals": GOOD}, follow_redirects=False
    )
    assert r.status_code == 303, r.text
    again = fields | {"answer": "false", "signals": GOOD.replace("canary=0", "canary=1")}
    client.post("/validate", data=again, follow_redirects=False)  # a replay adds nothing
    with Session(engine) as s:
        (vote,) = s.exec(select(Vote)).all()
        (row,) = s.exec(select(ItemSignal)).all()
    assert (row.vote_id, row.worker_id, row.annotation_id) == (vote.id, vote.worker_id, None)
    assert (row.shown_ms, row.image_shown, row.focus_changes) == (2310, True, 1)
    assert (row.pointer_events, row.key_events, row.canary) == (14, 2, False)


def test_api_vote_signals_and_answer_before_the_photo(site: Any, engine: Engine) -> None:  # noqa: F811
    client = client_for(site)
    start(client, "sig2")
    item = client.get("/api/validate/item").json()["item"]
    body = {"assignment_id": item["assignment_id"], "value": True}
    bad = client.post("/api/validate/votes", json=body | {"signals": HOSTILE[0]})
    assert bad.status_code == 422 and "not understood" in bad.json()["detail"]
    blind = "shown=none;focus=0;pointer=0;keys=0;canary=1"
    out = client.post("/api/validate/votes?next=1", json=body | {"signals": blind})
    assert out.status_code == 201, out.text
    nxt = out.json()["next"]["item"]
    plain = client.post(
        "/api/validate/votes", json={"assignment_id": nxt["assignment_id"], "value": False}
    )
    assert plain.status_code == 201  # no measurements: the vote counts, no signal row
    with Session(engine) as s:
        (row,) = s.exec(select(ItemSignal)).all()
        assert len(s.exec(select(Vote)).all()) == 2
    assert (row.shown_ms, row.image_shown, row.canary) == (None, False, True)
