"""External ids are checked exactly (docs/security.md); hostile whitespace and look-alike
Unicode never make a second identity."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.webapp_coco import client_for, make_app
from vsr_core.models import InviteToken, Worker

PID = "5f1e2d3c4b5a69788796a5b4"
STUDY = "60a1b2c3d4e5f60718293a4b"
SESSION = "61b2c3d4e5f60718293a4b5c"
WORKER = "A1B2C3D4E5F6G7"
ASSIGNMENT = "3ABCDEFGHIJKLMNOPQRSTUVWXYZ012"
HIT = "3ZYXWVUTSRQPONMLKJIHGFEDCBA987"
TOKEN = "invite-abc-123"

# Each hostile variant of a good value: whitespace around it and look-alike characters in it.
HOSTILE: list[Callable[[str], str]] = [
    lambda v: v + "\n",
    lambda v: v + "\r\n",
    lambda v: v + "\r",
    lambda v: "\t" + v,
    lambda v: v + " ",
    lambda v: v + "\u00a0",
    lambda v: "\u200b" + v,
    lambda v: v + "\ufeff",
    lambda v: v[:-1] + "\u200d" + v[-1],
    lambda v: v.translate(str.maketrans("0123456789", "０１２３４５６７８９")),  # full-width
    lambda v: v.replace("a", "\u0430").replace("A", "\u0410"),  # Cyrillic a / A
    lambda v: v.replace("1", "\u0661"),  # Arabic-Indic one
    lambda v: v.upper() if v.islower() or any(c.islower() for c in v) else v.lower(),
]

ENTRY_LINKS = {
    "PROLIFIC_PID": ({"PROLIFIC_PID": PID, "STUDY_ID": STUDY, "SESSION_ID": SESSION}, 400),
    "STUDY_ID": ({"PROLIFIC_PID": PID, "STUDY_ID": STUDY, "SESSION_ID": SESSION}, 400),
    "SESSION_ID": ({"PROLIFIC_PID": PID, "STUDY_ID": STUDY, "SESSION_ID": SESSION}, 400),
    "workerId": ({"workerId": WORKER, "assignmentId": ASSIGNMENT, "hitId": HIT}, 400),
    "assignmentId": ({"workerId": WORKER, "assignmentId": ASSIGNMENT, "hitId": HIT}, 400),
    "hitId": ({"workerId": WORKER, "assignmentId": ASSIGNMENT, "hitId": HIT}, 400),
    "token": ({"token": TOKEN}, 403),
}


@pytest.fixture
def site(db_url: str, engine: Engine, tmp_path: Path) -> Any:
    with Session(engine) as s:
        s.add(InviteToken(token=TOKEN, label="lab", roles=["generate"]))
        s.commit()
    return make_app(db_url, tmp_path, platform_id_formats="exact")


def _link(params: dict[str, str]) -> str:
    return "/start/generate?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())


def test_real_formats_enter(site: Any, engine: Engine) -> None:
    for name, (params, _status) in ENTRY_LINKS.items():
        r = client_for(site).get(_link(params), follow_redirects=False)
        assert r.status_code == 303, (name, r.text)
    with Session(engine) as s:
        ids = sorted((w.source, w.external_id) for w in s.exec(select(Worker)).all())
    assert ids == [("invite", ids[0][1]), ("mturk", WORKER), ("prolific", PID)]


@pytest.mark.parametrize("name", sorted(ENTRY_LINKS))
def test_hostile_variants_are_refused(site: Any, engine: Engine, name: str) -> None:
    params, status = ENTRY_LINKS[name]
    for k, variant in enumerate(HOSTILE):
        bad = variant(params[name])
        if bad == params[name]:
            continue
        r = client_for(site).get(_link({**params, name: bad}), follow_redirects=False)
        assert r.status_code == status, (name, k, repr(bad), r.status_code)
        assert "Traceback" not in r.text
    with Session(engine) as s:
        assert s.exec(select(Worker)).all() == []  # no identity was made from any of them


def test_trailing_newline_is_not_a_second_identity_in_safe_mode(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    """The reported attack: ``PROLIFIC_PID=selfA%0A`` was a second worker (``re.match`` with
    ``$``). Also with the lenient development format."""
    app = make_app(db_url, tmp_path, platform_id_formats="safe")
    assert (
        client_for(app)
        .get("/start/generate?PROLIFIC_PID=selfA", follow_redirects=False)
        .status_code
        == 303
    )
    for bad in ("selfA%0A", "selfA%0D%0A", "selfA%09", "selfA%C2%A0", "self%EF%BC%A1"):
        r = client_for(app).get(f"/start/generate?PROLIFIC_PID={bad}", follow_redirects=False)
        assert r.status_code == 400, bad
    with Session(engine) as s:
        assert [w.external_id for w in s.exec(select(Worker)).all()] == ["selfA"]
