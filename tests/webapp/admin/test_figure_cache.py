"""The dashboard's figures kept on disk (webapp/admin/cache.py), on SQLite and PostgreSQL, on
real VSR records through HTTP: a restarted server serves the figures the last one counted
while it counts again, ignores a file it did not sign, and an admin action forgets them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.admin_seed import Seeded, read_raw, seed
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import login, make_admin_app
from vsr_core.models import Example
from webapp.admin import pages
from webapp.admin.cache import FigureCache


@pytest.fixture
def seeded(engine: Engine, vsr_dir: Path) -> Seeded:
    return seed(engine, read_raw(vsr_dir, every=80))


def server(db_url: str, engine: Engine, tmp_path: Path, **cache: Any) -> tuple[TestClient, str]:
    """A fresh app on the same database and folders: what a restarted server is."""
    app = make_admin_app(db_url, engine, tmp_path)
    if cache:  # the app's own cache class, tuned so a test can see a stale figure
        settings = app.state.settings
        app.state.admin_cache = FigureCache(
            directory=pages.figure_cache_dir(settings),
            secret=settings.secret_key.encode(),
            **cache,
        )
    client = TestClient(app)
    return client, login(client)


def test_kept_figures_survive_a_restart_and_forged_ones_are_ignored(
    db_url: str, engine: Engine, tmp_path: Path, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Session(engine) as s:
        create_owner(s, "alice", "correct horse battery")
    first, _ = server(db_url, engine, tmp_path)
    n = len(seeded.example_ids)
    assert f"{n} matching Examples" in first.get("/admin/data").text
    folder = tmp_path / "var" / "image_cache" / "dashboard-figures"
    assert list(folder.rglob("*.fig")), "the figures were not kept"
    # Examples arrive while no server runs (an import) ...
    with Session(engine) as s:
        model = s.get(Example, seeded.example_ids[0])
        assert model is not None
        s.add(Example(**model.model_dump(exclude={"id", "source_key", "annotation_id"})))
        s.commit()
    # ... a restarted server that never recounts in the request (as for a large study)
    # answers with the kept count at once and counts again behind it.
    # (The data page's count: logging in visits the overview, not it.) A small study's
    # figures are recounted in the request once the data changed, so this one is set up as
    # a large study is.
    monkeypatch.setattr(pages, "IN_REQUEST_BELOW_EXAMPLES", 0)
    again, _ = server(db_url, engine, tmp_path, sync_below=0.0)
    page = again.get("/admin/data").text
    assert f"{n} matching Examples" in page and "counted" in page
    deadline = time.monotonic() + 30
    while f"{n + 1} matching Examples" not in again.get("/admin/data").text:
        assert time.monotonic() < deadline, "the background count never arrived"
        time.sleep(0.1)
    # A file the server did not sign (tampered, or another key) is not read: counted anew.
    for f in folder.rglob("*.fig"):
        f.write_bytes(b"\0" * 32 + f.read_bytes()[32:])
    forged, token = server(db_url, engine, tmp_path, sync_below=0.0, wait_first=60.0)
    assert f"{n + 1} matching Examples" in forged.get("/admin/data").text
    # An admin action forgets the kept figures along with the ones in memory.
    r = forged.post(
        f"/admin/examples/{seeded.example_ids[1]}/gold",
        data={"gold": "true", "csrf_token": token},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert not list(folder.rglob("*.fig"))
