"""`vsr invite create` and the front page."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from vsr_core.db import make_engine
from vsr_core.models import InviteToken, Worker
from vsr_core.settings import Settings
from webapp.app import create_app

VSR = str(Path(sys.executable).parent / "vsr")


def _vsr(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": db_url, "BASE_URL": "https://study.example"}
    env.pop("VSR_DEBUG", None)
    return subprocess.run([VSR, *args], capture_output=True, text=True, env=env, timeout=120)


def test_invite_create_prints_links_and_is_idempotent(db_url: str) -> None:
    res = _vsr(db_url, "invite", "create", "--label", "lab", "--token", "lab-team-1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "generate: https://study.example/start/generate?token=lab-team-1",
        "validate: https://study.example/start/validate?token=lab-team-1",
    ]
    again = _vsr(db_url, "invite", "create", "--token", "lab-team-1")
    assert again.returncode == 0 and again.stdout == res.stdout
    engine = make_engine(db_url)
    with Session(engine) as s:
        tokens = s.exec(select(InviteToken)).all()
        assert [(t.token, sorted(t.roles)) for t in tokens] == [
            ("lab-team-1", ["generate", "validate"])
        ]
    engine.dispose()


def test_invite_create_random_token_and_roles(db_url: str) -> None:
    res = _vsr(db_url, "invite", "create", "--roles", "validate")
    assert res.returncode == 0, res.stderr
    (line,) = res.stdout.splitlines()
    assert line.startswith("validate: https://study.example/start/validate?token=")
    assert len(line.rsplit("=", 1)[1]) >= 20


def test_invite_create_bad_input_is_one_line(db_url: str) -> None:
    for args in (["--roles", "admin"], ["--token", "<script>"], ["--roles", ""]):
        res = _vsr(db_url, "invite", "create", *args)
        assert res.returncode == 2  # a bad option value, as for every usage error
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    ok = _vsr(db_url, "invite", "create", "--token", "only-gen", "--roles", "generate")
    assert ok.returncode == 0
    clash = _vsr(db_url, "invite", "create", "--token", "only-gen", "--roles", "validate")
    assert clash.returncode == 1 and "other roles" in clash.stderr
    engine = make_engine(db_url)
    with Session(engine) as s:
        assert len(s.exec(select(InviteToken)).all()) == 1
    engine.dispose()


def test_front_page_and_invite_entry(db_url: str) -> None:
    assert _vsr(db_url, "invite", "create", "--token", "front-door").returncode == 0
    engine = make_engine(db_url)
    settings = Settings(database_url=db_url, secret_key="invite-home-" + "k" * 32)
    client = TestClient(create_app(settings, engine))
    page = client.get("/")
    assert page.status_code == 200
    assert "study link" in page.text and 'href="/admin"' in page.text
    entry = client.get("/start/generate?token=front-door")
    assert entry.status_code in (200, 303, 307)
    with Session(engine) as s:
        (worker,) = s.exec(select(Worker)).all()
        assert worker.source == "invite"
    bad = client.get("/start/generate?token=nope-nope")
    assert 400 <= bad.status_code < 500
    engine.dispose()
